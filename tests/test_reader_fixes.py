"""Pages say what their figures are: the wrk2 patch folded with a download of the very file, the
results table's detail line naming the server's CPUs, the merged-p99 note free of one row's figure."""

from __future__ import annotations

import base64
import html
import re

from conftest import ROOT

import pytest

pytestmark = pytest.mark.docs

PATCH = ROOT / "scripts/tunepath/live/wrk2-tunepath.patch"


def test_the_wrk2_patch_is_folded_with_a_download_of_the_file(built_site):
    page = built_site.page("setup").read_text(encoding="utf-8")
    block = page[page.index('data-block="wrk2-patch"'):]
    block = block[:block.index("</div>")]
    opened, folded = block.find("<details"), block.find("--- a/")
    assert 0 <= opened < folded, "the patch is printed outside a folded block"
    link = re.search(r'<a download="wrk2-tunepath.patch" href="data:text/plain;charset=utf-8;base64,([^"]+)"', block)
    assert link, "no download link for the patch"
    assert base64.b64decode(html.unescape(link.group(1))).decode() == PATCH.read_text(encoding="utf-8")


def test_short_blocks_stay_open(built_site):
    page = built_site.page("setup").read_text(encoding="utf-8")
    block = page[page.index('data-block="wrk2-dependencies"'):]
    block = block[:block.index("</div>")]
    assert "<details" not in block and "apt-get install" in block


def test_results_detail_line_names_the_servers_cpus_and_the_load(built_site):
    page = built_site.page("nic-queues").read_text(encoding="utf-8")
    metas = re.findall(r'<span class="variant-meta">(.*?)</span>\s*(?:<span class="figure-detail"|</td>)', page, re.S)
    assert metas and all("server CPUs online:" in m for m in metas)
    assert any(m.startswith("load: wrk2 · ") for m in metas)


def test_merged_p99_note_quotes_no_single_figure(built_site):
    page = built_site.page("nic-queues").read_text(encoding="utf-8")
    notes = re.findall(r'<p class="table-note">(Each p99 in the results table merges.*?)</p>', page, re.S)
    assert notes, "the clients' merge note is missing"
    assert not any(re.search(r"\d ms", n) for n in notes), "the note quotes one repetition's figure"


def test_no_skip_reason_repeats_its_variants_name(built_site):
    """A skipped variant is shown as "<name>: <reason>": the reason must not start with the name again
    (older runs recorded "iommu-passthrough: needs a reboot …" for the variant iommu-passthrough)."""
    import json

    seen = 0
    for f in sorted((built_site.site_dir / "data" / "steps").glob("*.json")):
        for run in json.loads(f.read_text(encoding="utf-8")).get("runs") or []:
            for s in run.get("skipped") or []:
                seen += 1
                assert not s["reason"].startswith(f"{s['variant']}:"), (f.name, run["run_id"], s["reason"])
    assert seen, "no run on the site skipped a variant: the check read nothing"


@pytest.mark.fast
def test_reader_reason_drops_the_repeated_name():
    from tunepath.model.run import Skipped

    assert Skipped("iommu", "iommu-passthrough", "iommu-passthrough: needs a reboot").reader_reason() == "needs a reboot"
    assert Skipped("iommu", "iommu-passthrough", "grub-iommu: needs a reboot").reader_reason() == "grub-iommu: needs a reboot"


@pytest.mark.fast
def test_prose_agrees_with_how_the_steps_run():
    """Claims a page makes about the path's own machinery, against that machinery: a step whose
    variants share one JVM a round (live/repeat.shares_jvm) must not tell the reader to restart Tomcat
    before each variant, and the load-generators page must not say wrk2 cannot be built on Arm while
    the set-up step builds it for aarch64 (the wrk2 patch's LUAJIT=system)."""
    from types import SimpleNamespace

    from tunepath.live.repeat import shares_jvm
    from tunepath.model.context import HostContext
    from tunepath.steps import REGISTRY

    pages = ROOT / "content/learning-paths/servers-and-cloud-computing/tomcat-tuning"
    ctx = HostContext()
    shared = [s for s in REGISTRY.steps if s.live and s.kind != "sweep"
              and shares_jvm(SimpleNamespace(ctx=ctx), s, [v.name for v in s.variants_for(ctx)])]
    assert {s.name for s in shared} == {"load-generators", "proxy"}
    for step in shared:
        text = (pages / f"{step.name}.md").read_text(encoding="utf-8")
        assert not re.search(r"[Bb]efore each variant,[^.]*restart", text), step.name
    assert "LUAJIT must be bundled or system" in PATCH.read_text(encoding="utf-8")
    assert "cannot be built on an Arm" not in (pages / "load-generators.md").read_text(encoding="utf-8")


@pytest.mark.fast
def test_the_reference_runs_credit_the_original_path_by_name():
    """The published outputs are another path's work: their records and the landing page name that
    path and its authors (as its front matter gives them)."""
    import json

    authors = ("Ying Yu", "Ker Liu", "Rui Chang")
    for run in ("reference-aws-c8g", "reference-grace"):
        source = json.loads((ROOT / "runs" / run / "run.json").read_text(encoding="utf-8"))["source"]
        assert "Tune network workloads on Arm-based bare-metal instances" in source and all(a in source for a in authors), run
    landing = (ROOT / "content/learning-paths/servers-and-cloud-computing/tomcat-tuning/_index.md").read_text(encoding="utf-8")
    assert "tune-network-workloads-on-bare-metal" in landing and all(a in landing for a in authors)
    assert "Brittain" in landing and "Darwin" in landing
