"""Hugo data: the JSON the pages read (``data/steps/<step>.json``, ``data/summary.json``).

This is the one place where typed records become the plain JSON the templates read:
:func:`step_document` (a step's data), :func:`summary_document` (the summary) and
:func:`write_json`. The shapes are documented in ``docs/data-schema.md``. Files are written
atomically and only when their content changed.

A run on an emulated server (``emulated`` in its ``run.json``: the lab's QEMU VM) is never a
step's primary run; it is listed after the real hosts' runs and labelled, and never ranked.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd

from tunepath.publish import formatting as fmt
from tunepath.publish.answer import RunFacts, step_answer
from tunepath.publish.matrixdoc import matrix_entries
from tunepath.publish.display import (PERCENTILES, clean, display, num, placement_text, precision_display,
                                      warmup_text)
from tunepath.analysis.jvmfacts import JVM_COLUMNS
from tunepath.analysis.modes import mode_report
from tunepath.analysis.verdicts import step_verdicts
from tunepath.analysis.noise import NoiseFlag
from tunepath.evidence.store import Run
from tunepath.model.context import cpu_ranges
from tunepath.publish.checks import LOAD_REPORTS, function_checks, tally
from tunepath.publish.commands import bindings_entry, commands_entry, reader_verification_commands
from tunepath.publish.reader_words import host_label, loopback_everywhere, reader_words
from tunepath.publish.verification import kernel_cmdline_entry, verification_entries

__all__ = ["display", "run_block", "step_document", "summary_document", "write_json", "precision_entries",
           "placement_entry", "warmup_rule_entry", "modes_entry"]


def measurement_entry(row: dict) -> dict:
    return clean({
        "variant": row["variant"], "label": row["label"], "tool": row["tool"],
        "command": row["command"], "offered_rate": num(row["offered_rate"]),
        "requests_per_sec": num(row["requests_per_sec"]),
        "latency_avg_ms": num(row["latency_avg_ms"]), "latency_max_ms": num(row["latency_max_ms"]),
        **latency_percentiles(row), "errors": num(row["errors"]),
        "non_2xx_3xx": num(row["non_2xx_3xx"]), "requests": num(row["requests"]),
        "duration_s": num(row["duration_s"]),
        "speedup_vs_stock": num(row["speedup_vs_stock"]),
        "change_vs_previous_pct": num(row["change_vs_previous_pct"]),
        "cpu_vs_stock": num(row.get("cpu_vs_stock")),
        "cpu_change_vs_previous_pct": num(row.get("cpu_change_vs_previous_pct")),
        "previous": row["previous_variant"], "raw": row["raw"],
        "warnings": list(row["warnings"]), "jvm_warnings": list(row["jvm_warnings"] or []),
        "vs_step_first": num(row["vs_step_first"]), "display": display(row).to_data(),
        "n": num(row.get("n")) or 1, "interval_level": num(row.get("interval_level")),
        "rps_low": num(row.get("rps_low")), "rps_high": num(row.get("rps_high")),
        "rps_cv": num(row.get("rps_cv")),
        "server_cpu_us_per_req": num(row.get("server_cpu_us_per_req")),
        "client_cpu_us_per_req": num(row.get("client_cpu_us_per_req")),
        "jvm_facts": {col: num(row.get(col)) for col in JVM_COLUMNS},
        "flags": [_flag_entry(f) for f in row.get("flags") or []],
        "repetitions": [clean(dict(r, display={"requests_per_sec": fmt.rate(num(r["requests_per_sec"])),
                                                "server_cpu_per_req": fmt.micros(num(r["server_cpu_us_per_req"])),
                                                "latency_p99": fmt.latency(num(r["p99_ms"]))}))
                        for r in row.get("repetitions") or []],
        "clients": [clean(dict(c, client=host_label(str(c.get("client") or "")), display={"requests_per_sec": fmt.rate(num(c["requests_per_sec"])),
                                            "latency_p99": fmt.latency(num(c["p99_ms"]))}))
                    for c in row.get("clients") or []],
        "latency_merge": clean(row.get("latency_merge")),
    })


def latency_percentiles(row: dict) -> dict:
    """A measurement's latency percentiles in ms: ``latency_p99_ms`` corrected for coordinated
    omission, ``latency_p99_uncorrected_ms`` uncorrected (wrk2 -U only; None otherwise), and so for
    p50, p90 and p99.9 (``latency_p999_…``)."""
    out = {}
    for field, col in PERCENTILES.items():
        out[f"{field}_ms"] = num(row.get(f"{col}_ms"))
        out[f"{field}_uncorrected_ms"] = num(row.get(f"{col}_uncorrected_ms"))
    return out


def _flag_entry(flag: NoiseFlag) -> dict:
    """A noise flag as a page shows it: beside the figure (``field``) it concerns."""
    text = flag.text
    if flag.repetition:
        text = f"repetition {flag.repetition}: {text}"
    return clean({"code": flag.code, "field": flag.field, "severity": flag.severity,
                   "host": flag.host, "repetition": flag.repetition, "text": text})


def _versions(run: Run) -> dict:
    s, c = run.server.facts, run.client.facts
    lg = c.get("load_generator") or {}
    return {
        "tomcat": s.get("tomcat_version") or fmt.NA,
        "java": s.get("java_version") or fmt.NA,
        "kernel": s.get("kernel") or fmt.NA,
        "os": s.get("os") or fmt.NA,
        "load_generator": " ".join(x for x in (lg.get("name"), lg.get("version")) if x) or fmt.NA,
    }


_RATE = re.compile(r"\breq/s\b")     # a note that quotes a load (the capacity probe's, the sweep's): an
                                      # emulated server's times the emulator, so its pages leave it out


def notes_for(run: Run, step: str | None, sequence_steps: set[str] = frozenset()) -> list[str]:
    """A run's notes that concern ``step`` (None: the summary, which shows the tuning sequence's
    steps, ``sequence_steps``): a note may be limited to some steps. Its text as a reader reads
    it (publish/reader_words.py): hosts by name, kernel command lines reduced; run.json keeps it whole.
    An emulated server's notes that quote a load rate are left out."""
    return [reader_words(note.text, run.server.name, _clients(run))
            for note in run.info.notes if note.concerns(step, sequence_steps)
            and not (run.info.emulated and _RATE.search(note.text))]


