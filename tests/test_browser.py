"""The built site in a real browser: navigation, console, network, images, narrow screens, accessibility.

The site is served from ``built_site.public`` by a ThreadingHTTPServer on 127.0.0.1 (ephemeral
port, daemon thread in this process) and driven with Playwright through Debian's Chromium at
/usr/bin/chromium; Playwright never downloads a browser of its own. Every page Hugo wrote is
loaded at 1280 and at 390 px: no horizontal scrolling of the page, tables that fit or scroll in
their own wrapper, the path's navigation folded on the narrow screen (and opened from the
keyboard), no text below 12 px there, no doubly escaped text. axe-core (from the npm registry,
pinned in tests/browser/package-lock.json, installed by ``scripts/bootstrap --system``) runs in
each page at both widths; a serious or critical violation fails. A full-page screenshot of every
page at both widths goes to test-artifacts/screenshots/<page>-<width>.png, axe's findings to
test-artifacts/accessibility-<width>.json.
"""

from __future__ import annotations

import functools
import os
import re
from dataclasses import dataclass, field
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urljoin, urlsplit

import pytest

from conftest import ARTIFACTS, LP_PATH, ROOT, serving, unavailable
from pagechecks import AXE_RUN, LAYOUT, NARROW, WIDE, axe_failures, layout_problems, nav_problems, site_pages

pytestmark = pytest.mark.docs

CHROMIUM = Path(os.environ.get("TUNEPATH_CHROMIUM", "/usr/bin/chromium"))
CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]
SCREENSHOTS = ARTIFACTS / "screenshots"
from tunepath.steps import STEPS as _STEPS
STEPS = [s.page for s in _STEPS]          # the pages, in the order of the path
LP_URL = f"/{LP_PATH}/"
# pages that are no step (front matter `extra: true`: the method page) come last
EXTRAS = sorted(p.stem for p in (ROOT / "content" / LP_PATH).glob("*.md")
                if re.search(r"^extra: true$", p.read_text(encoding="utf-8").split("\n---\n", 1)[0], re.M))
EXPECTED_PATHS = [LP_URL] + [f"{LP_URL}{s}/" for s in STEPS] + [f"{LP_URL}{s}/" for s in EXTRAS]
TIMEOUT_MS = 15_000
AXE_JS = ROOT / "tests" / "browser" / "node_modules" / "axe-core" / "axe.min.js"
VIEWPORTS = {WIDE: dict(viewport={"width": WIDE, "height": 900}),
             NARROW: dict(viewport={"width": NARROW, "height": 844}, is_mobile=True, has_touch=True)}
SCREENSHOT_TIMEOUT_MS = 90_000   # a full page of 30,000 px and more, on a busy machine


def _name(url_path: str) -> str:
    """Short page name for a URL path: "intro", "setup", ..., "home"."""
    if url_path == "/":
        return "home"
    if url_path == LP_URL:
        return "intro"
    if url_path.startswith(LP_URL):
        return url_path[len(LP_URL):].strip("/")
    return url_path.strip("/").replace("/", "_").removesuffix(".html") or "home"


# --------------------------------------------------------------------------- fixtures

@pytest.fixture(scope="module")
def chromium() -> Path:
    if not CHROMIUM.exists():
        if os.environ.get("CI") == "true":
            pytest.fail(f"{CHROMIUM} is missing in CI (the CI scripts install Debian's chromium)")
        pytest.skip(f"{CHROMIUM} not found (apt-get install chromium); browser tests need it")
    return CHROMIUM


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format, *args):  # noqa: A002 - stdlib signature
        pass


@pytest.fixture(scope="module")
def site_url(built_site):
    handler = functools.partial(_QuietHandler, directory=str(built_site.public))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    with serving(server, "site-http") as (host, port):
        yield f"http://{host}:{port}"


@pytest.fixture(scope="module")
def browser(chromium):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=str(chromium), args=CHROMIUM_ARGS, headless=True)
        try:
            yield b
        finally:
            b.close()


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.set_default_timeout(TIMEOUT_MS)
    pg = context.new_page()
    try:
        yield pg
    finally:
        context.close()


# --------------------------------------------------------------------------- helpers

