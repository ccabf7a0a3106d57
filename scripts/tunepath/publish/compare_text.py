"""``tunepath compare`` as text: a pair's document (:func:`tunepath.analysis.compare.pair_document`)
as the lines a terminal shows.

Per step, a table of the measurements both runs made. A figure whose requests/s cannot be trusted
(the parser derived it, or found it inconsistent with the report's requests and duration) has a ⚑
after it, as on the pages, and a note under its table says why; the ratio rests on that figure.
Then the host facts and load settings that differ.
"""

from __future__ import annotations

from tunepath.terminal import safe

__all__ = ["pair_lines", "MARK"]

MARK = "⚑"
HEADER = (f"  {'variant':<34} {'A req/s':>14}  {'B req/s':>14}  {'B / A':>8}  95 % interval      runs A/B")


def _figure(row: dict, side: str) -> str:
    """One side's requests/s, 14 wide, then ⚑ (or a space) where it cannot be trusted."""
    mark = " " if row.get(f"{side}_requests_per_sec_trusted", True) else MARK
    return f"{row['display'][f'{side}_requests_per_sec']:>14}{mark}"


def _notes(rows: list[dict]) -> list[str]:
    """Why each flagged figure of one table cannot be trusted: one line per problem."""
    lines = []
    for r in rows:
        for side in ("a", "b"):
            if r.get(f"{side}_requests_per_sec_trusted", True):
                continue
            said = [p["text"] for p in r.get(f"{side}_flags") or []] or ["the report's figures disagree"]
            for text in said:
                lines.append(f"  {MARK} {side.upper()}, {r['label']}: requests/s not trusted (so neither is "
                             f"B / A): {text}")
    return lines


def pair_lines(doc: dict) -> list[str]:
    """The lines ``tunepath compare`` prints for ``doc``, one pair of runs."""
    a, b = doc["a"], doc["b"]
    lines = [f"A: {a['run_id']} ({a['server']})   B: {b['run_id']} ({b['server']})"]
    if not doc["steps"]:
        lines.append("no configuration measured by both runs")
    for step in doc["steps"]:
        lines += ["", step["title"], HEADER]
        for r in step["rows"]:
            d = r["display"]
            sig = f"  ({d['significance']})" if d["significance"] else ""
            lines.append(f"  {r['label'][:34]:<34} {_figure(r, 'a')} {_figure(r, 'b')} "
                         f"{d['ratio']:>8}  {d['interval'] or '-':<17} {d['repetitions']}{sig}")
        lines += _notes(step["rows"])
    if doc.get("untrusted"):
        lines += ["", f"{doc['untrusted']} figure(s) marked {MARK} cannot be trusted: `tunepath parse` on the "
                      "measurement's raw report lists its problems"]
    differ = [f for f in doc["facts"] if f["differs"]]
    lines.append(f"\n{len(differ)} fact(s) differ — read them before any ratio:")
    lines += [f"  {f['label']}: {f['a']}  |  {f['b']}" for f in differ]
    return [safe(line) for line in lines]       # recorded strings must not drive the terminal
