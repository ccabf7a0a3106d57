"""The site's structure as a reader meets it: section pages, the summary's notebook link and flag
explanations, prose that states no confidence level, and executed notebooks that fit the page and
name no path of the machine that built them."""

from __future__ import annotations

import math
import re
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urlsplit

import pandas as pd
import pytest

from conftest import LP_PATH, ROOT
from tunepath.publish.frame_display import MISSING, SCROLL_CLASS, frame_html, readable

pytestmark = pytest.mark.docs

CONTENT = ROOT / "content" / LP_PATH
SECTIONS = ("learning-paths", "learning-paths/servers-and-cloud-computing")
# Pages whose prose this file checks for typed confidence levels (the others have owners of their own).
PROSE_PAGES = ("baseline", "connectors", "iommu", "jvm", "load-generators", "nic-queues", "numa", "proxy",
               "summary", "thread-sweep")
# An absolute path (not the tail of a relative one such as ../build/staging) of the building machine.
MACHINE_PATHS = re.compile(r"(?<![.\w])/(?:work|root|tmp|home/[a-z])/|site-packages|\.venv/|dist-packages")


class Page(HTMLParser):
    """The parts of a built page these tests read: title, h1, visible text, links, titled elements,
    tables and whether each sits inside a sideways-scrolling block."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.title = self.h1 = ""
        self.text: list[str] = []
        self.links: list[tuple[dict, str]] = []
        self.titled: list[tuple[str, dict]] = []
        self.tables: list[bool] = []          # one per <table>: inside a .frame-scroll block?
        self.cells: list[str] = []
        self._stack: list[tuple[str, dict]] = []
        self._where = ""
        self._link: dict | None = None
        self._link_text: list[str] = []

    def handle_starttag(self, tag, attrs):
        a = {k: v or "" for k, v in attrs}
        if tag not in ("br", "img", "meta", "link", "input", "hr", "source", "col"):
            self._stack.append((tag, a))
        if tag in ("title", "h1", "td"):
            self._where = tag
            if tag == "td":
                self.cells.append("")
        if tag == "a":
            self._link, self._link_text = a, []
        if a.get("title") and tag != "link":
            self.titled.append((tag, a))
        if tag == "table":
            self.tables.append(any(SCROLL_CLASS in x.get("class", "").split() for _, x in self._stack))

    def handle_endtag(self, tag):
        while self._stack:
            if self._stack.pop()[0] == tag:
                break
        if tag == self._where:
            self._where = ""
        if tag == "a" and self._link is not None:
            self.links.append((self._link, "".join(self._link_text).strip()))
            self._link = None

    def handle_data(self, data):
        if any(t in ("script", "style") for t, _ in self._stack):
            return
        self.text.append(data)
        if self._where == "title":
            self.title += data
        elif self._where == "h1":
            self.h1 += data
        elif self._where == "td":
            self.cells[-1] += data
        if self._link is not None:
            self._link_text.append(data)

    @property
    def visible(self) -> str:
        return re.sub(r"\s+", " ", "".join(self.text))


def read(path: Path) -> Page:
    assert path.is_file(), f"{path} is missing from the build"
    page = Page()
    page.feed(path.read_text(encoding="utf-8"))
    return page


def target(public: Path, page_dir: Path, href: str) -> Path | None:
    """The file an internal link opens (None: an external link or an anchor on the page)."""
    url = urlsplit(href)
    if url.scheme or url.netloc or not url.path:
        return None
    base = public if url.path.startswith("/") else page_dir
    path = (base / url.path.lstrip("/")).resolve()
    return path / "index.html" if url.path.endswith("/") or path.is_dir() else path


# --- section pages --------------------------------------------------------------------------

@pytest.mark.parametrize("section", SECTIONS)
def test_section_pages_have_titles_and_list_what_is_inside(built_site, section):
    public = built_site.public
    page = read(public / section / "index.html")
    expected = ROOT / "content" / section / "_index.md"
    assert expected.is_file(), f"{expected.relative_to(ROOT)}: the section needs a content page"
    title = re.search(r"^title:\s*(.+)$", expected.read_text(encoding="utf-8"), re.M).group(1).strip().strip('"')
    assert page.h1.strip() == title and page.title.startswith(title), (section, page.h1, page.title)
    assert "-" not in title and title[0].isupper() and title[1:] == title[1:].lower(), \
        f"{section}: a title for readers, not the directory's name: {title!r}"
    lp = built_site.page().resolve()
    opened = {target(public, public / section, a.get("href", "")) for a, _ in page.links}
    assert lp in opened, f"{section}: no link to the learning path {LP_PATH}"


@pytest.mark.parametrize("section", SECTIONS + ("",))
def test_every_link_of_the_section_pages_opens_a_page(built_site, section):
    public = built_site.public
    path = public / section / "index.html" if section else public / "index.html"
    page = read(path)
    broken = []
    for a, text in page.links:
        file = target(public, path.parent, a.get("href", ""))
        if file is not None and not file.is_file():
            broken.append(f"{a.get('href')} ({text!r})")
        assert text, f"{section or 'home'}: a link without text: {a.get('href')}"
    assert not broken, f"{section or 'home'}: links to nothing: {', '.join(broken)}"


def test_every_directory_above_the_learning_path_is_a_page(built_site):
    public = built_site.public
    here = built_site.lp
    while here != public:
        here = here.parent
        assert (here / "index.html").is_file(), f"/{here.relative_to(public).as_posix()}/ has no page"


# --- the summary ----------------------------------------------------------------------------

def test_summary_links_its_executed_notebook(built_site):
    page = read(built_site.page("summary"))
    links = {a.get("class"): target(built_site.public, built_site.page("summary").parent, a["href"])
             for a, _ in page.links if a.get("class") in ("notebook-html", "notebook-ipynb")}
    assert set(links) == {"notebook-html", "notebook-ipynb"}, "the summary links no notebook"
    for kind, file in links.items():
        assert file is not None and file.is_file(), f"summary: {kind} link opens nothing ({file})"
    assert links["notebook-html"].name.endswith("-summary.html")


def _pages(public: Path) -> list[Path]:
    return sorted((public / LP_PATH).rglob("index.html"))


def test_no_flag_is_explained_only_in_a_tooltip(built_site):
    """Every ⚑'s explanation (its title) is also text on its page, e.g. the list under a table."""
    hidden = []
    for path in _pages(built_site.public):
        page = read(path)
        text = page.visible
        for tag, a in page.titled:
            if "data-flag" in a and re.sub(r"\s+", " ", a["title"]) not in text:
                hidden.append(f"{path.parent.name}: {a['data-flag']}: {a['title'][:80]}")
    assert not hidden, "flags explained only in a tooltip:\n" + "\n".join(hidden[:20])