@dataclass
class Monitor:
    """Collects console errors/warnings, page errors, failed requests and HTTP errors."""
    problems: list[str] = field(default_factory=list)

    def attach(self, pg) -> "Monitor":
        pg.on("console", self._console)
        pg.on("pageerror", lambda exc: self.problems.append(f"page error: {exc}"))
        pg.on("requestfailed", self._request_failed)
        pg.on("response", lambda resp: resp.status >= 400 and self.problems.append(
            f"HTTP {resp.status}: {resp.request.method} {resp.url}"))
        return self

    def _request_failed(self, req) -> None:
        # net::ERR_ABORTED is the browser cancelling a request, as a navigation does to the last page's
        # favicon still in flight (seen under load); a missing file is an HTTP error, caught below
        if req.failure != "net::ERR_ABORTED":
            self.problems.append(f"request failed: {req.method} {req.url} ({req.failure})")

    def _console(self, msg) -> None:
        if msg.type in ("error", "warning"):
            loc = msg.location or {}
            where = f" at {loc.get('url')}:{loc.get('lineNumber')}" if loc.get("url") else ""
            self.problems.append(f"console {msg.type}: {msg.text}{where}")

    def take(self) -> list[str]:
        out, self.problems = self.problems, []
        return out


LOAD_ALL_IMAGES = """
async () => {
  const imgs = [...document.images];
  for (const img of imgs) { if (img.loading === 'lazy') img.loading = 'eager'; }
  const step = Math.max(200, window.innerHeight / 2);
  for (let y = 0; y < document.documentElement.scrollHeight; y += step) {
    window.scrollTo(0, y);
    await new Promise(r => requestAnimationFrame(() => r()));
  }
  window.scrollTo(0, document.documentElement.scrollHeight);
  const settle = img => (img.complete ? Promise.resolve()
    : new Promise(r => { img.addEventListener('load', r, {once: true});
                         img.addEventListener('error', r, {once: true}); }));
  await Promise.race([Promise.all(imgs.map(settle)), new Promise(r => setTimeout(r, 10000))]);
  await Promise.all(imgs.map(img => img.decode ? img.decode().catch(() => null) : null));
  window.scrollTo(0, 0);
  return imgs.filter(img => !(img.complete && img.naturalWidth > 0))
             .map(img => img.currentSrc || img.getAttribute('src') || '(no src)');
}
"""


def broken_images(pg) -> list[str]:
    return pg.evaluate(LOAD_ALL_IMAGES)


def url_path(pg) -> str:
    return urlsplit(pg.url).path


def follow(pg, selector: str) -> str | None:
    """Click the first element matching selector and wait for the new page; its URL path."""
    link = pg.locator(selector)
    if link.count() == 0:
        return None
    href = link.first.get_attribute("href")
    assert href, f"{selector} on {pg.url} has no href"
    target = urljoin(pg.url, href)
    link.first.click()
    pg.wait_for_url(target)
    pg.wait_for_load_state("load")
    return url_path(pg)


def sidebar_problems(pg) -> list[str]:
    """The sidebar marks exactly this page as current."""
    here = url_path(pg)
    current = pg.locator('nav.lp-nav li.lp-nav-item.current > a[aria-current="page"]')
    if current.count() != 1:
        return [f"sidebar: {current.count()} items marked current (expected 1)"]
    href = urlsplit(urljoin(pg.url, current.first.get_attribute("href") or "")).path
    problems = []
    if href != here:
        problems.append(f"sidebar: current item points to {href}, not {here}")
    n_aria = pg.locator('nav.lp-nav [aria-current="page"]').count()
    if n_aria != 1:
        problems.append(f"sidebar: {n_aria} elements carry aria-current=page (expected 1)")
    return problems


def screenshot(pg, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    pg.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=True, timeout=SCREENSHOT_TIMEOUT_MS)


def _fmt(report: dict[str, list[str]]) -> str:
    return "\n".join(f"  {page}: {p}" for page, probs in report.items() for p in probs)


# --------------------------------------------------------------------------- tests

