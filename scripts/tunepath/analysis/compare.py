"""Two recorded runs side by side: per step, the ratio of their figures, and which host facts differ.

A ratio across runs compares two different set-ups, usually two different machines: it
says how far apart the results are, never that one change caused the difference. The
facts that differ are listed beside every comparison for that reason: host facts (a fact
one run did not record is "unknown", not a difference; Java is compared by its version
number; of the kernel command line only the parameters the path cares about are shown) and
load settings (the tool and whether it is open or closed loop; an offered rate only for an
open-loop tool). Which pair the page opens on: :mod:`tunepath.analysis.pairing`.

A figure whose requests/s cannot be trusted (the parser derived it, or found it inconsistent with
the report's requests and duration: the frame's ``requests_per_sec_trusted``) says so on its side
of the row (``a_requests_per_sec_trusted`` false, ``a_problems``) with the ⚑ the step pages show
beside it (``a_flags``); so does its pair (``untrusted``: how many such figures it has).

    doc = compare_document(runs, frame)      # every pair of runs, the default pair first
"""

from __future__ import annotations

import itertools
import json
import math
import re
from dataclasses import asdict, dataclass

import pandas as pd

from tunepath.publish import formatting as fmt
from tunepath.analysis import stats
from tunepath.analysis.noise import report_flag
from tunepath.analysis.pairing import choose_default, host_kind, page_order
from tunepath.evidence.store import FACT_KEYS, Run
from tunepath.model.cmdline import KernelCmdline
from tunepath.parse.record import RATE_FIELDS

__all__ = ["compared", "pair_document", "compare_document", "fact_rows", "default_pair", "FactRow", "kernel_parameters"]

FACT_LABELS = {
    "cpu_model": "CPU", "cpus": "CPUs", "cpus_online": "CPUs online", "numa_nodes": "NUMA nodes",
    "kernel": "kernel", "kernel_cmdline": "kernel parameters of the path", "iommu": "IOMMU", "nic": "NIC",
    "os": "OS", "java_version": "Java", "tomcat_version": "Tomcat", "load_generator": "load generator",
    "nofile_limit": "open-file limit",
}
SERVER_ONLY_FACTS = frozenset({"tomcat_version", "java_version", "iommu", "kernel_cmdline"})   # host facts
TOOL_FACTS = ("name", "version", "binary")
NOT_RECORDED = "not recorded"
VERSION = re.compile(r"\d+(?:\.\d+)*")


def _show(value) -> str:
    if value is None:
        return NOT_RECORDED
    if isinstance(value, dict):
        return ", ".join(f"{k} {_show(v)}" for k, v in value.items() if v is not None) or NOT_RECORDED
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (list, tuple)):
        return "; ".join(_show(v) for v in value) or NOT_RECORDED
    return str(value)


def kernel_parameters(cmdline) -> str | None:
    """The parameters of a kernel command line that the path cares about (``model/cmdline``:
    the same rule as the verification blocks); init's arguments are never shown."""
    if not isinstance(cmdline, str):
        return None if cmdline is None else _show(cmdline)
    return KernelCmdline.parse(cmdline).shown or "none of them set"


@dataclass(frozen=True)
class FactRow:
    """One host fact or load setting of both runs. ``state``: "same", "differs", or "unknown"
    (not recorded by one run or both: not counted as a difference)."""

    group: str          # "setting", "server", "client" or "load"
    key: str
    name: str           # the fact's name within its group ("CPU")
    a: str
    b: str
    state: str

    @classmethod
    def of(cls, group: str, key: str, name: str, a, b, same_key=str) -> "FactRow":
        shown = [NOT_RECORDED if v is None else v for v in (a, b)]
        if a is None or b is None:
            state = "unknown"
        else:
            state = "same" if same_key(a) == same_key(b) else "differs"
        return cls(group, key, name, *shown, state)

    @property
    def label(self) -> str:
        return f"{self.group}: {self.name}" if self.group in ("server", "client") else self.name

    def to_data(self) -> dict:
        return {**asdict(self), "label": self.label, "differs": self.state == "differs",
                "recorded": self.a != NOT_RECORDED or self.b != NOT_RECORDED}


def _java(text: str):
    found = VERSION.search(text)
    return found.group(0) if found else text


def _clients(run: Run) -> int:
    """The most clients that drove one measurement of the run at once (its parts), at least one."""
    return max([len(m.parts) for m in run.measurements] + [1])


def _tool(run: Run) -> str:
    c = run.context
    if c.open_loop:
        return "wrk2 (open loop)"
    return f"{c.load_generator.rsplit('/', 1)[-1] or c.load_generator} (closed loop)"


def _offered(run: Run) -> str:
    """The offered rate; where several clients drove the load at once, each offered it: per client,
    and the total."""
    c, n = run.context, _clients(run)
    if not c.open_loop:
        return "closed loop (no offered rate)"
    if n == 1:
        return f"{c.rate:,} req/s"
    return f"{c.rate:,} req/s per client: {n * c.rate:,} req/s in all where {n} clients drove the load at once"