def _clients(run: Run) -> set[str]:
    """The addresses the run reached its clients at (each part of a measurement several drove)."""
    return {part.client for m in run.measurements for part in m.live.parts}


def run_header(run: Run, step: str | None = None, sequence_steps: set[str] = frozenset()) -> dict:
    commands = [m.command for m in run.measurements if step is None or m.step == step]
    return clean({
        "run_id": run.run_id, "kind": run.kind, "status": run.info.status,
        "label": run.info.label, "kind_label": run.info.kind_label,
        "server": run.server.name, "server_desc": run.server.description,
        "client": run.client.description or run.client.name,
        "same_machine": run.same_machine, "emulated": run.info.emulated,
        "arm": run.server.arm and not run.info.emulated,
        "kernel_cmdline_before": kernel_cmdline_entry(run),
        "date": run.info.date, "date_note": run.info.date_note,
        "versions": _versions(run), "source": run.info.source,
        "cell": run.info.matrix.words if run.info.matrix else None,
        "matrix": run.info.matrix.matrix if run.info.matrix else None,
        "client_command": commands[0] if commands else "",
        "notes": notes_for(run, step, sequence_steps),
    })


def _rows(run: Run, step: str, frame: pd.DataFrame, path) -> tuple[list[dict], list[dict]]:
    """``run``'s rows of ``step`` in the page's order, and every row of ``run`` (where a tuning
    sequence's previous measurement lies in another step)."""
    run_rows = frame[frame.run_id == run.run_id].to_dict("records")
    rows = sorted((r for r in run_rows if r["step"] == step), key=lambda r: path.sort_key(step, r["variant"], run.context))
    return rows, run_rows


