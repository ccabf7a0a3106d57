"""Every string a run records is untrusted (runs arrive as evidence from other people's hosts):
the published site shows each one as text, never as markup (issue 30, finding 1).

One site is built for the module from a copy of runs/ in which a marker is planted in each
free-text field a run records: labels, host names and descriptions, host facts, variant names,
notes, warnings, commands, verification outputs, skip and block reasons, kernel command lines.
Each marker is an element that runs ``alert(1)`` when parsed as HTML and names its field
(``…//hx-<field>>``). Every published page, executed notebook and chart SVG must carry it
escaped (``&lt;img …``, on some page: the field is shown) and nowhere raw. Two fields reach a
shortcode nested in {{% lab %}}, whose output Hugo reads as markdown: they also carry a blank
line and a ``javascript:`` link, which must stay text. Then Chromium opens every page of the
path, each <details> opened: no dialog may open and no element of a marker may exist.
"""

from __future__ import annotations

import json
import re
import shutil
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from conftest import LP_PATH, ROOT, serving, unavailable

pytestmark = pytest.mark.docs

LIVE = "live-20261202-070808-vm"              # the newest live run: the primary run of most steps
EMULATED = "live-20261124-135634-tunepath-vm"  # the emulated server: run-checks, kernel command lines
REFERENCE = "reference-aws-c8g"
# a superseded closed-loop run, shown again under a run id that sorts after LIVE (the first real run
# of a step is its primary run): its connectors table has a "vs <first variant>" column
CLOSED, CLOSED_AS = "live-20261122-075337-vm", "zz-closed-loop"
CHROMIUM = Path("/usr/bin/chromium")


def img(tag: str) -> str:
    return f"<img src=x onerror=alert(1)//hx-{tag}>"


def svg(tag: str) -> str:
    """A marker without spaces, for fields split into words (kernel command lines)."""
    return f"<svg/onload=alert(1)//hx-{tag}>"


def md(tag: str) -> str:
    """Markdown after a blank line: a page that renders a run string as markdown makes it a link
    that runs script (Hugo renders the output of a shortcode nested in {{% lab %}} as markdown)."""
    return f"\n\n[hx-md-{tag}](javascript:alert(1))\n\n"


def _append_first_line(path: Path, text: str) -> None:
    lines = path.read_text(encoding="utf-8").split("\n")
    lines[0] += text
    path.write_text("\n".join(lines), encoding="utf-8")


