"""The census's results: the counts per group (:func:`summary_rows`), the table and the lines of the
cases that are not ok (:func:`render`), and the JSON file (:func:`write_results`). Pure but for
the file.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from harness.census.case import CLASSES, OK
from harness.census.runner import Result

__all__ = ["HEADERS", "Row", "summary_rows", "render", "non_ok_lines", "to_dict", "write_results"]

HEADERS = ("group", "cases", "ok", "tracebacks", "hangs", "writes on failure", "silently wrong", "wrongly refused")


@dataclass(frozen=True)
class Row:
    """One row of the table: a group's cases (or all of them) counted per class."""

    group: str
    cases: int
    counts: tuple[int, ...]        # in the order of CLASSES

    def cells(self) -> list[str]:
        return [self.group, str(self.cases), *(str(n) for n in self.counts)]


def summary_rows(results: list[Result]) -> list[Row]:
    """A row per group, in the order groups first appear, and a total row."""
    groups = list(dict.fromkeys(r.case.group for r in results))

    def row(name: str, rs: list[Result]) -> Row:
        return Row(name, len(rs), tuple(sum(r.verdict.cls == c for r in rs) for c in CLASSES))

    return [row(g, [r for r in results if r.case.group == g]) for g in groups] + [row("total", results)]


def _table(rows: list[Row]) -> list[str]:
    """A Markdown table (docs/census.md shows one as it is printed)."""
    cells = [list(HEADERS)] + [r.cells() for r in rows]
    widths = [max(len(c[i]) for c in cells) for i in range(len(HEADERS))]

    def line(values: list[str]) -> str:
        return "| " + " | ".join(v.ljust(w) if i == 0 else v.rjust(w)
                                 for i, (v, w) in enumerate(zip(values, widths))) + " |"

    rule = "|" + "|".join("-" * (w + 1) + (":" if i else "-") for i, w in enumerate(widths)) + "|"
    return [line(cells[0]), rule, *(line(c) for c in cells[1:])]


def non_ok_lines(results: list[Result]) -> list[str]:
    """One line per case that is not ok: its name, class and reason."""
    return [f"- `{r.case.name}`: **{r.verdict.cls}**: {r.verdict.reason}" for r in results if r.verdict.cls != OK]


def render(results: list[Result], guard: list[str]) -> str:
    lines = _table(summary_rows(results))
    bad = non_ok_lines(results)
    lines += ["", f"{len(bad)} case(s) not ok" + (":" if bad else ".")] + bad
    if guard:
        lines += ["", f"THE CHECKOUT CHANGED during the census ({len(guard)} entries):"]
        lines += [f"  {c}" for c in guard[:40]] + (["  …"] if len(guard) > 40 else [])
    return "\n".join(lines)


def to_dict(r: Result) -> dict:
    o = r.outcome
    return {"name": r.case.name, "group": r.case.group, "expect": r.case.expect, "argv": list(r.case.argv),
            "class": r.verdict.cls, "reason": r.verdict.reason, "exit_status": o.status, "wall_s": o.wall_s,
            "timed_out": o.timed_out, "writes": o.writes, "left": o.left, "stderr": o.stderr[-2000:],
            "stdout_head": o.stdout[:500]}


def write_results(path: Path, meta: dict, results: list[Result], guard: list[str]) -> None:
    """The results, written whole or not at all."""
    data = {**meta, "summary": [{"group": row.group, "cases": row.cases, **dict(zip(CLASSES, row.counts))}
                                for row in summary_rows(results)],
            "checkout_changed": guard, "cases": [to_dict(r) for r in results]}
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    tmp.replace(path)