def run_block(run: Run, definition, frame: pd.DataFrame, path) -> dict:
    """One run's part of a step's data: header, measurements, each comparison's verdict
    (:mod:`tunepath.analysis.verdicts`), commands, verification (``definition``: the step object;
    ``path``: the step registry)."""
    step = definition.name
    rows, run_rows = _rows(run, step, frame, path)
    block = run_header(run, step)
    block.update({
        "measurements": [measurement_entry(r) for r in rows],
        "verdicts": [v.to_data() for v in step_verdicts(definition, run, rows, run_rows)],
        "commands": commands_entry(run, definition),
        "bindings": bindings_entry(run),
        "verification": verification_entries(run, step),
        "verification_commands": reader_verification_commands(run, definition),
        "skipped": [{**s.to_data(), "reason": s.reader_reason()} for s in run.skipped if s.step == step],
        "repetitions_info": run.info.repetitions[step].to_data() if step in run.info.repetitions else None,
        "precision": precision_entries(run, definition, rows),
        "placement": placement_entry(run),
        "warmup_rule": warmup_rule_entry(run),
        "modes": modes_entry(run, frame),
    })
    if run.emulated:        # its figures time the emulator: the page shows what its commands did instead
        block["checks"] = [c.to_data() for c in function_checks(run, definition)]
        for name in LOAD_REPORTS & set(block["verification"]):
            block["verification"][name]["load_report"] = True
    return loopback_everywhere(block, run.server.name, _clients(run))


def modes_entry(run: Run, frame: pd.DataFrame) -> dict:
    """Whether any configuration of ``run`` (every step of it) fell into two modes, and whether the
    slow mode goes with a JVM fact (``analysis.modes.ModeReport.to_data``)."""
    return clean(mode_report(run.run_id, frame[frame.run_id == run.run_id].to_dict("records")).to_data())


def _warmups(run: Run, step: str) -> dict[str, list[dict]]:
    """variant → the steady-state warm-ups its measurements recorded (every repetition, dropped too)."""
    out: dict[str, list[dict]] = {}
    for m in run.record.get("measurements", []):
        if m.get("step") == step and isinstance(m.get("warmup"), dict) and m["warmup"].get("window_s"):
            out.setdefault(m["variant"], []).append(m["warmup"])
    return out


def precision_entries(run: Run, definition, rows: list[dict]) -> list[dict] | None:
    """Per variant (in the measurements' order), how precise its figure ended up, as the run
    recorded it (``repetitions[step]["variants"]``: counted, dropped and why, half-width and level,
    CV, median time to steady state) and how many of its measurements never became steady. None
    where the run recorded no precision (the reference runs, live runs before it was recorded)."""
    reps = run.info.repetitions.get(definition.name)
    if reps is None or not reps.variants:
        return None
    labels = {r["variant"]: r["label"] for r in rows}
    order = list(labels) + [v for v, _ in reps.variants if v not in labels]
    warmups = _warmups(run, definition.name)
    out = []
    for variant in order:
        p = reps.precision(variant)
        if p is None:
            continue
        seen = warmups.get(variant, [])
        not_steady = sum(1 for w in seen if w.get("steady") is False) if seen else None
        entry = {"variant": variant, "label": labels.get(variant) or definition.label(variant, run.context),
                 **p.to_data(), "warmups": len(seen), "not_steady": not_steady}
        entry["display"] = precision_display(p.n, p.dropped, p.halfwidth_pct, p.level, p.cv_pct, p.steady_state_s,
                                             len(seen), not_steady).to_data()
        out.append(clean(entry))
    return out


def placement_entry(run: Run) -> dict:
    """Where Tomcat and the load generator ran (``taskset`` CPU lists, "" = unpinned), from the
    run's context, else from its measurements' ``placement``; ``recorded`` False where the run
    recorded neither (then ``pinned`` and ``shared_kernel`` are null)."""
    ctx, recorded = run.context, "shared_kernel" in (run.record.get("context") or {})
    if recorded:
        shared, server, client = ctx.shared_kernel, cpu_ranges(ctx.server_pin_cpus), cpu_ranges(ctx.client_pin_cpus)
    else:
        placed = next((m["placement"] for m in run.record.get("measurements", []) if isinstance(m.get("placement"), dict)),
                      None)
        recorded = placed is not None
        shared, server, client = ((placed["shared_kernel"], placed["server_cpus"], placed["client_cpus"]) if placed
                                  else (None, "", ""))
    pinned = bool(server) if recorded else None
    return {"recorded": recorded, "pinned": pinned, "shared_kernel": shared, "server_cpus": server,
            "client_cpus": client,
            "text": placement_text(recorded=recorded, pinned=pinned, shared_kernel=shared, server_cpus=server,
                                   client_cpus=client, same_machine=run.same_machine)}


