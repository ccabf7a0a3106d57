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
