"""A run on an emulated server (the lab's QEMU VM) is marked as such from the inventory, shown
apart and never ranked; the NUMA step works on a host whose CPU 0 cannot go offline and whose
NIC is virtio (issue 16)."""

from __future__ import annotations

import copy

import json
import re
import shutil

import pytest

from conftest import ROOT
from tunepath.analysis.compare import compare_document, default_pair
from tunepath.analysis.frames import measurements_frame
from tunepath.errors import TunepathError
from tunepath.evidence.store import RunStore
from tunepath.live.inventory import load_inventory
from tunepath.live.measure import placement
from tunepath.model.context import HostContext
from tunepath.publish.hugo_data import step_document
from tunepath.steps import REGISTRY

pytestmark = pytest.mark.docs

LIVE = "live-20261124-081847-vm"


@pytest.fixture
def store(tmp_path):
    """The reference runs and one live run, the live run marked as recorded on an emulated server."""
    dst = tmp_path / "runs"
    for run_id in ("reference-aws-c8g", "reference-grace", "live-20261124-051513-vm", LIVE):
        shutil.copytree(ROOT / "runs" / run_id, dst / run_id)
    record = json.loads((dst / LIVE / "run.json").read_text())
    record.pop("superseded_by", None)
    record["emulated"] = True
    (dst / LIVE / "run.json").write_text(json.dumps(record, indent=2))
    old = json.loads((dst / "live-20261124-051513-vm" / "run.json").read_text())
    old.pop("superseded_by", None)
    (dst / "live-20261124-051513-vm" / "run.json").write_text(json.dumps(old, indent=2))
    return RunStore(dst, REGISTRY.names)


@pytest.mark.fast
def test_the_mark_is_read_from_the_record_and_an_emulated_run_is_never_the_default_pair(store):
    runs = store.load_all()
    emulated = {r.run_id for r in runs if r.emulated}
    assert emulated == {LIVE}
    # no two real runs share a host kind: no pair opens first (never aws-c8g against Grace, never the VM)
    assert default_pair(runs) is None
    twin = copy.deepcopy(next(r for r in runs if r.run_id == LIVE))
    assert default_pair([*runs, twin]) is None          # two emulated runs of one kind: still never the default


@pytest.mark.fast
def test_no_comparison_sets_an_emulated_run_against_a_real_host(store):
    runs = store.load_all()
    doc = compare_document(runs, measurements_frame(runs, REGISTRY), REGISTRY, REGISTRY.get("compare"))
    for pair in doc["pairs"]:
        assert LIVE not in (pair["a"]["run_id"], pair["b"]["run_id"]), pair["id"]
    assert len(doc["pairs"]) == 3                      # the three real runs, each pair once


@pytest.mark.fast
def test_a_step_page_shows_the_emulated_run_last_labelled_and_never_as_its_primary_run(store):
    runs = [r for r in store.load_all() if r.kind == "live"]
    doc = step_document(REGISTRY.get("baseline"), runs, measurements_frame(runs, REGISTRY), [], {}, path=REGISTRY)
    assert [b["run_id"] for b in doc["runs"]] == ["live-20261124-051513-vm", LIVE]
    assert doc["primary_run"] == "live-20261124-051513-vm"
    assert doc["runs"][-1]["emulated"] is True and not doc["runs"][0].get("emulated")


@pytest.mark.fast
def test_the_inventory_says_whether_the_server_is_emulated(tmp_path):
    base = '[server]\nhost = "10.0.0.1"\n[[clients]]\nhost = "10.0.0.2"\n'
    (tmp_path / "a.toml").write_text(base)
    (tmp_path / "b.toml").write_text("emulated = true\n" + base)
    (tmp_path / "c.toml").write_text('emulated = "yes"\n' + base)
    assert load_inventory(tmp_path / "a.toml").emulated is False
    assert load_inventory(tmp_path / "b.toml").emulated is True
    with pytest.raises(TunepathError, match="emulated must be true or false"):
        load_inventory(tmp_path / "c.toml")


VM = HostContext(total_cpus=2, baseline_cpus=(0,), numa_cpus=(1,), fixed_cpus=(0,), nic="eth0", nic_queues=1,
                 tomcat_home="~/apache-tomcat-11.0.10")