def _warmup(run: Run) -> str:
    c = run.context
    if c.steady_state:
        return f"until steady ({c.warmup_window_s} s windows, at most {c.warmup_s} s)"
    return f"{c.warmup_s} s" if c.warmup_s else "none"


LOAD_ROWS = (("tool", "load generator", _tool),
             ("load_generator", "load generator binary", lambda r: r.context.load_generator),
             ("rate", "offered rate", _offered),
             ("threads", "load-generator threads", lambda r: f"{r.context.threads:,}"),
             ("connections", "connections", lambda r: f"{r.context.connections:,}"),
             ("duration_s", "duration of each load run", lambda r: f"{r.context.duration_s:,} s"),
             ("warmup_s", "warm-up before each measurement", _warmup))


def _host_rows(a: Run, b: Run) -> list[FactRow]:
    rows = []
    for role in ("server", "client"):
        fa, fb = getattr(a, role).facts, getattr(b, role).facts
        for key in FACT_KEYS:
            if (role == "client" and key in SERVER_ONLY_FACTS) or (role == "server" and key == "load_generator"):
                continue
            va, vb = fa.get(key), fb.get(key)
            if key == "kernel_cmdline":
                va, vb = kernel_parameters(va), kernel_parameters(vb)
            elif key == "load_generator":       # the tool, not its build's provenance (that stays in the record)
                va, vb = (({k: v[k] for k in TOOL_FACTS if k in v} or v) if isinstance(v, dict) else v for v in (va, vb))
            shown = [None if v is None else _show(v) for v in (va, vb)]
            rows.append(FactRow.of(role, f"{role}.{key}", FACT_LABELS[key], *shown,
                                   _java if key == "java_version" else str))
    return rows


def fact_rows(a: Run, b: Run) -> list[dict]:
    """Host facts and load settings of both runs; ``differs`` marks the ones to read first (a
    fact one run did not record is ``unknown``, not a difference)."""
    rows = [FactRow.of("setting", "same_machine", "server and client on one machine",
                       _show(a.same_machine), _show(b.same_machine))]
    rows += _host_rows(a, b)
    rows += [FactRow.of("load", f"context.{key}", label, show(a), show(b))
             for key, label, show in LOAD_ROWS]
    return [r.to_data() for r in rows]


def _num(v):
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return None
    return float(v)


def _values(row: pd.Series | dict, key: str) -> list:
    v = row.get(key) if isinstance(row, dict) else row[key]
    return ([x for x in v if isinstance(x, (int, float)) and math.isfinite(x) and x > 0]
            if isinstance(v, (list, tuple)) else [])


def _rate_trust(row: dict, side: str) -> dict:
    """One side's requests/s: whether it can be trusted (a frame without the column: yes), the
    parser's problems that say why not (those of the figures the rate rests on) and their flags,
    as the step pages show them beside the figure (a ⚑)."""
    trusted = row.get("requests_per_sec_trusted")
    problems = [p for p in row.get("problems") if isinstance(p, dict) and p.get("field") in RATE_FIELDS] \
        if isinstance(row.get("problems"), list) else []
    flags = []
    for p in problems:
        text = f"repetition {p['repetition']}: {p['text']}" if p.get("repetition") else p["text"]
        flags.append(report_flag(p["code"], p["field"], text).to_data())
    return {f"{side}_requests_per_sec_trusted": trusted is None or bool(trusted), f"{side}_problems": problems,
            f"{side}_flags": flags}


