"""Issue 30 (hostile-input review, finding 6): Markdown injection into `tunepath export --upstream`.

The export is built from a copy of the built data in which every string a run (or a source) put
there is hostile: raw HTML, Hugo shortcodes, Markdown structure, and a verification output that
tries to close its code fence. The exported pages must keep every such string inert: fenced text
stays in its fence (a fence longer than any backtick run inside it), prose and table cells escape
HTML and Markdown, and no shortcode but the repository's reaches Hugo, in a fence or not."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from tunepath.errors import TunepathError
from tunepath.publish.upstream import rules
from tunepath.publish.upstream.check import check_path, front_matter, shortcode_names
from tunepath.publish.upstream.export import export_upstream

pytestmark = pytest.mark.docs

#: appended to every one-line string of the data
INLINE = " <script>alert(1)</script> <img src=x> {{< notice >}} {{%lab%}} a|b [x](javascript:alert(1)) *e*_u_`t```&amp;x--->y"
#: put before labels and one-line texts: what would open a heading where the string starts a line
LEAD = "# "
#: appended to every multi-line string (outputs, commands): it tries to close the fence it is in
BLOCK = "\n```\n{{< notice >}}\n<script>alert(1)</script>\n````\n~~~\n# not a heading"
#: keys whose values are lookups, not text (a changed one would only break the freezing)
KEYS = {"run_id", "kind", "status", "src", "narrow_src", "id", "variant", "field", "step", "page", "raw",
        "verdict", "rows", "notebook", "number"}
#: the registry's own Markdown (not a run's): left as it is
AUTHORED = {"change", "avoid"}
#: multi-line text: shown in code blocks
BLOCKS = {"output", "excerpt", "full", "command", "text", "as_run", "client_command", "export"}


def _hostile(x, key: str = ""):
    if isinstance(x, dict):
        return {k: x[k] if k in KEYS or k in AUTHORED else _hostile(v, k) for k, v in x.items()}
    if isinstance(x, list):
        return [_hostile(v, key) for v in x]
    if isinstance(x, str) and x:
        if key in BLOCKS and ("\n" in x or key != "text"):
            return x + BLOCK
        return (LEAD if key in ("label", "text") else "") + x + INLINE
    return x


def _poison(data: Path) -> None:
    for f in [*sorted((data / "steps").glob("*.json")), data / "summary.json"]:
        d = json.loads(f.read_text())
        top = {k: _hostile(v, k) if k in ("runs", "charts", "historical", "pairs", "variables", "hosts")
               else v for k, v in d.items()}
        if isinstance(d.get("answer"), dict):
            top["answer"] = {k: _hostile(v, k) if k == "hosts" else v for k, v in d["answer"].items()}
        if isinstance(d.get("changes"), list):
            top["changes"] = [{k: _hostile(v, k) if k == "hosts" else v for k, v in row.items()}
                              for row in d["changes"]]
        f.write_text(json.dumps(top))


@pytest.fixture(scope="module")
def project(built_site, tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("hostile")
    for part in ("content", "data", "static/charts"):
        shutil.copytree(built_site.site_dir / part, root / part)
    _poison(root / "data")
    return root


@pytest.fixture(scope="module")
def exported(project, tmp_path_factory) -> Path:
    return export_upstream(project, tmp_path_factory.mktemp("upstream") / "arm-learning-paths").path


def _split(body: str) -> tuple[str, list[str], list[str]]:
    """(prose, fences' contents, problems) of a page body, by CommonMark's rules: a fence closes
    with the same character, at least as many of it, and nothing else on the line."""
    prose, blocks, problems, fence, inside = [], [], [], None, []
    for n, line in enumerate(body.splitlines(), 1):
        if fence is None:
            m = re.match(r" {0,3}(`{3,}|~{3,})(.*)$", line)
            if m and not (m.group(1)[0] == "`" and "`" in m.group(2)):
                fence, inside = m.group(1), []
            else:
                prose.append(line)
        elif re.fullmatch(rf" {{0,3}}{re.escape(fence[0])}{{{len(fence)},}}\s*", line):
            blocks.append("\n".join(inside))
            fence = None
        else:
            inside.append(line)
    if fence is not None:
        problems.append(f"a {fence} fence is never closed")
    return "\n".join(prose), blocks, problems


def _spans_out(prose: str) -> str:
    """Prose without its HTML comments and code spans (both shown as written, not read as markup):
    a span opens at a backtick run no backslash escapes and closes at the next run as long."""
    prose = re.sub(r"<!--.*?-->", "", prose, flags=re.S)
    out, pos = [], 0
    runs = [m for m in re.finditer(r"`+", prose) if not re.search(r"(?<!\\)(\\\\)*\\$", prose[:m.start()])]
    i = 0
    while i < len(runs):
        close = next((j for j in range(i + 1, len(runs)) if len(runs[j][0]) == len(runs[i][0])), None)
        if close is None:
            i += 1
            continue
        out.append(prose[pos:runs[i].start()])
        pos, i = runs[close].end(), close + 1
    return "".join(out) + prose[pos:]


def _pages(exported: Path) -> dict[str, str]:
    return {p.name: front_matter(p.read_text())[1] for p in sorted(exported.glob("*.md"))}


def test_the_hostile_strings_reach_the_export(exported):
    """The test means something: the planted strings are on the pages, escaped."""
    text = "".join(_pages(exported).values())
    assert text.count("&lt;script&gt;alert(1)&lt;/script&gt;") >= 10
    blocks = [b for body in _pages(exported).values() for b in _split(body)[1]]
    assert any("<script>alert(1)</script>" in b for b in blocks)      # an output, verbatim in its fence


def test_every_fence_is_balanced_and_holds_its_hostile_output(exported):
    for name, body in _pages(exported).items():
        prose, blocks, problems = _split(body)
        assert not problems, (name, problems)
        for line in prose.splitlines():
            assert line.strip() not in ("<script>alert(1)</script>", "# not a heading", "{{< notice >}}"), (name, line)
        for b in blocks:
            if "<script>alert(1)</script>" in b.splitlines():    # the whole hostile output, in one fence
                assert "```" in b.splitlines() and "# not a heading" in b.splitlines(), (name, b)


def test_no_raw_html_outside_fences(exported):
    for name, body in _pages(exported).items():
        prose = _spans_out(_split(body)[0])
        found = re.search(r".{0,60}<(script|img)\b.{0,60}", prose, re.I)
        assert not found, (name, found[0])
        # the provenance comment names the hosts: none may end it early
        comments = [c for c in re.findall(r"<!--.*?-->", _split(body)[0], re.S) if "tunepath export" in c]
        assert all(re.fullmatch(r"<!-- tunepath export: [^\n]*; tunepath commit \S+ -->", c) for c in comments), \
            (name, comments)


def test_no_shortcode_but_the_repositorys_in_prose_or_fences(exported):
    for name, body in _pages(exported).items():
        prose, blocks, _ = _split(body)
        assert set(shortcode_names(prose)) <= rules.SHORTCODES, (name, shortcode_names(prose))
        # Hugo reads shortcodes inside code blocks too: none may start in a fence
        for b in blocks:
            assert not re.search(r"\{\{[<%]", b), (name, b)
        names = re.findall(r"\{\{[<%]\s*/?\s*([\w-]*)", prose)
        assert set(names) <= rules.SHORTCODES, (name, names)


def test_markdown_structure_is_escaped_in_prose_and_tables(exported):
    for name, body in _pages(exported).items():
        prose = _split(body)[0]
        assert not re.search(r"(?<!\\)\]\(javascript:", _spans_out(prose)), name           # no link
        for line in prose.splitlines():
            assert not (re.match(r" {0,3}#{1,6}\s", line) and "alert(1)" in line), (name, line)
        width = None
        for line in prose.splitlines() + [""]:
            if line.startswith("|"):
                cells = len(re.split(r"(?<!\\)\|", line.strip().strip("|")))
                width = width or cells
                assert cells == width, (name, line)
            else:
                width = None


def test_the_hostile_export_passes_the_repository_rules(exported):
    assert check_path(exported) == []


def test_a_hostile_alt_text_fails_in_one_line_or_passes(project, tmp_path):
    """A chart's alt text of many hostile words: the export passes, or says why in one line."""
    f = project / "data/steps/baseline.json"
    saved = f.read_text()
    d = json.loads(saved)
    for c in d["charts"]:
        c["alt"] = "<img src=x onerror=alert(1)> " * 40
    f.write_text(json.dumps(d))
    try:
        try:
            path = export_upstream(project, tmp_path / "out").path
        except TunepathError as e:
            assert "\n" not in str(e)
            return
        assert check_path(path) == []
        assert "<img" not in _split((path / "2_baseline.md").read_text())[0]
    finally:
        f.write_text(saved)