def plant(runs: Path) -> list[str]:
    """Plant a marker in each field of the copied runs; returns the fields' tags."""
    tags: list[str] = []

    def put(tag: str, marker=img) -> str:
        tags.append(tag)
        return marker(tag)

    live = runs / LIVE / "run.json"
    d = json.loads(live.read_text(encoding="utf-8"))
    d["label"] = put("label")
    d["source"] = put("source")
    server, client = d["hosts"]["server"], d["hosts"]["client"]
    server["name"] = "vm" + put("server-name") + md("server-name")
    client["name"] = "vm" + put("client-name")
    server["description"] = put("server-description")
    client["description"] = put("client-description")
    server["facts"]["cpu_model"] = "AMD EPYC" + put("cpu-model")
    server["facts"]["os"] = "Debian" + put("os")
    server["facts"]["java_version"] += put("java-version")
    server["facts"]["kernel_cmdline"] += " x=" + put("cmdline", svg)
    server["facts_missing"]["iommu"] = put("fact-missing")
    client["facts"]["load_generator"]["version"] += put("load-generator-version")
    d["notes"][0]["text"] = put("note")
    d["warnings"][0] = put("warning")
    d["context"]["path"] += put("context-path", svg)
    # connectors: a variant renamed (an unknown one: it sorts last), a JVM warning, a client, the commands
    first = "nio"
    variant = put("variant")
    for m in d["measurements"]:
        if m["step"] != "connectors":
            continue
        if m["variant"] == first:
            m["variant"] = variant
        m["command"] += " # " + img("command")
        m["jvm_warnings"] = [img("jvm-warning")]
        m["parts"][0]["client"] = "c1" + img("client-part")
    tags += ["command", "jvm-warning", "client-part"]
    reps = d["repetitions"]["connectors"]
    reps["order"] = [variant if v == first else v for v in reps["order"]]
    reps["variants"][variant] = reps["variants"].pop(first)
    reps["variants"]["nio2"]["dropped_why"] = [put("dropped-why")]
    reps["reason"] = put("repetitions-reason")
    d["repetitions"]["rate-sweep"]["reason"] = put("sweep-reason")
    for v in d["verification"]:
        v["command"] += " # " + img("verify-command")
    tags.append("verify-command")
    for f in (runs / LIVE / "verify").iterdir():
        _append_first_line(f, " " + img("verify-output"))
    tags.append("verify-output")
    d["skipped"][0]["reason"] = put("skip-reason")
    d["skipped"][0]["commands"][0] += " # " + put("skip-command")
    for b in d["blocks"]:          # a block's text differs from the step's: the page shows it as run
        b["text"] += " # " + img("block-text")
        if b["outcome"] != "ran":
            b["reason"] = img("block-reason")
    tags += ["block-text", "block-reason"]
    live.write_text(json.dumps(d, indent=1), encoding="utf-8")

    emulated = runs / EMULATED / "run.json"
    e = json.loads(emulated.read_text(encoding="utf-8"))
    e["label"] = put("emulated-label")
    e["hosts"]["server"]["facts"]["kernel_cmdline"] += md("emulated-cmdline")
    for b in e["blocks"]:
        if b["outcome"] != "ran":
            b["reason"] = img("emulated-block-reason")
        if isinstance(b.get("kernel_cmdline"), str):
            b["kernel_cmdline"] += " y=" + svg("emulated-cmdline")
    tags += ["emulated-block-reason", "emulated-cmdline"]
    for f in (runs / EMULATED / "verify").iterdir():
        _append_first_line(f, " " + img("emulated-verify-output"))
    tags.append("emulated-verify-output")
    emulated.write_text(json.dumps(e, indent=1), encoding="utf-8")

    (runs / CLOSED).rename(runs / CLOSED_AS)
    closed = runs / CLOSED_AS / "run.json"
    c = json.loads(closed.read_text(encoding="utf-8"))
    del c["superseded_by"]
    c["run_id"] = CLOSED_AS
    # the finding: every connectors variant unknown, so that the hostile one sorts first (unknown ones
    # by name) and its label heads the column "vs <first variant>" and the legend under the table
    names = {first: put("first-variant"), "nio2": "zz-nio2", "nio-virtual": "zz-nio-virtual"}
    for m in c["measurements"]:
        if m["step"] == "connectors":
            m["variant"] = names[m["variant"]]
    reps = c["repetitions"]["connectors"]
    reps["order"] = [names[v] for v in reps["order"]]
    closed.write_text(json.dumps(c, indent=1), encoding="utf-8")

    reference = runs / REFERENCE / "run.json"
    r = json.loads(reference.read_text(encoding="utf-8"))
    r["kind_label"] = put("kind-label")
    r["date_note"] = put("date-note")
    reference.write_text(json.dumps(r, indent=1), encoding="utf-8")
    return tags


# Fields a page shows: each must be on some page, escaped, and raw on none.
SHOWN = ("label", "source", "server-name", "server-description", "client-description", "cpu-model", "os",
         "java-version", "load-generator-version", "note", "context-path", "variant", "first-variant",
         "command", "jvm-warning", "client-part", "dropped-why", "repetitions-reason", "sweep-reason",
         "verify-command", "verify-output", "skip-reason", "skip-command", "block-reason", "block-text",
         "emulated-label", "emulated-block-reason", "emulated-cmdline", "emulated-verify-output",
         "kind-label", "date-note")
# Fields a run records that no page shows today. A page that starts showing one fails
# test_unshown_fields_stay_unshown: move the field to SHOWN, where its escaping is checked.
UNSHOWN = ("client-name", "cmdline", "fact-missing", "warning")
# Fields shown by a shortcode nested in {{% lab %}}, whose output Hugo reads as markdown: they
# also carry md(tag), a blank line and a javascript: link.
MARKDOWN = ("server-name", "emulated-cmdline")


def _raw(tag: str) -> re.Pattern:
    return re.compile(rf"<(?:img|svg)[ /][^<>]*//hx-{re.escape(tag)}>")


def _escaped(tag: str) -> re.Pattern:
    return re.compile(rf"&lt;(?:img|svg)[ /][^<>]*//hx-{re.escape(tag)}&gt;")


def _md_link(tag: str) -> re.Pattern:
    return re.compile(rf"<a [^>]*>hx-md-{re.escape(tag)}</a>")


