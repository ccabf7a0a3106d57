"""Every internal link, image, script and stylesheet of the built site resolves to a file.

The site is parsed offline (stdlib ``html.parser``), with the site root at ``public/`` and
``baseURL = "/"``. Fragments are checked too: ``#id`` against the page itself and
``page/#id`` against the target page. Nothing the browser loads automatically may come from
another host, because the site must work offline.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

pytestmark = pytest.mark.docs

# Attributes that hold a URL, per element.
LINK_ATTRS = {
    "a": ("href",),
    "area": ("href",),
    "link": ("href",),
    "img": ("src", "srcset"),
    "script": ("src",),
    "source": ("src", "srcset"),
    "iframe": ("src",),
    "video": ("src", "poster"),
    "audio": ("src",),
    "track": ("src",),
    "embed": ("src",),
    "object": ("data",),
}
# Attributes whose target the browser fetches by itself (as opposed to a link the reader follows).
AUTOLOAD = {"src", "srcset", "poster", "data"}
# <link rel=...> values that make the browser fetch the href by itself.
AUTOLOAD_LINK_RELS = {"stylesheet", "icon", "shortcut", "apple-touch-icon", "preload",
                      "modulepreload", "prefetch", "manifest", "mask-icon"}

from tunepath.steps import STEPS as _STEPS
LP_STEPS = [s.page for s in _STEPS]


@dataclass
class Ref:
    tag: str
    attr: str
    value: str
    rel: str = ""

    @property
    def autoload(self) -> bool:
        if self.attr in AUTOLOAD:
            return True
        return self.tag == "link" and bool(set(self.rel.lower().split()) & AUTOLOAD_LINK_RELS)


@dataclass
class ParsedPage:
    refs: list[Ref] = field(default_factory=list)
    ids: set[str] = field(default_factory=set)
    base: str | None = None


class _Collector(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.page = ParsedPage()

    def handle_starttag(self, tag, attrs):
        a = {k: (v if v is not None else "") for k, v in attrs}
        if a.get("id"):
            self.page.ids.add(a["id"])
        if tag == "a" and a.get("name"):
            self.page.ids.add(a["name"])
        if tag == "base" and "href" in a and self.page.base is None:
            self.page.base = a["href"]
        for attr in LINK_ATTRS.get(tag, ()):
            if attr not in a:
                continue
            value = a[attr].strip()
            if attr == "srcset":
                for cand in value.split(","):
                    url = cand.strip().split()[0] if cand.strip() else ""
                    if url:
                        self.page.refs.append(Ref(tag, attr, url, a.get("rel", "")))
            else:
                self.page.refs.append(Ref(tag, attr, value, a.get("rel", "")))

    handle_startendtag = handle_starttag


def parse_html(path: Path) -> ParsedPage:
    collector = _Collector()
    collector.feed(path.read_text(encoding="utf-8"))
    collector.close()
    return collector.page


def page_url(public: Path, path: Path) -> str:
    """The URL path under which Hugo's output file is served (baseURL "/")."""
    rel = path.relative_to(public).as_posix()
    if rel == "index.html":
        return "/"
    if rel.endswith("/index.html"):
        return "/" + rel[: -len("index.html")]
    return "/" + rel


def url_to_file(public: Path, url_path: str) -> Path | None:
    """The file a static server would answer for url_path, or None."""
    url_path = unquote(url_path)
    norm = posixpath.normpath(url_path)
    if norm.startswith(".."):
        return None
    rel = norm.lstrip("/")
    if rel in ("", "."):
        candidates = [public / "index.html"]
    elif url_path.endswith("/"):
        candidates = [public / rel / "index.html"]
    else:
        candidates = [public / rel]
        if not posixpath.splitext(rel)[1]:
            candidates.append(public / rel / "index.html")
    root = public.resolve()
    for c in candidates:
        c_resolved = c.resolve()
        if c_resolved.is_file() and (c_resolved == root or root in c_resolved.parents):
            return c
    return None


def is_external(value: str) -> bool:
    parts = urlsplit(value)
    return bool(parts.scheme or parts.netloc) or value.startswith("//")


def is_remote(value: str) -> bool:
    """True for a URL the browser would fetch from another host (data: URIs are local)."""
    parts = urlsplit(value)
    if value.startswith("//") or parts.netloc:
        return True
    return parts.scheme.lower() not in ("", "data", "blob", "about", "javascript", "mailto", "tel")


@dataclass
class SiteCheck:
    pages: dict[Path, ParsedPage]
    broken: list[str]
    checked_targets: set[Path]
    remote_loads: list[str]
    n_refs: int


