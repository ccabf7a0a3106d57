"""The run lock on the server: who holds it, a dead owner reported with the command that clears it,
another run's lock never taken over or removed. Run on this machine (LocalHost) with a temporary HOME."""

from __future__ import annotations

import json
import os
import platform
import subprocess
from pathlib import Path

import pytest

from tunepath.errors import TunepathError
from tunepath.live.hoststate import acquire_lock, check_lock, read_lock, release_lock
from tunepath.live.hosts import LocalHost

pytestmark = pytest.mark.fast


@pytest.fixture()
def home(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("HOME", str(tmp_path))
    return tmp_path


def owner_file(home: Path) -> Path:
    return home / ".tunepath" / "lock" / "owner"


def plant(home: Path, owner: dict | str | None) -> None:
    """A lock as another run left it."""
    owner_file(home).parent.mkdir(parents=True)
    if owner is not None:
        owner_file(home).write_text(owner if isinstance(owner, str) else json.dumps(owner) + "\n")


def boot_id() -> str:
    return Path("/proc/sys/kernel/random/boot_id").read_text().strip()


def dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def refusal(home: Path, run_id: str = "live-new", hosts_file: str | None = None) -> str:
    before = owner_file(home).read_bytes() if owner_file(home).exists() else None
    with pytest.raises(TunepathError) as caught:
        acquire_lock(LocalHost(), run_id, hosts_file)
    message = str(caught.value)
    assert "\n" not in message
    after = owner_file(home).read_bytes() if owner_file(home).exists() else None
    assert after == before and owner_file(home).parent.is_dir()        # the other run's lock is untouched
    return message


def test_the_lock_records_its_owner_and_is_released_by_it(home):
    host = LocalHost()
    assert read_lock(host) is None
    acquire_lock(host, "live-20261123-100000-vm")
    owner = json.loads(owner_file(home).read_text())
    assert owner["run_id"] == "live-20261123-100000-vm" and owner["pid"] == os.getpid()
    assert owner["host"] == platform.node() and owner["boot_id"] == boot_id() and owner["since"]
    check_lock(host, "live-20261123-100000-vm")
    release_lock(host, "live-20261123-100000-vm")
    assert not owner_file(home).parent.exists()
    with pytest.raises(TunepathError, match="does not hold the lock .no lock."):
        check_lock(host, "live-20261123-100000-vm")


def test_a_dead_owner_is_reported_with_the_command_that_clears_it(home):
    plant(home, {"run_id": "live-old", "pid": dead_pid(), "host": platform.node(), "boot_id": boot_id(),
                 "since": "2026-11-23T09:00:00+0000"})
    message = refusal(home, hosts_file="/srv/my hosts.toml")
    assert message.startswith("on local: a dead run holds the lock (run live-old, pid ")
    assert "is gone" in message
    assert message.endswith("clear it and restore the server with "
                            "`tunepath restore --force --hosts '/srv/my hosts.toml'`")


def test_an_owner_from_before_a_reboot_is_dead(home):
    plant(home, {"run_id": "live-old", "pid": os.getpid(), "host": platform.node(), "boot_id": "an-earlier-boot"})
    message = refusal(home)
    assert "a dead run holds the lock" in message and "has rebooted since" in message
    assert message.endswith("`tunepath restore --force`")


@pytest.mark.parametrize("owner", [
    {"run_id": "live-busy", "pid": os.getpid(), "host": platform.node(), "boot_id": boot_id()},   # alive here
    {"run_id": "live-busy", "pid": 1, "host": "another-controller", "boot_id": "x"},            # cannot tell
    {"run_id": "live-busy", "since": "2026-11-22T07:53:37+0000"},                               # the old format
])
def test_a_live_or_unknown_owner_is_refused_and_named(home, owner):
    plant(home, owner)
    message = refusal(home)
    assert message.startswith("on local: another run holds the lock (run live-busy")
    assert "Wait for it to end; if it died, clear it with `tunepath restore --force`" in message


@pytest.mark.parametrize("owner", [None, "{not json", "[1, 2]"])
def test_a_lock_without_a_readable_owner_is_refused(home, owner):
    plant(home, owner)
    assert "(owner unknown)" in refusal(home)
    with pytest.raises(TunepathError, match="does not hold the lock .owner unknown."):
        check_lock(LocalHost(), "live-new")


def test_releasing_someone_elses_lock_does_nothing(home):
    other = {"run_id": "live-20261123-100000-vm-2", "pid": os.getpid(), "host": platform.node()}
    plant(home, other)
    before = owner_file(home).read_bytes()
    for mine in ("live-20261123-100000-vm", "live-20261123-100000", "vm-2", ""):
        release_lock(LocalHost(), mine)
        assert owner_file(home).read_bytes() == before
    with pytest.raises(TunepathError, match="run live-20261123-100000-vm does not hold the lock"):
        check_lock(LocalHost(), "live-20261123-100000-vm")
    release_lock(LocalHost(), other["run_id"])
    assert not owner_file(home).parent.exists()


def test_a_run_id_with_shell_characters_is_written_whole(home, tmp_path):
    run_id = f"live-x' \"$(touch {tmp_path}/PWNED)\"; touch {tmp_path}/PWNED2 #"
    acquire_lock(LocalHost(), run_id)
    assert json.loads(owner_file(home).read_text())["run_id"] == run_id
    check_lock(LocalHost(), run_id)
    release_lock(LocalHost(), run_id)
    assert not owner_file(home).parent.exists() and not list(tmp_path.glob("PWNED*"))


def test_a_lock_that_cannot_be_written_is_not_mistaken_for_another_run(home):
    (home / ".tunepath").write_text("a file where the state directory should be")
    with pytest.raises(TunepathError) as caught:
        acquire_lock(LocalHost(), "live-new")
    assert str(caught.value).startswith("on local: could not take the lock ~/.tunepath/lock (")
    assert "another run" not in str(caught.value) and "\n" not in str(caught.value)