def step_rows(a: Run, b: Run, frame: pd.DataFrame, step: str) -> list[dict]:
    """Measurements both runs made of ``step`` (same variant), B relative to A."""
    fa = frame[(frame.run_id == a.run_id) & (frame.step == step)]
    fb = frame[(frame.run_id == b.run_id) & (frame.step == step)]
    rows = []
    for ra in fa.to_dict("records"):
        match = [rb for rb in fb.to_dict("records") if rb["variant"] == ra["variant"]]
        if not match:
            continue
        rb = match[0]
        ratio = (rb["requests_per_sec"] / ra["requests_per_sec"]
                 if _num(ra["requests_per_sec"]) and _num(rb["requests_per_sec"]) else None)
        va, vb = _values(ra, "rps_values"), _values(rb, "rps_values")
        d = stats.compare(va, vb) if ratio and va and vb else None
        cpu_ratio = (rb["server_cpu_us_per_req"] / ra["server_cpu_us_per_req"]
                     if _num(ra["server_cpu_us_per_req"]) and _num(rb["server_cpu_us_per_req"]) else None)
        entry = {"variant": ra["variant"], "label": ra["label"], "ratio": ratio,
                 "low": d.low if d else None, "high": d.high if d else None,
                 "significant": d.significant if d else None,
                 "a_requests_per_sec": _num(ra["requests_per_sec"]), "b_requests_per_sec": _num(rb["requests_per_sec"]),
                 "a_n": int(ra.get("n") or 1), "b_n": int(rb.get("n") or 1), "cpu_ratio": cpu_ratio,
                 "a_tool": ra["tool"], "b_tool": rb["tool"], "tool_differs": ra["tool"] != rb["tool"],
                 **_rate_trust(ra, "a"), **_rate_trust(rb, "b")}
        entry["display"] = {
            "a_requests_per_sec": fmt.rate(entry["a_requests_per_sec"]),
            "b_requests_per_sec": fmt.rate(entry["b_requests_per_sec"]),
            "a_cpu": fmt.micros(_num(ra["server_cpu_us_per_req"])),
            "b_cpu": fmt.micros(_num(rb["server_cpu_us_per_req"])),
            "ratio": fmt.speedup(ratio) or fmt.NA,
            "interval": fmt.ratio_interval(entry["low"], entry["high"], d.level if d else None),
            "significance": fmt.significance(entry["significant"], entry["low"] is not None),
            "cpu_ratio": fmt.speedup(cpu_ratio) or fmt.NA,
            "repetitions": f"{entry['a_n']} / {entry['b_n']}",
        }
        rows.append(entry)
    return rows


def _run_summary(run: Run) -> dict:
    kind = host_kind(run)
    return {"run_id": run.run_id, "label": run.info.label, "kind": run.kind, "kind_label": run.info.kind_label,
            "server": run.server.name, "same_machine": run.same_machine, "emulated": run.emulated,
            "arm": run.server.arm and not run.emulated, "host_kind": str(kind) if kind else None}


def pair_document(a: Run, b: Run, frame: pd.DataFrame, path) -> dict:
    """Two runs side by side; ``path`` is the step registry (the order of the steps)."""
    steps = []
    for s in path:
        rows = step_rows(a, b, frame, s.name)
        if rows:
            steps.append({"step": s.name, "title": s.title, "page": s.page, "rows": rows})
    facts = fact_rows(a, b)
    common = sum(len(s["rows"]) for s in steps)
    return {"id": f"{a.run_id}--{b.run_id}", "a": _run_summary(a), "b": _run_summary(b), "steps": steps,
            "facts": facts, "facts_differ": sum(f["differs"] for f in facts),
            "facts_unknown": sum(f["state"] == "unknown" for f in facts),
            "tools_differ": sum(r["tool_differs"] for s in steps for r in s["rows"]),
            "untrusted": sum(not r[f"{side}_requests_per_sec_trusted"] for s in steps for r in s["rows"]
                             for side in "ab"),
            "common": common, "expand": common > 0}


def default_pair(runs: list[Run], frame: pd.DataFrame | None = None) -> tuple[Run, Run] | None:
    """The pair the comparison opens on (:func:`tunepath.analysis.pairing.choose_default`): the
    newest two runs of the same host kind, else the newest two live runs, else the servers
    nearest in size; with a ``frame``, only pairs that measured a configuration in common. A run
    on an emulated server is never picked: its figures test commands, not performance."""
    pick = choose_default(compared(runs), frame)
    return (pick.a, pick.b) if pick else None


def compared(runs: list[Run]) -> list[Run]:
    """The runs the comparison page pairs: all but a version matrix's (the history page compares
    those, by release; their cells would add pairs by the square of their number)."""
    return [r for r in runs if r.info.matrix is None]


def compare_document(runs: list[Run], frame: pd.DataFrame, path, step, charts: dict[str, dict] | None = None,
                     notebook: dict | None = None) -> dict:
    """Every pair of ``runs`` (A = the earlier in the pages' order), the default pair first, then
    the pairs with the most in common; those with nothing in common have ``expand`` False.
    ``path`` is the step registry, ``step`` the comparison step publishing it. A version matrix's
    runs are left out (:func:`compared`)."""
    charts = charts or {}
    runs = page_order(compared(runs))
    first = choose_default(runs, frame)
    pairs = []
    for a, b in itertools.combinations(runs, 2):
        if a.emulated or b.emulated:        # an emulated server's figures time the emulator: never a ratio
            continue
        doc = pair_document(a, b, frame, path)
        doc["default"] = bool(first) and {a.run_id, b.run_id} == {first.a.run_id, first.b.run_id}
        doc["chart"] = charts.get(doc["id"])
        pairs.append(doc)
    pairs.sort(key=lambda p: (not p["default"], -p["common"], p["id"]))
    s = step
    return json.loads(json.dumps({"step": s.name, "number": s.number, "title": s.title, "page": s.page,
                                  "notebook": notebook or {}, "runs": [_run_summary(r) for r in runs],
                                  "default_rule": first.rule if first else None,
                                  "pairs": pairs}, allow_nan=False, default=str))
