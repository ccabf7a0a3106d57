"""The lab's server VM (``tunepath lab up --vm``): what it writes (inventory, state) without a VM,
and, as root where QEMU can run, one real cycle of the IOMMU change on a real guest kernel."""

from __future__ import annotations

import json

import pytest

from tunepath.errors import TunepathError
from tunepath.lab.inventory import hosts_toml
from tunepath.lab.state import LabState, VmState, load_state, save_state
from tunepath.live.hosts import load_inventory


def test_with_a_vm_the_inventory_s_server_is_the_vm_and_its_label_says_emulated(tmp_path):
    key, known = tmp_path / "id_ed25519", tmp_path / "known_hosts"
    key.write_text("not a real key")
    state = LabState("tplab", str(tmp_path))
    for port, h in zip((40001, 40002, 40003), state.hosts):
        h.port = port
    (tmp_path / "hosts.toml").write_text(hosts_toml("tplab", state.hosts, key, known, "0", vm_port=40009))
    inventory = load_inventory(tmp_path / "hosts.toml")
    server = inventory.server
    assert (server.port, server.user, server.address, server.baseline_cpus) == (40009, "tunepath", "10.213.7.2", "0")
    assert [(c.port, c.user) for c in inventory.clients] == [(40002, "tplab-c1"), (40003, "tplab-c2")]
    assert "QEMU virtual machine as the server" in inventory.label and "emulated" in inventory.label


def test_the_vm_s_state_round_trips_and_a_damaged_one_is_one_line(tmp_path):
    state = LabState("tplab", str(tmp_path), vm=VmState("/x/.cache/vm-abc/base.raw", 4242, 40009, 4343))
    save_state(tmp_path / "state.json", state)
    assert load_state(tmp_path / "state.json") == state
    raw = json.loads((tmp_path / "state.json").read_text())
    raw["vm"]["pid"] = -1
    (tmp_path / "state.json").write_text(json.dumps(raw))
    with pytest.raises(TunepathError, match="vm.pid must be a positive whole number"):
        load_state(tmp_path / "state.json")
    raw["vm"] = "up"
    (tmp_path / "state.json").write_text(json.dumps(raw))
    with pytest.raises(TunepathError, match="vm must be null or an object"):
        load_state(tmp_path / "state.json")