def published(public: Path) -> dict[str, str]:
    """Every page, executed notebook and chart the site publishes, by path."""
    return {p.relative_to(public).as_posix(): p.read_text(encoding="utf-8", errors="replace")
            for p in sorted(public.rglob("*")) if p.suffix in (".html", ".svg")}


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    """The site built from runs/ with every marker planted: (its output directory, its files)."""
    from tunepath.publish.build import build_site

    base = tmp_path_factory.mktemp("hostile")
    runs = base / "runs"
    shutil.copytree(ROOT / "runs", runs, ignore=shutil.ignore_patterns(".inprogress"))
    planted = plant(runs)
    assert sorted(planted) == sorted(SHOWN + UNSHOWN), "plant() and SHOWN/UNSHOWN name different fields"
    public = build_site(site_dir=base / "site", runs_dir=runs)
    return public, published(public)


def _listed(names: list[str]) -> str:
    return ", ".join(names[:6]) + (f" and {len(names) - 6} more" if len(names) > 6 else "")


@pytest.mark.parametrize("tag", SHOWN)
def test_field_is_shown_as_text(hostile, tag):
    _, files = hostile
    raw = [name for name, text in files.items() if _raw(tag).search(text)]
    assert not raw, f"field {tag}: its marker is HTML (unescaped) in {_listed(raw)}"
    shown = [name for name, text in files.items() if name.endswith(".html") and _escaped(tag).search(text)]
    assert shown, f"field {tag}: no page shows its marker: plant() no longer reaches a shown field"


def test_unshown_fields_stay_unshown(hostile):
    _, files = hostile
    found = {tag: [name for name, text in files.items() if f"//hx-{tag}>" in text or f"//hx-{tag}&gt;" in text]
             for tag in UNSHOWN}
    found = {tag: names for tag, names in found.items() if names}
    assert not found, f"now shown (move them to SHOWN): {found}"


@pytest.mark.parametrize("tag", MARKDOWN)
def test_no_run_string_is_read_as_markdown(hostile, tag):
    _, files = hostile
    links = [name for name, text in files.items() if _md_link(tag).search(text)]
    assert not links, f"field {tag}: read as markdown, its javascript: link is a link in {_listed(links)}"
    literal = f"[hx-md-{tag}](javascript:alert(1))"
    assert any(literal in text for name, text in files.items() if name.endswith(".html")), \
        f"field {tag}: no page shows its markdown as text"


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, format, *args):  # noqa: A002 - stdlib signature
        pass


# elements a marker made: any on… attribute (the site's own markup has none), <img src=x>, a javascript: link
FIND_MARKERS = """() => {
  const made = [...document.querySelectorAll('*')].filter(e =>
    [...e.attributes].some(a => /^on/i.test(a.name)) || (e.matches('img') && e.getAttribute('src') === 'x')
    || (e.matches('a[href]') && /^\\s*javascript:/i.test(e.getAttribute('href'))));
  return made.map(e => e.outerHTML.slice(0, 160));
}"""


def browser_findings(public: Path) -> tuple[list[str], dict[str, list[str]]]:
    """Every page of the path in Chromium, each <details> opened: the dialogs that opened, and by
    page the elements markers made."""
    from playwright.sync_api import sync_playwright

    pages = sorted(p.parent.relative_to(public).as_posix() for p in (public / LP_PATH).rglob("index.html"))
    dialogs: list[str] = []
    found: dict[str, list[str]] = {}
    handler = lambda *a, **kw: _Quiet(*a, directory=str(public), **kw)  # noqa: E731
    with serving(ThreadingHTTPServer(("127.0.0.1", 0), handler), "hostile-site") as (host, port), \
            sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox", "--disable-gpu"])
        try:
            page = browser.new_page()
            page.on("dialog", lambda d: (dialogs.append(f"{page.url}: alert({d.message})"), d.dismiss()))
            for rel in pages:
                page.goto(f"http://{host}:{port}/{rel}/", wait_until="load")
                page.evaluate("() => document.querySelectorAll('details').forEach(d => { d.open = true; })")
                page.wait_for_timeout(200)
                if made := page.evaluate(FIND_MARKERS):
                    found[rel] = made
        finally:
            browser.close()
    return dialogs, found


def test_no_marker_runs_in_chromium(hostile):
    if not CHROMIUM.exists():
        unavailable(f"{CHROMIUM} not found (apt-get install chromium); the browser check needs it")
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        unavailable("playwright is missing from .venv (scripts/bootstrap installs it)")
    public, _ = hostile
    assert len(list((public / LP_PATH).rglob("index.html"))) > 10
    dialogs, found = browser_findings(public)
    assert not dialogs, f"{len(dialogs)} alert(s) ran: {dialogs[:5]}"
    assert not found, f"elements made by markers: {json.dumps(found, indent=1)[:2000]}"
