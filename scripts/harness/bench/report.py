"""The table ``python -m harness.bench`` prints: :func:`render` of the results it writes as JSON
(see :mod:`harness.bench` for what each benchmark measures)."""

from __future__ import annotations

__all__ = ["render"]


def _fmt(value, spec: str = ".1f", none: str = "—") -> str:
    return none if value is None else format(value, spec)


def _build_lines(b: dict) -> list[str]:
    steps = b["steps"] if isinstance(b["steps"], str) else ",".join(b["steps"])
    rounds = b.get("rounds") or [{"cold": b["cold"], "warm": b["warm"], "trivial": b.get("trivial"),
                                  "ratio": None}]
    lines = ["", f"Replay build (steps: {steps}{', Hugo' if b['hugo'] else ', no Hugo'}; "
                 f"{len(rounds)} round{'s' if len(rounds) != 1 else ''})",
             f"  {'build':<11} {'wall s':>8} {'executed':>9} {'unchanged':>10} {'hugo s':>7} {'jobs':>5}  status"]
    for n, rnd in enumerate(rounds, 1):
        tag = f" {n}" if len(rounds) > 1 else ""
        for label, run in (("cold", rnd["cold"]), ("warm", rnd["warm"]), ("no-cache", rnd.get("no_cache"))):
            if run is None:
                if label == "warm" or "no_cache" in rnd:
                    lines.append(f"  {label + tag:<11} {'—':>8}  not run (the build before it failed)")
                continue
            status = "ok" if run["exit_status"] == 0 else f"FAILED (exit {run['exit_status']})"
            lines.append(f"  {label + tag:<11} {run['wall_s']:>8.1f} {_fmt(run.get('executed'), 'd'):>9} "
                         f"{_fmt(run.get('unchanged'), 'd'):>10} {_fmt(run.get('hugo_s')):>7} "
                         f"{_fmt(run.get('workers'), 'd'):>5}  {status}")
            if run.get("error"):
                lines.append(f"              {run['error'].splitlines()[-1][:300]}")
        trivial = rnd.get("trivial")
        if trivial:
            what = (f"{trivial['wall_s']:>8.1f} {trivial['notebooks']:>9}" if "wall_s" in trivial
                    else f"{'—':>8} {trivial['notebooks']:>9}  FAILED: {trivial.get('error', '')[:200]}")
            ratios = [f"{what_} ÷ trivial = {rnd[key]:.2f}" for what_, key in (("cold", "ratio"),
                                                                             ("no-cache", "no_cache_ratio"))
                      if rnd.get(key)]
            lines.append(f"  {'trivial' + tag:<11} {what}" + (f"  {'; '.join(ratios)}" if ratios else ""))
    m = b.get("medians")
    if m:
        lines.append(f"  medians: cold {_fmt(m['cold_s'])} s, trivial notebooks (Papermill, one after the other) "
                     f"{_fmt(m['trivial_s'])} s, ratio {_fmt(m['ratio'], '.2f')}; warm {_fmt(m['warm_s'])} s; "
                     f"no-cache {_fmt(m.get('no_cache_s'))} s, ratio {_fmt(m.get('no_cache_ratio'), '.2f')}")
    return lines


def render(result: dict) -> str:
    lines = []
    m = result["machine"]
    lines.append(f"tunepath {result['version']} benchmarks — {result['date']} — {m['cpus']} CPUs "
                 f"({m['arch']}{', ' + m['cpu'] if m['cpu'] else ''}), Python {m['python']}"
                 + (" — quick" if result["quick"] else ""))
    b = result.get("build")
    if b:
        lines += _build_lines(b)
    p = result.get("parse")
    if p:
        lines += [""]
        if "error" in p:
            lines.append(f"Parse throughput: {p['error']}")
        else:
            lines += [f"Parse throughput ({p['files']} reports, {p['bytes_per_pass'] / 1024:.0f} KiB a pass; "
                      f"{p['not_reports']} non-report files left out)",
                      f"  {'mode':<26} {'reports/s':>10} {'MB/s':>7} {'µs/report':>10}"]
            for label, what in (("file", "parse_report_file (disk)"), ("memory", "parse_report (in memory)")):
                r = p[label]
                lines.append(f"  {what:<26} {r['reports_per_s']:>10.0f} {r['mb_per_s']:>7.2f} {r['us_per_report']:>10.0f}")
            lines += [f"  note: {n}" for n in p["notes"]]
    o = result.get("overhead")
    if o is not None:
        lines += ["", "Orchestration overhead of live steps (overhead = wall − recorded load, warm-up and smoke-test "
                      "blocks; adjusted: also minus the estimated warm-ups of repetitions 2… the record leaves out)"]
        if not o["runs"]:
            lines.append("  no live runs recorded")
        for run in o["runs"]:
            lines.append(f"  {run['run_id']} (profile {run['profile']})")
            lines.append(f"    {'step':<16} {'wall s':>7} {'load s':>7} {'other s':>7} {'overhead s':>10} {'%':>5}"
                         f" {'+warm-ups s':>11} {'adjusted s':>10} {'%':>5}  wall from")
            for s in run["steps"]:
                if s["wall_s"] is None:
                    lines.append(f"    {s['step']:<16} {'not recorded':>7} {s['load_s']:>7.1f} {s['other_blocks_s']:>7.1f}")
                    continue
                src = "step_timings" if s["wall_source"].startswith("recorded") else "notebook (estimate)"
                extra = (f"{s['unrecorded_warmup_s_est']:>7.1f} ({s['unrecorded_warmups']})"
                         if s["unrecorded_warmups"] else "—")
                lines.append(f"    {s['step']:<16} {s['wall_s']:>7.1f} {s['load_s']:>7.1f} {s['other_blocks_s']:>7.1f} "
                             f"{s['overhead_s']:>10.1f} {_fmt(s['overhead_pct']):>5} {extra:>11} "
                             f"{s['overhead_adjusted_s']:>10.1f} {_fmt(s['overhead_adjusted_pct']):>5}  {src}")
            t = run["total_with_wall"]
            pct = (lambda v: _fmt(v / t["wall_s"] * 100 if t["wall_s"] else None))
            lines.append(f"    {'total':<16} {t['wall_s']:>7.1f} {t['load_s']:>7.1f} {'':>7} {t['overhead_s']:>10.1f} "
                         f"{pct(t['overhead_s']):>5} {t['unrecorded_warmup_s_est']:>11.1f} "
                         f"{t['overhead_adjusted_s']:>10.1f} {pct(t['overhead_adjusted_s']):>5}")
    if result.get("path") is not None:
        from harness.bench.path import render as render_path

        lines += ["", render_path(result["path"]) if result["path"] else "Recorded path runs: none complete"]
    return "\n".join(lines)