@pytest.mark.fast
def test_the_numa_move_leaves_a_cpu_that_cannot_go_offline_and_pins_tomcat_to_the_node():
    blocks = {b.id: b for b in REGISTRY.get("numa").plan(VM)}
    move = blocks["move-cpus"]
    assert "echo 1 > /sys/devices/system/cpu/cpu${no}/online" in move.text and "for no in 1;" in move.text
    assert "echo 0" not in move.text                       # CPU 0 is not taken offline: it cannot be
    assert move.title == ("Bring CPU 1 online and take every other CPU offline but CPU 0, which cannot go "
                          "offline on this host (Tomcat is pinned to CPU 1 instead)")
    assert "taskset -c 1 ~/apache-tomcat-11.0.10/bin/startup.sh" in blocks["restart-tomcat"].text
    assert placement(VM, blocks["restart-tomcat"])["server_cpus"] == "1"
    iommu = {b.id: b for b in REGISTRY.get("iommu").plan(VM)}
    assert "taskset -c 1 " in iommu["restart-tomcat"].text


@pytest.mark.fast
def test_a_host_whose_cpus_can_all_go_offline_is_moved_as_before():
    ctx = HostContext(total_cpus=4, baseline_cpus=(0, 1), numa_cpus=(2, 3), nic="eth0", nic_queues=2)
    blocks = {b.id: b for b in REGISTRY.get("numa").plan(ctx)}
    assert "for no in {0..1}; do sudo bash -c \"echo 0" in blocks["move-cpus"].text
    assert "taskset" not in blocks["restart-tomcat"].text
    assert blocks["move-cpus"].title == "Bring CPUs 2-3 online and take every other CPU offline"


@pytest.mark.fast
def test_the_nic_node_command_falls_back_to_the_pci_parent_of_a_virtio_nic(tmp_path):
    import subprocess

    text = {b.id: b for b in REGISTRY.get("numa").plan(VM)}["nic-node"].text
    assert text == ("cat /sys/class/net/eth0/device/numa_node 2>/dev/null || "
                    "cat /sys/class/net/eth0/device/../numa_node")
    # the same command against a sysfs-shaped tree: a virtio device under its PCI function
    pci = tmp_path / "sys/devices/pci0000:00/0000:00:03.0"
    (pci / "virtio0").mkdir(parents=True)
    (pci / "numa_node").write_text("1\n")
    net = tmp_path / "sys/class/net/eth0"
    net.mkdir(parents=True)
    (net / "device").symlink_to(pci / "virtio0")
    out = subprocess.run(["bash", "-c", text.replace("/sys/", f"{tmp_path}/sys/")], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout == "1\n"


# --- the published pages ------------------------------------------------------------------
def _emulated_runs(step: str | None = None):
    """The emulated runs on the pages (that ran ``step``: a run of some steps only, such as wrk2's
    build on the Arm guest, shows on those steps' pages alone)."""
    return [r for r in RunStore(ROOT / "runs", REGISTRY.names).load_all() if r.emulated and not r.info.superseded_by
            and (step is None or any(b["step"] == step for b in r.record["blocks"]))]


def test_the_iommu_page_shows_the_kernel_command_line_before_and_after_each_reboot(built_site):
    runs = _emulated_runs("iommu")
    if not runs:
        pytest.skip("no run on an emulated server is recorded in runs/")
    html = built_site.page("iommu").read_text()
    for run in runs:
        strict = next(b for b in run.record["blocks"] if b["block"] == "iommu-strict")["kernel_cmdline"]
        passthrough = next(b for b in run.record["blocks"] if b["block"] == "iommu-passthrough")["kernel_cmdline"]
        assert "iommu.strict=1 iommu.passthrough=0" in strict and "iommu.strict=0 iommu.passthrough=1" in passthrough
        for line in (run.server.facts["kernel_cmdline"], strict, passthrough):
            assert f"<code class=\"language-text\">{line}</code>" in html
        dmesg = next(v for v in run.verifications if v.step == "iommu" and v.name == "dmesg-iommu")
        assert "Passthrough" in dmesg.output.read_text()
    assert "an emulated server: a QEMU virtual machine" in html


def test_an_emulated_run_is_labelled_on_its_step_pages_and_left_out_of_the_default_comparison(built_site):
    runs = _emulated_runs()
    if not runs:
        pytest.skip("no run on an emulated server is recorded in runs/")
    numa = built_site.page("numa").read_text()
    assert "label-emulated" in numa
    compare = built_site.page("compare").read_text()
    pairs = re.findall(r'<details class="compare-pair" id="[^"]*" data-a="([^"]*)" data-b="([^"]*)"( open)?>', compare)
    opened = [p for p in pairs if p[2]]
    assert pairs and len(opened) <= 1 and (not opened or pairs[0] == opened[0])   # a default pair comes first, open
    on_numa = {r.run_id for r in _emulated_runs("numa")}
    for run in runs:
        assert (f'data-run="{run.run_id}"' in numa) == (run.run_id in on_numa)
        assert all(run.run_id not in p[:2] for p in opened)
        assert all(run.run_id not in (a, b) for a, b, _ in pairs)     # in no pair: its figures are never a ratio