def test_walk_learning_path(page, site_url):
    """Home → intro → next … last → prev … intro, with no errors and every image loaded."""
    mon = Monitor().attach(page)
    report: dict[str, list[str]] = {}

    def check_page(label: str) -> None:
        probs = [f"broken image: {src}" for src in broken_images(page)]
        probs += mon.take()
        if probs:
            report.setdefault(label, []).extend(probs)

    resp = page.goto(site_url + "/")
    assert resp is not None and resp.status == 200, f"home page: HTTP {resp and resp.status}"
    page.wait_for_load_state("load")
    check_page("home")

    to_intro = follow(page, f'a[href="{LP_URL}"]:not(.site-title)')
    assert to_intro == LP_URL, f"home page has no working link to the learning path {LP_URL}"

    # Intro specifics: no previous page; the start button and "next" both lead to step 1.
    assert page.locator("a.nav-prev").count() == 0, "intro page has a a.nav-prev link"
    start = page.locator("a.nav-start")
    assert start.count() == 1, "intro page has no a.nav-start button"
    next_href = page.locator("a.nav-next").first.get_attribute("href")
    assert start.first.get_attribute("href") == next_href == EXPECTED_PATHS[1], (
        f"intro: nav-start {start.first.get_attribute('href')!r} and nav-next {next_href!r} "
        f"should both be {EXPECTED_PATHS[1]!r}")

    forward = [url_path(page)]
    charts_per_page: dict[str, int] = {}
    while True:
        label = _name(url_path(page))
        sb = sidebar_problems(page)
        if sb:
            report.setdefault(label, []).extend(sb)
        charts_per_page[label] = page.locator("figure.chart img").count()
        if page.locator("p.history-none").count():     # no configuration has two runs of one host kind yet
            charts_per_page[label] = -1
        check_page(label)
        nxt = follow(page, "a.nav-next[rel=next]")
        if nxt is None:
            break
        forward.append(nxt)
        assert len(forward) <= 25, f"a.nav-next never ends: {forward}"

    assert forward == EXPECTED_PATHS, f"pages visited by a.nav-next: {forward}"
    # the comparison draws a chart only for a pair of one host kind (never two different machines)
    missing_charts = [s for s in STEPS if charts_per_page.get(s, 0) == 0 and s != "compare"]
    assert not missing_charts, f"step pages without any figure.chart img: {missing_charts}"

    backward = [url_path(page)]
    while True:
        prv = follow(page, "a.nav-prev[rel=prev]")
        if prv is None:
            break
        backward.append(prv)
        label = _name(prv)
        sb = sidebar_problems(page)
        if sb:
            report.setdefault(f"{label} (back)", []).extend(sb)
        check_page(f"{label} (back)")
        assert len(backward) <= 25, f"a.nav-prev never ends: {backward}"
    assert backward == list(reversed(EXPECTED_PATHS)), f"pages visited by a.nav-prev: {backward}"

    assert not report, "problems while walking the learning path:\n" + _fmt(report)


def test_notebook_html_opens(page, site_url):
    mon = Monitor().attach(page)
    resp = page.goto(site_url + EXPECTED_PATHS[STEPS.index("baseline") + 1])
    assert resp is not None and resp.status == 200
    link = page.locator("p.notebook-links a.notebook-html")
    assert link.count() >= 1, "baseline page has no p.notebook-links a.notebook-html"
    href = link.first.get_attribute("href")
    assert href, "a.notebook-html has no href"
    mon.take()  # only the notebook page is under test here

    resp = page.goto(urljoin(page.url, href))
    assert resp is not None, f"no response for notebook {href}"
    assert resp.status == 200, f"notebook {href}: HTTP {resp.status}"
    page.wait_for_load_state("load")
    assert "html" in (resp.headers.get("content-type") or ""), resp.headers.get("content-type")
    assert page.locator("body").inner_text().strip(), f"notebook {href} renders an empty page"
    probs = [f"broken image: {src}" for src in broken_images(page)]
    screenshot(page, "notebook-02-baseline")
    probs += mon.take()
    assert not probs, f"problems on the executed notebook page {href}:\n  " + "\n  ".join(probs)


@pytest.fixture(scope="module")
def pages(built_site) -> list[str]:
    found = site_pages(built_site.public)
    missing = [p for p in EXPECTED_PATHS + ["/"] if p not in found]
    assert not missing, f"pages missing from the built site: {missing}"
    return found


