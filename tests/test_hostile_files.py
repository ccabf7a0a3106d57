"""Hostile files (issue 30, findings 3 to 5): tunepath removes or publishes only what is its own.

- ``tunepath notebooks`` removes a numbered notebook no step owns only when it carries the mark
  the template writes (``metadata.tunepath.generated``); a user's own ``01-my-analysis.ipynb``
  stays, and the command says so in one line.
- ``tunepath lab down`` removes a user only when the account still matches the creation mark the
  lab wrote into its home (its uid, its home's inode): a state listing someone else's account, or
  an account recreated under a lab user's name, removes nothing. Accounts are faked here (pwd,
  useradd and userdel are monkeypatched): no real user is made.
- A run's file with more than one hard link (its contents may be a file outside the run) is
  refused in one line naming the run and the file, before a build writes anything.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
from pathlib import Path

import pytest

from conftest import ROOT
from tunepath.errors import TunepathError

pytestmark = pytest.mark.fast


# ---- finding 3: `tunepath notebooks` removes only the notebooks it generated --------------------

USER_NOTEBOOK = {"cells": [{"cell_type": "markdown", "id": "mine", "metadata": {}, "source": ["my analysis"]}],
                 "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
                 "nbformat": 4, "nbformat_minor": 5}


def _marked(path: Path) -> bool:
    return json.loads(path.read_text(encoding="utf-8"))["metadata"].get("tunepath") == {"generated": True}


def test_generated_notebooks_carry_the_mark_and_the_committed_ones_too():
    from tunepath.publish.notebooks import render
    from tunepath.steps import REGISTRY

    assert all(json.loads(render(step))["metadata"]["tunepath"] == {"generated": True} for step in REGISTRY)
    committed = sorted((ROOT / "notebooks").glob("*.ipynb"))
    assert [p.name for p in committed] == sorted(step.notebook for step in REGISTRY)
    assert all(_marked(p) for p in committed), [p.name for p in committed if not _marked(p)]


def test_notebooks_leaves_a_users_numbered_notebook_and_says_so(tmp_path, capsys):
    from tunepath.cli import main
    from tunepath.publish.notebooks import render
    from tunepath.steps import REGISTRY

    mine = tmp_path / "01-my-analysis.ipynb"
    mine.write_text(json.dumps(USER_NOTEBOOK), encoding="utf-8")
    stale = tmp_path / "99-gone.ipynb"                       # one this command wrote, for a step now gone
    stale.write_text(render(REGISTRY.get("baseline")), encoding="utf-8")
    assert main(["notebooks", "--notebooks-dir", str(tmp_path)]) == 0
    out, err = capsys.readouterr()
    assert mine.is_file() and json.loads(mine.read_text(encoding="utf-8")) == USER_NOTEBOOK
    assert not stale.exists() and "removed 99-gone.ipynb (no step owns it)" in out
    left = [line for line in out.splitlines() if "01-my-analysis.ipynb" in line]
    assert len(left) == 1 and "Traceback" not in out + err, out + err
    assert str(tmp_path) in left[0] and "not removed" in left[0] and "rename" in left[0], left[0]
    assert all((tmp_path / step.notebook).is_file() and _marked(tmp_path / step.notebook) for step in REGISTRY)


@pytest.mark.parametrize("content", ["{}", "not JSON", json.dumps({"metadata": {"tunepath": {"generated": "yes"}}})])
def test_notebooks_leaves_any_unmarked_numbered_file(tmp_path, content):
    from tunepath.publish.notebooks import check_all, write_all
    from tunepath.steps import REGISTRY

    other = tmp_path / "42-other.ipynb"
    other.write_text(content, encoding="utf-8")
    lines = write_all(tmp_path, REGISTRY)
    assert other.read_text(encoding="utf-8") == content
    assert [line for line in lines if "42-other.ipynb" in line and "not removed" in line]
    assert [p for p in check_all(tmp_path, REGISTRY) if "42-other.ipynb" in p and "rename" in p]


def test_notebooks_leaves_a_numbered_symlink_and_writes_no_notebook_through_one(tmp_path):
    from tunepath.publish.notebooks import render, write_all
    from tunepath.steps import REGISTRY

    outside = tmp_path / "outside"
    outside.mkdir()
    target = outside / "kept.ipynb"
    target.write_text(render(REGISTRY.get("baseline")), encoding="utf-8")   # marked, but not in the directory
    notebooks = tmp_path / "notebooks"
    notebooks.mkdir()
    (notebooks / "77-link.ipynb").symlink_to(target)
    (notebooks / REGISTRY.get("numa").notebook).symlink_to(outside / "mine.ipynb")
    (outside / "mine.ipynb").write_text("mine", encoding="utf-8")
    write_all(notebooks, REGISTRY)
    assert (notebooks / "77-link.ipynb").is_symlink() and target.is_file()
    assert (outside / "mine.ipynb").read_text(encoding="utf-8") == "mine"
    assert not (notebooks / REGISTRY.get("numa").notebook).is_symlink()


@pytest.mark.parametrize("blocked", ["notebook", "temporary file"])
def test_a_directory_where_a_notebook_goes_stops_the_command_before_it_writes_anything(tmp_path, capsys, blocked):
    """Issue 30, item 6 (the census): with 02-baseline.ipynb a directory, `tunepath notebooks` exited 2
    after writing 01-setup.ipynb, and left .02-baseline.ipynb.tmp behind."""
    from tunepath.cli import main
    from tunepath.steps import REGISTRY

    name = REGISTRY.get("baseline").notebook
    (tmp_path / (name if blocked == "notebook" else f".{name}.tmp")).mkdir()
    before = sorted(p.name for p in tmp_path.iterdir())
    assert main(["notebooks", "--notebooks-dir", str(tmp_path)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert f"{name}" in err and "is a directory" in err and "nothing was written" in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_a_failure_while_writing_the_notebooks_writes_none_and_leaves_no_temporary_file(tmp_path, monkeypatch):
    from tunepath.errors import TunepathError
    from tunepath.publish import writefiles
    from tunepath.publish.notebooks import write_all
    from tunepath.steps import REGISTRY

    real, opened = os.open, []

    def full_disk(path, flags, *args):
        if flags & os.O_CREAT:
            opened.append(path)
            if len(opened) == 3:                     # the third notebook's temporary file
                raise OSError(28, "No space left on device", str(path))
        return real(path, flags, *args)

    monkeypatch.setattr(writefiles.os, "open", full_disk)
    with pytest.raises(TunepathError, match="No space left on device") as info:
        write_all(tmp_path, REGISTRY)
    assert "\n" not in str(info.value) and "rerun `tunepath notebooks`" in str(info.value)
    assert list(tmp_path.iterdir()) == []
    monkeypatch.setattr(writefiles.os, "open", real)
    assert len(write_all(tmp_path, REGISTRY)) == len(REGISTRY)       # then all of them, at once
    assert write_all(tmp_path, REGISTRY) == [] and not list(tmp_path.glob(".*"))


# ---- finding 4: `tunepath lab down` removes only the users it created ---------------------------

class Accounts:
    """A fake passwd database: ``useradd`` and ``userdel`` (the lab's ``run``) change it."""

    def __init__(self, homes: Path):
        self.homes, self.entries, self.commands, self.next_uid = homes, {}, [], 61000

    def add(self, name: str, uid: int | None = None) -> pwd.struct_passwd:
        uid = uid if uid is not None else self.next_uid
        self.next_uid = max(self.next_uid, uid) + 1
        home = self.homes / name
        home.mkdir(parents=True, exist_ok=True)
        self.entries[name] = pwd.struct_passwd((name, "x", uid, uid, "", str(home), "/bin/bash"))
        return self.entries[name]

    def getpwnam(self, name: str) -> pwd.struct_passwd:
        return self.entries[name]

    def run(self, argv, what, hint=None, **kw):
        self.commands.append(list(argv))
        if argv[0] == "useradd":
            self.add(argv[-1])
        elif argv[0] == "userdel":
            entry = self.entries.pop(argv[-1])
            shutil.rmtree(entry.pw_dir)
        return ""

    def deleted(self) -> list[str]:
        return [argv[-1] for argv in self.commands if argv[0] == "userdel"]


@pytest.fixture
def accounts(tmp_path, monkeypatch):
    from tunepath.lab import users

    fake = Accounts(tmp_path / "home")
    monkeypatch.setattr(users, "pwd", fake)
    monkeypatch.setattr(users, "run", fake.run)
    monkeypatch.setattr(users, "tool", lambda name: name)
    return fake


PREFIX = "tphostile"


def _down(tmp_path: Path, listed: list[str]) -> list[str]:
    from tunepath.lab.state import LabPaths, LabState, save_state
    from tunepath.lab.teardown import teardown

    directory = tmp_path / "lab"
    directory.mkdir(exist_ok=True)
    state = LabState(PREFIX, str(directory), users=list(listed))
    save_state(directory / "state.json", state)
    return teardown(state, LabPaths(directory), lambda line: None)


def test_down_leaves_an_account_it_did_not_create(tmp_path, accounts):
    victim = f"{PREFIX}-srv"
    accounts.add(victim, uid=1234)
    (Path(accounts.entries[victim].pw_dir) / "thesis.tex").write_text("years of work")
    lines = _down(tmp_path, [victim])
    assert accounts.deleted() == [] and victim in accounts.entries
    assert (Path(accounts.entries[victim].pw_dir) / "thesis.tex").read_text() == "years of work"
    said = [line for line in lines if victim in line]
    assert len(said) == 1 and "left user" in said[0] and "not one the lab created" in said[0], lines
    assert f"userdel -r {victim}" in said[0] and lines[-1] == f"lab {PREFIX} is down"
    assert not (tmp_path / "lab" / "state.json").exists()


def test_down_removes_the_accounts_it_created(tmp_path, accounts):
    from tunepath.lab import users

    names = [f"{PREFIX}-srv", f"{PREFIX}-c1"]
    for name in names:
        users.create_user(name)
    lines = _down(tmp_path, names)
    assert accounts.deleted() == names and not accounts.entries
    assert [line for line in lines if "removed user" in line] == [f"removed user {n} and its home (userdel -r)"
                                                                  for n in names]


def test_down_leaves_an_account_recreated_under_a_lab_users_name(tmp_path, accounts):
    from tunepath.lab import users

    name = f"{PREFIX}-c2"
    users.create_user(name)
    old = accounts.entries.pop(name)               # removed by hand, its home left; then made again
    accounts.add(name, uid=old.pw_uid + 7)
    lines = _down(tmp_path, [name])
    assert accounts.deleted() == [] and name in accounts.entries
    assert [line for line in lines if name in line and "left user" in line and f"uid {old.pw_uid + 7}" in line]


def test_down_leaves_an_account_whose_mark_is_a_link(tmp_path, accounts):
    from tunepath.lab import users

    name, other = f"{PREFIX}-srv", f"{PREFIX}-c1"
    users.create_user(other)
    accounts.add(name, uid=accounts.entries[other].pw_uid)        # another account with the same uid
    mark = users.CREATION_MARK
    (Path(accounts.entries[name].pw_dir) / mark).symlink_to(Path(accounts.entries[other].pw_dir) / mark)
    lines = _down(tmp_path, [name])
    assert accounts.deleted() == [] and [line for line in lines if name in line and "left user" in line]


def test_a_user_whose_mark_cannot_be_written_is_removed_at_once(tmp_path, accounts, monkeypatch):
    from tunepath.lab import users

    def unwritable(name):
        raise PermissionError(13, "Permission denied")
    monkeypatch.setattr(users, "_mark", unwritable)
    name = f"{PREFIX}-srv"
    with pytest.raises(TunepathError, match=f"creating user {name}: cannot write its creation mark"):
        users.create_user(name)
    assert accounts.deleted() == [name] and not accounts.entries


# ---- finding 5: a hard link in a run is refused, not published ----------------------------------

AWS = "reference-aws-c8g"


@pytest.fixture
def run_copy(tmp_path) -> Path:
    runs = tmp_path / "runs"
    shutil.copytree(ROOT / "runs" / AWS, runs / AWS)
    return runs


def _verify_file(runs: Path) -> tuple[str, Path]:
    rel = json.loads((runs / AWS / "run.json").read_text(encoding="utf-8"))["verification"][0]["output"]
    return rel, runs / AWS / rel


def test_a_hard_link_to_a_file_outside_the_run_is_refused(tmp_path, run_copy):
    from tunepath.evidence.store import RunError, RunStore
    from tunepath.publish.build import check_runs
    from tunepath.steps import REGISTRY

    secret = tmp_path / "secret.txt"
    secret.write_text("password=hunter2\n")
    rel, path = _verify_file(run_copy)
    path.unlink()
    os.link(secret, path)
    for load in (lambda: RunStore(run_copy, REGISTRY.names).load(AWS), lambda: check_runs(run_copy, [AWS])):
        with pytest.raises(RunError) as info:
            load()
        message = str(info.value)
        assert "\n" not in message and f"{AWS}/run.json" in message and rel in message, message
        assert "hard link" in message and "copy the file into the run instead of linking it" in message


def test_a_hard_link_inside_the_run_is_refused_too_and_a_copy_is_not(tmp_path, run_copy):
    from tunepath.evidence.store import RunError, RunStore
    from tunepath.steps import REGISTRY

    rel, path = _verify_file(run_copy)
    os.link(path, run_copy / AWS / "verify" / "second-name.txt")
    with pytest.raises(RunError, match="hard link"):
        RunStore(run_copy, REGISTRY.names).load(AWS)
    (run_copy / AWS / "verify" / "second-name.txt").unlink()
    assert RunStore(run_copy, REGISTRY.names).load(AWS).verifications[0].output == path


def test_the_cli_stops_at_a_hard_linked_run_in_one_line(tmp_path, run_copy, capsys):
    from tunepath.cli import main

    rel, path = _verify_file(run_copy)
    secret = tmp_path / "secret.txt"
    secret.write_text("password=hunter2\n")
    path.unlink()
    os.link(secret, path)
    assert main(["plan", "numa", "--run", AWS, "--runs-dir", str(run_copy)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and "hard link" in err and "hunter2" not in err, err


def test_the_committed_runs_have_no_hard_links_and_load():
    from tunepath.evidence.store import RunStore
    from tunepath.steps import REGISTRY

    assert RunStore(ROOT / "runs", REGISTRY.names).load_all()
    linked = [p for p in (ROOT / "runs").rglob("*") if p.is_file() and not p.is_symlink() and p.stat().st_nlink > 1]
    assert linked == []


def test_a_file_of_a_run_larger_than_16_mib_is_refused_before_anything_reads_it(run_copy):
    """Issue 30, review finding 11: a 1.5 GB (sparse) verification output made the notebook kernel
    use 23 GB and die. Every file a run names is capped, as `tunepath parse` caps reports."""
    from tunepath.evidence.store import MAX_FILE_BYTES, RunError, RunStore
    from tunepath.steps import REGISTRY

    rel, path = _verify_file(run_copy)
    with open(path, "r+b") as f:
        f.truncate(1536 << 20)                    # sparse: no disk used
    with pytest.raises(RunError) as info:
        RunStore(run_copy, REGISTRY.names).load(AWS)
    assert "1536 MiB" in str(info.value) and rel in str(info.value) and "\n" not in str(info.value)
    with open(path, "r+b") as f:
        f.truncate(MAX_FILE_BYTES)                # at the cap: still a run
    RunStore(run_copy, REGISTRY.names).load(AWS)