def check_site(public: Path) -> SiteCheck:
    html_files = sorted(public.rglob("*.html"))
    pages = {p: parse_html(p) for p in html_files}
    broken: list[str] = []
    remote: list[str] = []
    checked: set[Path] = set()
    n_refs = 0
    for path, parsed in pages.items():
        where = path.relative_to(public).as_posix()
        base_url = page_url(public, path)
        if parsed.base is not None:
            base_url = posixpath.join(base_url if base_url.endswith("/") else
                                      posixpath.dirname(base_url) + "/", parsed.base)
        for ref in parsed.refs:
            value = ref.value
            label = f"{where}: <{ref.tag} {ref.attr}=\"{value}\">"
            if ref.autoload and is_remote(value):
                remote.append(label)
            if not value or is_external(value):
                continue
            n_refs += 1
            parts = urlsplit(value)
            fragment = unquote(parts.fragment)
            if not parts.path:                      # "#frag" or "?q": this very page
                target = path
            else:
                url_path = parts.path
                if not url_path.startswith("/"):
                    directory = base_url if base_url.endswith("/") else posixpath.dirname(base_url) + "/"
                    url_path = posixpath.normpath(posixpath.join(directory, url_path))
                    if parts.path.endswith("/") and not url_path.endswith("/"):
                        url_path += "/"
                target = url_to_file(public, url_path)
                if target is None:
                    broken.append(f"{label} -> {url_path} (no such file)")
                    continue
                checked.add(target.resolve())
            if fragment and fragment != "top":
                if target.suffix != ".html":
                    continue
                target_page = pages.get(target) or parse_html(target)
                if fragment not in target_page.ids:
                    broken.append(f"{label} -> no element with id {fragment!r} in "
                                  f"{target.relative_to(public).as_posix()}")
    return SiteCheck(pages, broken, checked, remote, n_refs)


@pytest.fixture(scope="module")
def site_check(built_site) -> SiteCheck:
    return check_site(built_site.public)


def test_no_broken_internal_links(built_site, site_check):
    assert site_check.n_refs > 0, "no internal references found at all"
    assert not site_check.broken, (
        f"{len(site_check.broken)} broken internal link(s):\n  " + "\n  ".join(site_check.broken))


def test_links_check_is_not_vacuous(built_site, site_check):
    public = built_site.public
    expected_pages = [built_site.page("")] + [built_site.page(s) for s in LP_STEPS]
    for p in expected_pages:
        assert p.is_file(), f"learning-path page missing from the build: {p.relative_to(public)}"
    lp_parsed = [p for p in site_check.pages if built_site.lp in p.parents]
    assert len(lp_parsed) >= 7, f"only {len(lp_parsed)} learning-path pages were checked"
    assert all(p in site_check.pages for p in expected_pages)
    charts_dir = (public / "charts").resolve()
    chart_svgs = [t for t in site_check.checked_targets
                  if t.suffix == ".svg" and charts_dir in t.parents]
    assert chart_svgs, "no chart SVG was referenced by any page, so none was checked"
    # Every step page links its executed notebook, in both formats.
    notebooks = [t for t in site_check.checked_targets if t.parent.name == "notebooks"]
    assert any(t.suffix == ".html" for t in notebooks), "no notebook HTML rendering was checked"
    assert any(t.suffix == ".ipynb" for t in notebooks), "no .ipynb download was checked"


def test_all_assets_are_local(built_site, site_check):
    """Images, scripts, stylesheets and icons are served by the site itself (works offline)."""
    remote = list(site_check.remote_loads)
    public = built_site.public
    # Stylesheets must not pull in fonts, images or other sheets from elsewhere either.
    css_url = re.compile(r"""(?:url\(\s*['"]?|@import\s+['"])([^'")\s]+)""", re.I)
    for css in sorted(public.rglob("*.css")):
        for m in css_url.finditer(css.read_text(encoding="utf-8")):
            if is_remote(m.group(1)):
                remote.append(f"{css.relative_to(public).as_posix()}: {m.group(1)}")
    # SVG charts embedded via <img> cannot fetch anything, but keep them self-contained anyway.
    href = re.compile(r"""(?:xlink:)?href\s*=\s*["']([^"']+)["']""")
    for svg in sorted(public.rglob("*.svg")):
        for m in href.finditer(svg.read_text(encoding="utf-8")):
            if is_remote(m.group(1)):
                remote.append(f"{svg.relative_to(public).as_posix()}: href {m.group(1)}")
    assert not remote, "assets loaded from another host (site must work offline):\n  " + "\n  ".join(remote)