@pytest.mark.parametrize("width", [WIDE, NARROW])
def test_every_page_fits(browser, site_url, pages, width):
    """Every page at 1280 and 390 px: no horizontal scrolling of the page, results tables that fit
    (stacked into cards at 390 px), the navigation folded on the narrow screen and opened from the
    keyboard, readable text sizes, no doubly escaped text, no error, every image; a screenshot."""
    context = browser.new_context(**VIEWPORTS[width])
    context.set_default_timeout(TIMEOUT_MS)
    report: dict[str, list[str]] = {}
    try:
        pg = context.new_page()
        mon = Monitor().attach(pg)
        for path in pages:
            resp = pg.goto(site_url + path)
            label = _name(path)
            probs = [] if resp is not None and resp.status == 200 else [f"HTTP {resp and resp.status}"]
            pg.wait_for_load_state("load")
            probs += [f"broken image: {src}" for src in broken_images(pg)]
            screenshot(pg, f"{label}-{width}")
            info = pg.evaluate(LAYOUT)
            assert info["innerWidth"] == width, info["innerWidth"]
            probs += layout_problems(info, width) + nav_problems(pg, width)
            probs += mon.take()
            if probs:
                report[label] = probs
    finally:
        context.close()
    assert not report, f"problems at {width} px:\n" + _fmt(report)


FIRST_CHART_PX = 2500       # issue 29, item 7: a step page's first chart within this many px at 1280 px


def test_each_step_page_shows_its_answer_then_its_chart_early(browser, site_url):
    """At 1280 px every step page opens with its answer box, and its first chart starts within
    the first 2,500 px (the evidence under it is folded)."""
    context = browser.new_context(**VIEWPORTS[WIDE])
    context.set_default_timeout(TIMEOUT_MS)
    late = {}
    try:
        pg = context.new_page()
        for s in _STEPS:
            if s.kind == "analysis":
                continue
            pg.goto(f"{site_url}{LP_URL}{s.page}/")
            pg.wait_for_load_state("load")
            where = pg.evaluate("""() => {
                const top = el => el ? Math.round(el.getBoundingClientRect().top + window.scrollY) : -1;
                return {answer: top(document.querySelector('article aside.answer')),
                        prose: top(document.querySelector('article .prose')),
                        chart: top(document.querySelector('article figure.chart'))};
            }""")
            if not 0 <= where["answer"] < where["prose"]:
                late[s.page] = f"no answer box above the content: {where}"
            elif not 0 <= where["chart"] <= FIRST_CHART_PX:
                late[s.page] = f"first chart at {where['chart']} px"
    finally:
        context.close()
    assert not late, late


@pytest.fixture(scope="module")
def axe_js() -> Path:
    if not AXE_JS.is_file():
        unavailable(f"{AXE_JS} not found: run `npm ci` in tests/browser (scripts/bootstrap --system does)")
    return AXE_JS


@pytest.mark.parametrize("width", [WIDE, NARROW])
def test_accessibility(browser, site_url, pages, axe_js, width):
    """axe-core in every page, every <details> opened, at 1280 and 390 px: no serious or critical
    violation. All findings (minor and moderate too) go to test-artifacts/accessibility-<width>.json."""
    import json

    context = browser.new_context(**VIEWPORTS[width])
    context.set_default_timeout(TIMEOUT_MS)
    found: dict[str, list[dict]] = {}
    version = ""
    try:
        pg = context.new_page()
        for path in pages:
            pg.goto(site_url + path)
            pg.wait_for_load_state("load")
            pg.add_script_tag(path=str(axe_js))
            result = pg.evaluate(AXE_RUN)
            version = result["version"]
            if result["violations"]:
                found[_name(path)] = result["violations"]
    finally:
        context.close()
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    (ARTIFACTS / f"accessibility-{width}.json").write_text(
        json.dumps({"axe": version, "width": width, "violations": found}, indent=1), encoding="utf-8")
    lines = [line for label, violations in found.items() for line in axe_failures(label, violations)]
    assert not lines, (f"axe-core {version} finds serious or critical violations at {width} px "
                       f"(all findings: {ARTIFACTS / f'accessibility-{width}.json'}):\n" + "".join(lines))
