"""Verification blocks a reader can trust: trimmed to what matters, honest about the state they
were recorded in, and saying what became of a check with no output (skipped, ran and printed
nothing, failed).

Unit tests of the rules (publish/excerpt.py, publish/cmdline.py, publish/verification.py) on the
outputs recorded in runs/, then checks on the built pages: no lscpu flags or vulnerability list
and no init arguments of a kernel command line outside a collapsed block, every check with no
output says whether it was skipped (and why), printed nothing or failed (and what it printed), no skip reason repeated in a run's block, each historical source's
hardware said once, no internal seed numbers.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from bs4 import BeautifulSoup

from conftest import ROOT
from tunepath.evidence.store import RunStore
from tunepath.model.cmdline import KernelCmdline, cmdline_diff, is_relevant, reduce_cmdline
from tunepath.publish.excerpt import GENERIC_LINES, excerpt
from tunepath.publish.verification import (java_condition, kernel_cmdline_entry, source_words,
                                           verification_entries)

pytestmark = pytest.mark.fast

STORE = RunStore(ROOT / "runs")
LAB = "live-20261202-070808-vm"                  # the lab run on the pages: dry-run IOMMU blocks, numactl missing
EMPTY_DMESG = "live-20261124-081847-vm"          # superseded: its lab's dmesg printed nothing
VM = "live-20261124-135634-tunepath-vm"          # the emulated server: every block applied, two reboots
LOOPBACK = "live-20261122-075337-vm"             # superseded: Tomcat on Java 25, version.sh found 17
FIRECRACKER = ("mitigations=auto console=ttyS0 quiet iommu.strict=1 rdinit=/process_api -- "
               "--firecracker-init --addr 0.0.0.0:2024 --auth-required")


def _verify_file(run_id: str, name: str) -> str:
    return (ROOT / "runs" / run_id / "verify" / name).read_text(encoding="utf-8")


# --- kernel command line ---------------------------------------------------------------------------
def test_a_command_line_keeps_the_paths_parameters_and_drops_inits_arguments():
    c = KernelCmdline.parse(FIRECRACKER)
    assert c.relevant == ("iommu.strict=1",)
    assert c.init_args == ("--firecracker-init", "--addr", "0.0.0.0:2024", "--auth-required")
    assert c.other_count == 4                                  # mitigations, console, quiet, rdinit
    assert "init" in c.left_out() and "4 other kernel parameters" in c.left_out()
    assert "--auth-required" not in reduce_cmdline(FIRECRACKER)
    assert reduce_cmdline(FIRECRACKER).startswith("iommu.strict=1 (")


@pytest.mark.parametrize("param, relevant", [
    ("iommu.passthrough=1", True), ("iommu=pt", True), ("intel_iommu=on", True), ("amd_iommu=off", True),
    ("isolcpus=2-7", True), ("nohz_full=2-7", True), ("hugepages=512", True), ("default_hugepagesz=1G", True),
    ("transparent_hugepage=never", True), ("numa_balancing=disable", True), ("arm-smmu.disable_bypass=0", True),
    ("root=UUID=4b9a", False), ("BOOT_IMAGE=/boot/vmlinuz", False), ("console=ttyS0", False),
    ("rdinit=/process_api", False), ("quiet", False),
])
def test_relevant_parameters(param, relevant):
    assert is_relevant(param) is relevant


def test_a_quoted_value_stays_one_parameter():
    c = KernelCmdline.parse('ro dyndbg="file x.c +p" isolcpus=1')
    assert c.params == ("ro", 'dyndbg="file x.c +p"', "isolcpus=1") and c.relevant == ("isolcpus=1",)


def test_the_diff_names_every_parameter_the_reboot_added_or_removed():
    before = KernelCmdline.parse("ro console=ttyS0 iommu.strict=1 iommu.passthrough=0")
    after = KernelCmdline.parse("ro console=ttyS0 iommu.strict=0 iommu.passthrough=1")
    assert cmdline_diff(before, after) == {"added": ["iommu.strict=0", "iommu.passthrough=1"],
                                           "removed": ["iommu.strict=1", "iommu.passthrough=0"], "known": True}
    assert cmdline_diff(None, after)["known"] is False


def test_a_live_runs_command_lines_before_and_after_each_reboot():
    entry = kernel_cmdline_entry(STORE.load(VM))
    assert entry["shown"] == "" and entry["other_count"] == 5 and "BOOT_IMAGE" in entry["full"]
    assert entry["after"]["iommu-strict"]["added"] == ["iommu.strict=1", "iommu.passthrough=0"]
    assert entry["after"]["iommu-passthrough"]["shown"] == "iommu.strict=0 iommu.passthrough=1"
    lab = kernel_cmdline_entry(STORE.load(LAB))
    assert lab["init_count"] > 0 and "--" not in lab["shown"] and lab["after"] == {}
    assert kernel_cmdline_entry(STORE.load("reference-aws-c8g")) is None


# --- excerpts -----------------------------------------------------------------------------------
def test_lscpu_keeps_the_cpu_model_counts_online_list_and_numa_nodes():
    full = _verify_file(VM, "numa-lscpu.txt")
    e = excerpt("lscpu", full)
    keys = [ln.split(":")[0] for ln in e.text.splitlines()]
    assert keys == ["Architecture", "CPU(s)", "On-line CPU(s) list", "Model name", "Thread(s) per core",
                    "Core(s) per socket", "Socket(s)", "NUMA node(s)", "NUMA node0 CPU(s)", "NUMA node1 CPU(s)"]
    assert "QEMU TCG CPU version 2.5+" in e.text
    assert "Flags" not in e.text and "Vulnerability" not in e.text and "L1d cache" not in e.text
    assert e.trimmed and e.full == full and e.total_lines == len(full.splitlines()) > e.shown_lines


def test_a_short_published_lscpu_excerpt_is_shown_whole():
    full = _verify_file("reference-aws-c8g", "baseline-lscpu.txt")
    e = excerpt("lscpu", full)
    assert not e.trimmed and e.text == full.rstrip("\n")


def test_dmesg_keeps_the_iommu_mode_and_reduces_the_command_line():
    full = _verify_file(VM, "baseline-dmesg-iommu.txt")
    e = excerpt("sudo dmesg | grep iommu", full)
    assert "Adding to iommu group" in full and "Adding to iommu group" not in e.text
    assert "Default domain type: Translated" in e.text and "strict mode" in e.text
    assert "BOOT_IMAGE" not in e.text and "root=UUID" not in e.text
    assert re.search(r"Kernel command line: … iommu\.strict=1 iommu\.passthrough=0$", e.text, re.M)


def test_other_outputs_are_cut_to_their_first_lines_only_when_long():
    short = "\n".join(f"line {i}" for i in range(5))
    assert not excerpt("java -version 2>&1", short).trimmed
    long = "\n".join(f"line {i}" for i in range(40))
    e = excerpt("jmeter -n -t plan.jmx", long)
    assert e.trimmed and e.text.splitlines() == [f"line {i}" for i in range(GENERIC_LINES)]


# --- verification entries ----------------------------------------------------------------------
def test_a_check_with_no_output_says_whether_it_ran_printed_nothing_failed_or_was_skipped():
    run = STORE.load(LAB)
    dmesg = verification_entries(STORE.load(EMPTY_DMESG), "baseline")["dmesg-iommu"]
    assert dmesg["status"] == "empty" and dmesg["reason"] == "the command printed nothing" and dmesg["output"] == ""
    numa = verification_entries(run, "numa")
    assert numa["numactl-h"]["status"] == "failed" and "numactl: command not found" in numa["numactl-h"]["output"]
    assert numa["nic-numa-node"]["status"] == "failed" and "No such file or directory" in numa["nic-numa-node"]["output"]
    topology = numa["numa-topology"]                                                  # a probe block it did not run
    assert topology["status"] == "skipped" and topology["reason"] == "single NUMA node: nothing to place"


def test_an_output_recorded_without_the_steps_change_names_that_change():
    run = STORE.load(LOOPBACK)
    dmesg = verification_entries(run, "baseline")["dmesg-iommu"]
    assert dmesg["status"] == "recorded" and "lazy mode" in dmesg["excerpt"]     # not the strict mode asked for
    assert [u["block"] for u in dmesg["unapplied"]] == ["iommu-strict"]
    assert "will not reboot itself" in dmesg["unapplied"][0]["reason"]
    applied = verification_entries(STORE.load(VM), "baseline")["dmesg-iommu"]
    assert applied["unapplied"] == [] and "strict mode" in applied["excerpt"]


def test_a_probe_counts_only_the_changes_before_it():
    jvm = verification_entries(STORE.load(LAB), "jvm")
    assert jvm["hugepages"]["unapplied"] == [] and jvm["hugepages"]["status"] == "recorded"


def test_an_output_from_another_jvm_than_tomcats_says_so():
    run = STORE.load(LOOPBACK)
    [java] = verification_entries(run, "setup")["tomcat-version"]["conditions"]
    assert (java["shown"], java["measured"]) == ("17.0.15", "25.0.2")
    assert "JAVA_HOME=$JAVA_HOME" in java["text"]
    assert verification_entries(run, "jvm")["java-version"]["conditions"] == []          # the same JVM
    assert java_condition("JVM Version:    17.0.15+6-Debian-1deb12u1", 'openjdk version "17.0.15"') is None


def test_internal_seed_numbers_become_reader_words():
    assert source_words("seed 000 (excerpt as published)") == "excerpt as published in the source"
    assert source_words("seed 003") == "as published in the source"
    assert source_words("live run") == "live run"


# --- the built pages ------------------------------------------------------------------------------
def _outside_details(page: Path) -> str:
    soup = BeautifulSoup(page.read_text(encoding="utf-8"), "html.parser")
    for d in soup.find_all("details"):
        d.decompose()
    main = soup.find("main") or soup
    return main.get_text("\n")


PAGES = ["setup", "baseline", "nic-queues", "numa", "iommu", "connectors", "jvm", "load-generators",
         "proxy", "thread-sweep", "rate-sweep", "compare", "summary"]


@pytest.mark.docs
def test_no_lscpu_flags_or_init_arguments_outside_a_collapsed_block(built_site):
    for name in PAGES:
        text = _outside_details(built_site.page(name))
        assert not re.search(r"^\s*Flags:\s", text, re.M), f"{name}: an lscpu Flags line on the page"
        assert "Vulnerability Spectre" not in text, f"{name}: lscpu's vulnerability list on the page"
        if name != "compare":     # compare.html is the compare helper's: its facts table is checked there
            assert "--firecracker-init" not in text and "rdinit=" not in text, f"{name}: init's arguments shown"
            assert "BOOT_IMAGE=" not in text, f"{name}: a whole kernel command line outside a collapsed block"


@pytest.mark.docs
def test_every_check_without_output_says_what_became_of_it(injected_site):
    """Skipped: "Skipped" and why, no output; ran and printed nothing: says so, never "Skipped";
    failed: says so, then what it printed. (The injected site: the runs on the pages printed no empty
    output, so the IOMMU step's lab run shows a superseded lab run's empty dmesg.)"""
    lp = injected_site
    data = {p.stem: json.loads(p.read_text()) for p in (lp.parents[3] / "data" / "steps").glob("*.json")}
    checks = [(step, r["run_id"], name, v) for step, d in data.items() for r in d["runs"]
              for name, v in (r.get("verification") or {}).items() if v.get("status") != "recorded"]
    assert {v["status"] for *_, v in checks} >= {"empty", "failed"}, "dmesg printed nothing, numactl was missing"
    seen = set()
    for step, run_id, name, v in checks:
        soup = BeautifulSoup((lp / step / "index.html").read_text(encoding="utf-8"), "html.parser")
        for block in soup.select(f'div.verification[data-name="{name}"] div.verification-run[data-run="{run_id}"]'):
            seen.add(v["status"])
            note = block.select_one(f"p.verification-{v['status']}").get_text(" ")
            output = block.select_one("pre.output")
            if v["status"] == "skipped":
                assert "Skipped" in note and v["reason"] in note and output is None, (step, name)
            elif v["status"] == "empty":
                assert "Skipped" not in note and "printed nothing" in note and output is None, (step, name)
            else:
                assert "Failed" in note and "Skipped" not in note, (step, name)
                assert v["output"] in output.get_text(), (step, name)
    assert seen >= {"empty", "failed"}, "no check that ran without output is shown on a page"


@pytest.mark.docs
def test_the_command_comes_before_the_note_that_its_output_is_missing(built_site):
    for name in PAGES:
        soup = BeautifulSoup(built_site.page(name).read_text(encoding="utf-8"), "html.parser")
        for block in soup.select("div.verification"):
            missing = block.select_one("p.verification-missing")
            if missing is not None and not block.select("div.verification-run"):
                assert missing.find_previous_sibling("div", class_="verification-command") is not None, name


@pytest.mark.docs
def test_no_skip_reason_repeats_within_a_run(built_site):
    for name in PAGES:
        soup = BeautifulSoup(built_site.page(name).read_text(encoding="utf-8"), "html.parser")
        for run in soup.select("details.run, section.run"):
            reasons = [s.get_text(" ", strip=True) for s in run.select(".skip-reason")]
            reasons += [li.get_text(" ", strip=True).split(": ", 1)[-1]
                        for li in run.select("details.provenance dd li") if li.find_parent("div").find("dt")
                        and li.find_parent("div").find("dt").get_text() == "Skipped variants"]
            assert len(reasons) == len(set(reasons)), f"{name} {run.get('data-run')}: {reasons}"


@pytest.mark.docs
def test_each_sources_hardware_is_said_once_and_no_internal_words(built_site):
    for name in PAGES:
        soup = BeautifulSoup(built_site.page(name).read_text(encoding="utf-8"), "html.parser")
        shown = soup.get_text(" ") + " ".join(t.get("aria-label", "") for t in soup.find_all(attrs={"aria-label": True}))
        assert not re.search(r"seed[ -]0\d\d", shown), f"{name}: an internal seed number a reader sees"
        assert "in the file)" not in shown, name
        for section in soup.select("section.historical"):
            text = section.get_text(" ")
            described = [h.get_text(" ") for h in section.select(".historical-hardware, .historical-hardware-list li")]
            for desc in described:
                body = desc.split(": ", 1)[-1].strip()[:80]
                assert text.count(body) == 1, f"{name}: hardware said more than once: {body}"


@pytest.fixture(scope="module")
def injected_site(built_site, tmp_path_factory):
    """The built site's sources with step data the recorded pages do not show: the superseded
    loopback run's checks (the IOMMU change skipped, version.sh on another JVM) in place of the lab
    run's, the superseded lab run's empty dmesg on the IOMMU page, a check no run recorded, and a run
    that skipped twelve rates for one reason; rebuilt with Hugo."""
    import shutil

    from tunepath.publish.build import run_hugo

    site = tmp_path_factory.mktemp("injected") / "site"
    shutil.copytree(built_site.site_dir, site, ignore=shutil.ignore_patterns("public", "build"))
    steps = site / "data" / "steps"
    old = STORE.load(LOOPBACK)
    for step in ("baseline", "setup"):
        doc = json.loads((steps / f"{step}.json").read_text())
        run = next(r for r in doc["runs"] if r["run_id"] == LAB)
        run["verification"] = verification_entries(old, step)
        (steps / f"{step}.json").write_text(json.dumps(doc))
    doc = json.loads((steps / "iommu.json").read_text())     # a check that ran and printed nothing
    run = next(r for r in doc["runs"] if r["run_id"] == LAB)
    run["verification"]["dmesg-iommu"] = verification_entries(STORE.load(EMPTY_DMESG), "iommu")["dmesg-iommu"]
    (steps / "iommu.json").write_text(json.dumps(doc))
    doc = json.loads((steps / "nic-queues.json").read_text())
    for run in doc["runs"]:                               # a check no run recorded
        run["verification"].pop("ethtool-l", None)
    (steps / "nic-queues.json").write_text(json.dumps(doc))
    doc = json.loads((steps / "rate-sweep.json").read_text())
    fake = dict(next(r for r in doc["runs"] if r["run_id"] == LAB), run_id="live-skipped-rates", measurements=[])
    fake["skipped"] = [{"variant": f"rate-{k}", "reason": "a rate sweep needs wrk2"} for k in range(2000, 24001, 2000)]
    doc["runs"].append(fake)
    (steps / "rate-sweep.json").write_text(json.dumps(doc))
    public = site / "public"
    run_hugo(site, public)
    return public / "learning-paths/servers-and-cloud-computing/tomcat-tuning"


def _soup(path: Path) -> BeautifulSoup:
    return BeautifulSoup(path.read_text(encoding="utf-8"), "html.parser")


@pytest.mark.docs
def test_an_output_recorded_without_the_change_is_labelled_on_the_page(injected_site):
    soup = _soup(injected_site / "baseline" / "index.html")
    block = soup.select_one(f'div.verification[data-name="dmesg-iommu"] div.verification-run[data-run="{LAB}"]')
    condition = block.select_one("p.verification-condition").get_text(" ", strip=True)
    assert "Align the IOMMU" in condition and "skipped" in condition and "will not reboot itself" in condition
    assert "lazy mode" in block.select_one("pre.output").get_text()
    setup = _soup(injected_site / "setup" / "index.html")
    block = setup.select_one(f'div.verification[data-name="tomcat-version"] div.verification-run[data-run="{LAB}"]')
    assert "Java 17.0.15" in block.get_text() and "Java 25.0.2" in block.get_text()


@pytest.mark.docs
def test_twelve_rates_skipped_for_one_reason_say_it_once(injected_site):
    soup = _soup(injected_site / "rate-sweep" / "index.html")
    run = soup.select_one('details.run[data-run="live-skipped-rates"]')
    assert len(run.select(".skip-reason")) == 1
    assert run.get_text(" ").count("a rate sweep needs wrk2") == 1
    assert "12 variants" in run.select_one("ul.skipped-groups").get_text(" ")
    assert "rate-2000" in run.get_text() and "rate-24000" in run.get_text()


@pytest.mark.docs
def test_a_check_no_run_recorded_shows_its_command_then_where_the_output_is_missing(injected_site):
    soup = _soup(injected_site / "nic-queues" / "index.html")
    block = soup.select_one('div.verification[data-name="ethtool-l"]')
    children = [c for c in block.find_all(recursive=False)]
    assert [c.get("class")[0] for c in children] == ["verification-command", "verification-missing"]
    assert children[1].get_text(" ", strip=True).startswith("Output: not recorded")