def warmup_rule_entry(run: Run) -> dict:
    """What came before each measurement: the steady-state rule (windows of ``window_s`` until
    ``windows`` in a row are within ±``pct`` % of their median, at most ``cap_s``), or one fixed
    warm-up run of ``cap_s`` (``steady_state`` False), or none; ``recorded`` False where the run's
    context has no warm-up at all (the published reference runs)."""
    ctx, recorded = run.context, run.record.get("context") or {}
    known = "warmup_s" in recorded or "warmup_window_s" in recorded
    steady = known and ctx.steady_state
    rule = {"recorded": known, "steady_state": steady, "window_s": ctx.warmup_window_s if steady else None,
            "windows": ctx.steady_windows if steady else None, "pct": ctx.steady_pct if steady else None,
            "cap_s": ctx.warmup_s if known else None,
            **({"jit_pct": ctx.jit_quiet_pct} if steady and ctx.jit_quiet_pct else {})}
    rule["text"] = warmup_text(recorded=known, steady_state=steady, window_s=ctx.warmup_window_s,
                               windows=ctx.steady_windows, pct=ctx.steady_pct, cap_s=ctx.warmup_s,
                               jit_pct=ctx.jit_quiet_pct)
    return rule


def historical_for(step: str, directory: Path | None) -> list[dict]:
    """Figures from the older sources about ``step``, each with the hardware it came from."""
    if directory is None or not Path(directory).is_dir():
        return []
    out = []
    for path in sorted(Path(directory).glob("*.json")):
        doc = json.loads(path.read_text(encoding="utf-8"))
        hardware = {h["id"]: h["description"] for h in doc.get("hardware", [])}
        figures = [dict(f, hardware=hardware.get(f.get("hardware"), "not stated in the source"))
                   for f in doc.get("figures", []) if f.get("topic") == step]
        findings = [dict(f, hardware=hardware.get(f.get("hardware"), "not stated in the source"))
                    for f in doc.get("findings", []) if f.get("topic") == step]
        if figures or findings:
            out.append({"source_id": doc.get("source_id", path.stem), "source": doc.get("source", ""),
                        "era_note": doc.get("era_note", ""), "figures": figures, "findings": findings})
    return out


def step_document(s, runs: list[Run], frame: pd.DataFrame, charts: list[dict],
                  notebook: dict, historical: list[dict] | None = None, path=None) -> dict:
    """A step's Hugo data (``s``: the step object; ``path``: the step registry)."""
    ordered = sorted((r for r in runs if s.name in r.steps()), key=lambda r: r.emulated)   # stable: emulated last
    blocks = [run_block(r, s, frame, path) for r in ordered]
    real = [b for b, r in zip(blocks, ordered) if not r.emulated]
    answer = step_answer(s, [RunFacts.from_block(r, b) for r, b in zip(ordered, blocks)])
    return {
        "step": s.name, "number": s.number, "title": s.title, "page": s.page,
        # the run the page is about: never an emulated server's
        "primary_run": (real or blocks)[0]["run_id"] if blocks else None,
        "answer": answer.to_data() if answer else None,
        "notebook": notebook, "runs": blocks, "charts": charts, "historical": historical or [],
    }


