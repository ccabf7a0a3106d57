"""What the VM fault trials found (docs/faults.md, "VM faults"): the saved original state must reach
the disk before the first change, an empty one (a power cut before its data was written) is no
saved state, the server never reboots into a grub.cfg that lacks the change, and
`tunepath restore --allow-reboot` is allowed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tunepath.errors import TunepathError
from tunepath.live.hosts import LocalHost
from tunepath.live.hoststate import GRUB_CHECK, STATE_FILE, load_original_state, save_original_state

pytestmark = pytest.mark.fast


def _state_file() -> Path:
    return Path(STATE_FILE.replace("~", str(Path.home()), 1))


def test_an_empty_saved_state_is_no_state_and_is_removed():
    path = _state_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("")
    try:
        assert load_original_state(LocalHost()) is None
        assert not path.exists()
    finally:
        path.unlink(missing_ok=True)


def test_the_state_is_written_whole_and_flushed_before_it_is_used(monkeypatch):
    host, commands = LocalHost(), []
    real_run = host.run

    def run(command, *args, **kwargs):
        commands.append(command)
        return real_run(command, *args, **kwargs)

    monkeypatch.setattr(host, "run", run)
    try:
        state = save_original_state(host, {})
        assert json.loads(_state_file().read_text())["cmdline_b64"] == state.cmdline_b64
        [write] = [c for c in commands if "original-state.json.tmp" in c]
        assert "\nsync ~/.tunepath/original-state.json.tmp && mv " in write and write.endswith("&& sync ~/.tunepath")
    finally:
        _state_file().unlink(missing_ok=True)


def test_the_grub_check_refuses_a_grub_cfg_without_the_parameter(tmp_path):
    import subprocess

    cfg = tmp_path / "grub.cfg"
    cfg.write_text("menuentry 'Debian' {\n  linux /vmlinuz root=UUID=x ro iommu.strict=1 iommu.passthrough=0\n}\n")
    check = GRUB_CHECK.replace("/boot/grub/grub.cfg", str(cfg)).replace("sudo grub-script-check", "true").replace(
        "sudo ", "")
    assert subprocess.run(["bash", "-c", check.format(param="iommu.strict=1")]).returncode == 0
    assert subprocess.run(["bash", "-c", check.format(param="iommu.strict=0")]).returncode != 0


def test_restore_allows_allow_reboot_without_apply(tmp_path):
    from tunepath.live.putback import restore_host
    from tunepath.live.session import LiveOptions

    options = LiveOptions(allow_reboot=True, hosts_file=str(tmp_path / "missing.toml"))
    with pytest.raises(TunepathError) as err:
        restore_host(options)
    assert "--allow-reboot only makes sense" not in str(err.value)