def test_summary_explains_in_text_everything_its_tooltips_say(built_site):
    page = read(built_site.page("summary"))
    flags = sum("data-flag" in a for _, a in page.titled)
    assert flags, "the summary shows no flag: this test would prove nothing"
    missing = [a["title"] for _, a in page.titled if re.sub(r"\s+", " ", a["title"]) not in page.visible]
    assert not missing, f"summary: tooltips whose text is nowhere on the page: {missing[:5]}"


# --- prose ----------------------------------------------------------------------------------

LEVEL = re.compile(r"\d+(?:[.,]\d+)?\s*%")
STATISTICS = re.compile(r"interval|confiden|significan|\blevel\b", re.I)


@pytest.mark.fast
@pytest.mark.parametrize("name", PROSE_PAGES)
def test_prose_states_no_confidence_level(name):
    """A level belongs to the table that reaches it: prose refers to the level the table states."""
    text = (CONTENT / f"{name}.md").read_text(encoding="utf-8")
    prose = re.sub(r"\{\{<.*?>\}\}", "", text)          # shortcodes print data, not prose
    found = [s.strip() for s in re.split(r"(?<=[.;:])\s+", prose) if STATISTICS.search(s) and LEVEL.search(s)]
    assert not found, f"{name}.md states a level in its prose: {found[:3]}"


def test_thread_sweep_prose_points_the_right_way(built_site):
    """The sweep's reading comes before its table, and the prose says so."""
    html = built_site.page("thread-sweep").read_text(encoding="utf-8")
    reading, table = html.find('class="sweep'), html.find("results-table")
    assert 0 <= reading < table, "the thread sweep's reading is no longer above its table: fix its prose"
    prose = (CONTENT / "thread-sweep.md").read_text(encoding="utf-8")
    assert "reading below the table" not in prose and "above the table" in prose


# --- executed notebooks ---------------------------------------------------------------------

