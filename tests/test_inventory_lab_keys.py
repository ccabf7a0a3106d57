"""The inventory keys a test network needs: the load address, the CPUs kept online, a label."""

from __future__ import annotations

import pytest

from tunepath.errors import TunepathError
from tunepath.live.hosts import load_inventory
from tunepath.live.session import baseline_cpus, masker_for, server_address, LiveOptions

pytestmark = pytest.mark.fast

LAB = """label = "Lab: network namespaces on one machine"
[server]
host = "127.0.0.1"
port = 2201
user = "tplab-srv"
address = "10.213.7.1"
baseline_cpus = "0"
[[clients]]
host = "127.0.0.1"
port = 2202
address = "10.213.7.11"
[[clients]]
host = "127.0.0.1"
port = 2203
"""


def _inventory(tmp_path, text=LAB):
    path = tmp_path / "hosts.toml"
    path.write_text(text)
    return load_inventory(path)


def test_load_goes_to_the_server_address_not_the_ssh_host(tmp_path):
    inv = _inventory(tmp_path)
    assert not inv.same_machine                       # three sshd ports: three hosts
    assert server_address(inv) == "10.213.7.1"
    assert inv.label == "Lab: network namespaces on one machine"
    assert inv.clients[1].load_address == "127.0.0.1"     # no address: the host itself


def test_baseline_cpus_from_the_inventory_must_be_online(tmp_path):
    inv = _inventory(tmp_path)
    assert baseline_cpus(inv, [0, 1], "server") == [0]
    with pytest.raises(TunepathError, match=r"CPU\(s\) 3, which are not online"):
        baseline_cpus(_inventory(tmp_path, LAB.replace('"0"', '"0,3"')), [0, 1], "server")
    default = _inventory(tmp_path, LAB.replace('baseline_cpus = "0"\n', ""))
    assert baseline_cpus(default, list(range(16)), "server") == list(range(8))


@pytest.mark.parametrize("edit, message", [
    (('baseline_cpus = "0"', 'baseline_cpus = "1-0"'), "runs backwards"),
    (('baseline_cpus = "0"', 'baseline_cpus = 0'), "baseline_cpus must be a string"),
    (('address = "10.213.7.11"', 'address = "10.213.7.11"\nbaseline_cpus = "0"'), "unknown key"),
    (('address = "10.213.7.1"', 'address = "a b"'), "address must be a DNS name"),
    (('label = "Lab: network namespaces on one machine"', 'label = 3'), "label must be a string"),
])
def test_bad_lab_keys_are_one_line(tmp_path, edit, message):
    with pytest.raises(TunepathError, match=message) as err:
        _inventory(tmp_path, LAB.replace(*edit))
    assert "\n" not in str(err.value)


def test_masked_runs_hide_the_load_addresses(tmp_path):
    inv = _inventory(tmp_path)
    masker = masker_for(inv, LiveOptions(hosts_file=str(inv.source), mask_hosts=True))
    masked = masker("wrk -c8 http://10.213.7.1:8080/ from 10.213.7.11")
    assert "10.213.7" not in masked