def summary_document(runs: list[Run], frame: pd.DataFrame, charts_by_run: dict[str, list[dict]],
                     notebook: dict, path, history_page: str = "") -> dict:
    """Every run's tuning sequence and comparison steps (``path``: the step registry). The runs of a
    version matrix are the history page's (``history_page``): the summary names each matrix instead."""
    titles = {s.name: s.title for s in path}
    pages = {s.name: s.page for s in path}
    compared = {s.name for s in path if s.compares_variants}
    sequence_steps = {s for s, _ in path.sequence}
    hosts = []
    for run in sorted(runs, key=lambda r: r.emulated):      # emulated servers last, apart (never ranked)
        if run.info.matrix is not None:
            continue
        rows = frame[(frame.run_id == run.run_id) & (frame.order >= 0)].sort_values("order")
        # the rate sweep is read at a latency objective on its own page, not as a comparison table
        others = frame[(frame.run_id == run.run_id) & (frame.order < 0) & frame.step.isin(compared)]
        if rows.empty and others.empty:
            continue
        entry = run_header(run, None, sequence_steps)
        if run.emulated:    # its figures time the emulator: what its commands did, step by step
            entry["checks"] = step_checks(run, path)
            hosts.append(loopback_everywhere(entry, run.server.name, _clients(run)))
            continue
        if not rows.empty:
            entry["client_command"] = rows.iloc[0]["command"]
        entry["rows"] = [clean({"step": r["step"], "step_title": titles[r["step"]], "page": pages[r["step"]],
                                 "variant": r["variant"], "label": r["label"], "tool": r["tool"],
                                 "requests_per_sec": num(r["requests_per_sec"]),
                                 "speedup_vs_stock": num(r["speedup_vs_stock"]),
                                 "flags": [_flag_entry(f) for f in r.get("flags") or []],
                                 "display": display(r).to_data()})
                         for r in rows.to_dict("records")]
        entry["charts"] = charts_by_run.get(run.run_id, [])
        entry["comparisons"] = [
            {"step": step, "step_title": titles[step], "page": pages[step],
             "rows": [clean({"variant": r["variant"], "label": r["label"], "tool": r["tool"],
                              "requests_per_sec": num(r["requests_per_sec"]),
                              "flags": [_flag_entry(f) for f in r.get("flags") or []], "display": display(r).to_data()})
                      for r in sorted(others[others.step == step].to_dict("records"),
                                      key=lambda r: path.sort_key(r["step"], r["variant"], run.context))]}
            for step in [s.name for s in path if s.name in set(others.step)]]
        hosts.append(loopback_everywhere(entry, run.server.name, _clients(run)))
    return {"notebook": notebook, "hosts": hosts, "matrices": matrix_entries(runs, history_page),
            "changes": change_table(runs, frame, path)}



def step_checks(run: Run, path) -> list[dict]:
    """An emulated server's function checks per step (publish/checks.py), in the path's order:
    how many of the step's command blocks passed, failed or were skipped."""
    recorded = set(run.steps()) | {b.get("step") for b in run.record.get("blocks", [])}
    out = []
    for s in path:
        if s.name in recorded:
            checks = function_checks(run, s)
            if checks:
                out.append({"step": s.name, "step_title": s.title, "page": s.page,
                            "blocks": len(checks), **tally(checks)})
    return out


def _facts(step, run: Run, frame: pd.DataFrame, path) -> RunFacts | None:
    """What ``step``'s answer reads of ``run`` (None: the run has nothing of the step)."""
    rows, run_rows = _rows(run, step.name, frame, path)
    skipped = tuple((s.variant, s.reader_reason()) for s in run.skipped if s.step == step.name)
    if not rows and not skipped:
        return None
    return RunFacts(run, tuple(step_verdicts(step, run, rows, run_rows)), skipped, bool(rows))


def change_table(runs: list[Run], frame: pd.DataFrame, path) -> list[dict]:
    """The summary's "what to change" table: one row per step that changes something (its answer,
    publish/answer.py), on the reference hosts and each live host kind's newest run; never an emulated server."""
    real = [r for r in runs if not r.emulated]
    out = []
    for s in path:
        if not s.change or s.kind not in ("tuning", "comparison", "sweep"):
            continue
        facts = [f for f in (_facts(s, r, frame, path) for r in real) if f is not None]
        answer = step_answer(s, facts)
        out.append({"step": s.name, "title": s.title, "page": s.page, "change": s.change,
                    "hosts": [h.to_data() for h in answer.hosts] if answer else []})
    return out


def write_json(path: Path, document: dict) -> bool:
    """Write ``document`` if it changed; returns True when the file was (re)written."""
    path = Path(path)
    text = json.dumps(clean(document), indent=2, ensure_ascii=False, allow_nan=False) + "\n"
    if path.exists() and path.read_text(encoding="utf-8") == text:
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)
    return True
