"""What tests/test_browser.py checks inside a loaded page: its layout at one width (horizontal
overflow, tables, text sizes, doubly escaped text), the learning path's navigation folding on a
narrow screen, and axe-core's findings. Each check returns problems as sentences for people."""

from __future__ import annotations

from pathlib import Path

WIDE, NARROW = 1280, 390


def site_pages(public: Path) -> list[str]:
    """URL paths of every page Hugo wrote (the executed notebooks are not Hugo's: left out)."""
    paths = ["/" + p.parent.relative_to(public).as_posix() + "/" for p in public.rglob("index.html")
             if "notebooks" not in p.relative_to(public).parts]
    paths = sorted(p.replace("/./", "/") for p in paths)
    return paths + (["/404.html"] if (public / "404.html").is_file() else [])


LAYOUT = """
() => {
  const vw = window.innerWidth;
  const scrolls = el => { for (let a = el.parentElement; a; a = a.parentElement) {
      const ox = getComputedStyle(a).overflowX;
      if (ox === 'auto' || ox === 'scroll' || ox === 'hidden' || ox === 'clip') return true; }
    return false; };
  const desc = el => el.tagName.toLowerCase() + (el.id ? '#' + el.id : '') +
      (el.className && typeof el.className === 'string' ? '.' + el.className.trim().split(/\\s+/).join('.') : '');
  const shown = el => el.getClientRects().length > 0 && getComputedStyle(el).visibility !== 'hidden';
  const offenders = [...document.body.querySelectorAll('*')]
    .filter(el => el.getBoundingClientRect().right > vw + 1 && !scrolls(el))
    .slice(0, 15).map(el => `${desc(el)} (right edge ${Math.round(el.getBoundingClientRect().right)}px)`);
  const tables = [...document.querySelectorAll('table')].filter(shown).map(t => {
    const wrapper = t.parentElement;
    return {table: desc(t), stack: t.classList.contains('stack'),
            fits: t.getBoundingClientRect().right <= vw + 1 && (!wrapper || wrapper.scrollWidth <= wrapper.clientWidth + 1),
            wrapper: wrapper ? desc(wrapper) : '', overflowX: wrapper ? getComputedStyle(wrapper).overflowX : ''};
  });
  // text set below 12 px (own text nodes of shown elements; <svg> text is a chart's, checked elsewhere)
  const tiny = [];
  for (const el of document.body.querySelectorAll('*')) {
    if (el.closest('svg') || !shown(el)) continue;
    const own = [...el.childNodes].some(n => n.nodeType === 3 && n.textContent.trim());
    const size = parseFloat(getComputedStyle(el).fontSize);
    if (own && size < 12) tiny.push(`${desc(el)} ${size.toFixed(1)}px: "${el.textContent.trim().slice(0, 40)}"`);
  }
  // an entity shown as text (escaped twice), outside <pre> (a config file may hold one on purpose)
  const prose = document.body.cloneNode(true);
  prose.querySelectorAll('pre, script, style').forEach(el => el.remove());
  const escaped = [...new Set(prose.textContent.match(/.{0,30}&(?:amp|lt|gt|quot|#\\d+|#x[0-9a-f]+);.{0,30}/gi) || [])];
  return {scrollWidth: document.documentElement.scrollWidth, innerWidth: vw, offenders, tables,
          tiny: tiny.slice(0, 10), escaped: escaped.slice(0, 5)};
}
"""

NAV_LIST = "nav.lp-nav .lp-nav-list"
NAV_SUMMARY = "nav.lp-nav summary.lp-nav-summary"


def nav_problems(pg, width: int) -> list[str]:
    """The path's navigation: a sidebar list on a wide screen; on a narrow one, one folded line
    above the content that opens from the keyboard (Tab to it, Enter) and shows the current page."""
    if pg.locator("nav.lp-nav").count() == 0:
        return []
    listing, summary = pg.locator(NAV_LIST), pg.locator(NAV_SUMMARY)
    if width == WIDE:
        return [] if listing.is_visible() else [f"navigation: the page list is hidden at {width} px"]
    probs = []
    if listing.is_visible():
        probs.append(f"navigation: the page list is open at {width} px (expected folded)")
    if not summary.is_visible():
        return probs + [f"navigation: no visible {NAV_SUMMARY} to open the list at {width} px"]
    height = pg.locator("nav.lp-nav").bounding_box()["height"]
    if height > 100:
        probs.append(f"navigation: the folded navigation is {height:.0f} px high, above the content")
    summary.focus()
    if not pg.evaluate("() => document.activeElement && document.activeElement.matches('summary.lp-nav-summary')"):
        probs.append("navigation: the summary takes no keyboard focus")
    pg.keyboard.press("Enter")
    current = pg.locator("nav.lp-nav li.lp-nav-item.current > a")
    if not (listing.is_visible() and current.is_visible()):
        probs.append("navigation: Enter on the summary does not open the page list")
    elif listing.bounding_box()["x"] + listing.bounding_box()["width"] > width + 1:
        probs.append("navigation: the opened list is wider than the screen")
    pg.keyboard.press("Enter")
    if listing.is_visible():
        probs.append("navigation: a second Enter does not fold the page list again")
    return probs


def layout_problems(info: dict, width: int) -> list[str]:
    probs = [f"double-escaped text on the page: {e!r}" for e in info["escaped"]]
    if info["scrollWidth"] > info["innerWidth"] + 1:
        probs.append(f"the page scrolls horizontally: scrollWidth {info['scrollWidth']} > {info['innerWidth']}; "
                     "elements sticking out: " + ", ".join(info["offenders"]))
    for t in info["tables"]:
        if not t["fits"] and t["overflowX"] not in ("auto", "scroll"):
            probs.append(f"{t['table']} is wider than the screen without a scrolling wrapper ({t['wrapper']})")
        elif not t["fits"] and (width == WIDE or t["stack"]):
            probs.append(f"{t['table']} does not fit at {width} px: its wrapper scrolls and hides columns")
    if width == NARROW:
        probs += [f"text below 12 px: {t}" for t in info["tiny"]]
    return probs


AXE_RUN = """
async () => {
  document.querySelectorAll('details').forEach(d => { d.open = true; });   // what they fold is checked too
  await new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));
  const r = await axe.run(document, {resultTypes: ['violations']});
  return {version: axe.version, violations: r.violations.map(v => ({
    id: v.id, impact: v.impact, help: v.help, helpUrl: v.helpUrl,
    nodes: v.nodes.map(n => ({target: n.target.join(' '), impact: n.impact, summary: n.failureSummary}))}))};
}
"""
FAILING_IMPACTS = ("serious", "critical")


def axe_failures(label: str, violations: list[dict]) -> list[str]:
    """One paragraph per serious or critical violation: rule, impact, help URL, the first targets."""
    out = []
    for v in violations:
        if v["impact"] not in FAILING_IMPACTS:
            continue
        targets = [n["target"] for n in v["nodes"]]
        more = f"      (and {len(targets) - 5} more)\n" if len(targets) > 5 else ""
        out.append(f"  {label}: [{v['impact']}] {v['id']}: {v['help']} — {v['helpUrl']}\n"
                   + "".join(f"      {t}\n" for t in targets[:5]) + more)
    return out