@pytest.mark.fast
def test_frames_show_missing_values_as_a_dash_and_scroll():
    frame = pd.DataFrame({"rate": [1.5, math.nan], "tool": ["wrk2", None],
                          "n": pd.array([pd.NA, 3], dtype="Int64"), "note": [pd.NA, "x"]})
    html = frame_html(frame)
    assert html.startswith(f'<div class="{SCROLL_CLASS}"') and "overflow-x:auto" in html
    page = Page()
    page.feed(html)
    assert page.tables == [True]
    assert [c for c in page.cells if c.strip() in ("NaN", "None", "<NA>", "nan")] == []
    assert sum(c.strip() == MISSING for c in page.cells) == 4
    assert readable(frame)["rate"].dtype == float, "float columns keep their type (and formatting)"


def test_executed_notebooks_fit_the_page_and_show_no_nan(built_site):
    pages = sorted((built_site.public / "notebooks").glob("*.html"))
    assert pages, "no executed notebook was published"
    for path in pages:
        page = read(path)
        assert page.tables and all(page.tables), f"{path.name}: a table outside a scrolling block"
        raw = [c for c in page.cells if c.strip() in ("NaN", "None", "<NA>", "nan", "NaT")]
        assert not raw, f"{path.name}: {len(raw)} cells show {raw[0]!r} instead of {MISSING!r}"
        assert "overflow-x:auto" in path.read_text(encoding="utf-8")


def test_no_page_or_notebook_names_a_path_of_the_build_machine(built_site):
    site = built_site.site_dir
    roots = {str(ROOT), str(site), str(Path.home())}
    files = [*built_site.public.rglob("*.html"), *(site / "static" / "notebooks").glob("*.ipynb")]
    assert len(files) > 20
    leaks = []
    for path in files:
        text = path.read_text(encoding="utf-8")
        for m in MACHINE_PATHS.finditer(text):
            leaks.append(f"{path.relative_to(site).as_posix()}: …{text[max(0, m.start() - 40):m.end() + 40]}…")
        leaks += [f"{path.relative_to(site).as_posix()}: {r}" for r in roots
                  if re.search(r"(?<!\.\.)" + re.escape(r), text)]
    assert not leaks, "paths of the machine that built the site:\n" + "\n".join(leaks[:10])


# --- jmeter.log -----------------------------------------------------------------------------

def _client_command(check) -> str:
    """The command ``check(client)`` runs on the client."""
    ran = []

    class Client:
        def run(self, command, **_):
            ran.append(command)
            return type("Result", (), {"stdout": "Apache JMeter 5.6.3", "stderr": "", "ok": True})()

    check(Client())
    return "\n".join(ran)


def _jmeter_calls() -> list[str]:
    from tunepath.model.context import HostContext
    from tunepath.steps import REGISTRY
    from tunepath.steps.commands import VERIFY_COMMANDS
    from tunepath.steps.load_generators import jmeter_too_old

    ctx = HostContext()
    texts = [b.text for step in REGISTRY for b in step.plan(ctx)]
    texts += [cmd for step in REGISTRY for cmd in step.verify_commands(ctx).values()]
    texts += [make(ctx) for make in VERIFY_COMMANDS.values()]
    texts += [_client_command(jmeter_too_old)]
    return [line for t in texts for line in re.findall(r"\bjmeter\b[^\n;|)]*", t) if not line.startswith("jmeter-")]


@pytest.mark.fast
def test_every_jmeter_call_names_its_log_file():
    """JMeter writes jmeter.log into the current directory unless -j names another file: a run
    (or a test) must not leave one in the project or the home directory."""
    calls = [c for c in _jmeter_calls() if re.match(r"jmeter\s", c)]
    assert calls, "no jmeter command found: this test would prove nothing"
    bare = [c for c in calls if not re.search(r"\s(-j|--jmeterlogfile)\s", c)]
    assert not bare, f"jmeter calls without -j (they write ./jmeter.log): {bare}"


@pytest.mark.fast
def test_frames_show_whole_numbers_as_integers():
    """A count that a missing value turned into floats (a flag's repetition) reads 2, not 2.0."""
    frame = pd.DataFrame({"repetition": [2.0, math.nan, 1.0], "rate": [1.5, 2.0, math.nan]})
    shown = readable(frame)
    assert list(shown["repetition"]) == [2, MISSING, 1]
    assert shown["rate"].dtype == float, "a column with fractions keeps its floats"
    html = frame_html(frame)
    assert "<td>2</td>" in html and "<td>1</td>" in html and "<td>2.0</td>" in html   # 2.0: the rate
