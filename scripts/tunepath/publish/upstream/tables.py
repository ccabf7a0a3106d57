"""Plain-Markdown renderings of the site's data-driven blocks, for the upstream export: each
function takes the built data of one run (``data/steps/<step>.json``) and returns Markdown
that uses no shortcode. The figures are the ``display`` strings the site prints, unchanged."""

from __future__ import annotations

__all__ = ["table", "results", "provenance", "precision", "latency", "sweep", "modes",
           "historical", "summary_host", "compare_pair", "cell"]

_TRIVIAL = ("0", "n/a", "")
# (display field, heading, shown even when trivial)
_RESULT_COLUMNS = (
    ("requests_per_sec", "Requests/s", True), ("vs_step_first", "vs first", False),
    ("server_cpu_per_req", "Server CPU/req", False), ("speedup_vs_stock", "vs stock", False),
    ("change_vs_previous_pct", "vs previous", False), ("latency_avg", "Avg latency", True),
    ("latency_p99", "p99", False), ("errors", "Errors", False),
    ("non_2xx_3xx", "Non-2xx/3xx", False), ("client_cpu_per_req", "Client CPU/req", False),
)
_EXTRAS = {
    "requests_per_sec": ("rps_interval", "rps_cv"), "server_cpu_per_req": ("cpu_interval",),
    "vs_step_first": ("vs_first_interval", "vs_first_significance"),
    "change_vs_previous_pct": ("change_interval", "change_significance"),
}


def cell(text) -> str:
    return str("" if text is None else text).replace("|", "\\|").replace("\n", " ").strip()


def table(head: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(cell(h) for h in head) + " |",
             "|" + "|".join("---" for _ in head) + "|"]
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def _figure(display: dict, field: str, flags: list) -> str:
    text = display.get(field) or "—"
    if any(f.get("field") == field for f in flags or ()):
        text += " ⚑"
    extras = [display.get(e) for e in _EXTRAS.get(field, ()) if display.get(e)]
    if field == "requests_per_sec" and display.get("repetitions"):
        extras.insert(0, f"median of {display['repetitions']}")
    return text + (f" ({'; '.join(extras)})" if extras else "")


def results(run: dict) -> str:
    ms = run.get("measurements") or []
    if not ms:
        return "\n".join(f"- **{s['variant']}** was skipped: {s['reason']}" for s in run.get("skipped") or ())
    cols = [(f, h) for f, h, always in _RESULT_COLUMNS
            if always or any(m["display"].get(f) not in _TRIVIAL for m in ms)]
    first = next((m["display"].get("step_first_label") for m in ms if m["display"].get("step_first_label")), "")
    head = ["Variant"] + [f"vs {first}" if f == "vs_step_first" and first else h for f, h in cols]
    rows = [[f"{m.get('label') or m['variant']} ({m.get('tool') or 'tool not recorded'}, "
             f"CPUs {m['display'].get('cpus_online') or 'n/a'})"]
            + [_figure(m["display"], f, m.get("flags")) for f, _ in cols] for m in ms]
    out = [table(head, rows)]
    flags = [(m.get("label") or m["variant"], f) for m in ms for f in m.get("flags") or ()]
    if flags:
        out.append("Noise flags (⚑ in the table):\n\n" + "\n".join(
            f"- {label}, `{f['code']}`: {f['text']}" for label, f in flags))
    skipped = run.get("skipped") or ()
    if skipped:
        out.append("Skipped in this run:\n\n" + "\n".join(f"- {s['variant']}: {s['reason']}" for s in skipped))
    return "\n\n".join(out)


def provenance(run: dict) -> str:
    versions = ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in (run.get("versions") or {}).items())
    client = "the same machine as the server (loopback)" if run.get("same_machine") else run.get("client") or "not stated"
    when = run.get("date") or run.get("date_note") or "not recorded"
    lines = [f"These figures come from run `{run['run_id']}`: server {run.get('server')}"
             + (f" ({run['server_desc']})" if run.get("server_desc") else "")
             + f"; client {client}; date {when}."]
    if versions:
        lines.append(f"Versions: {versions}.")
    if run.get("emulated"):
        lines.append("The server was an emulated virtual machine: its figures are not benchmarks of Arm hardware.")
    if run.get("same_machine"):
        lines.append("Server and client shared one machine, so the figures measure the pair "
                     "competing for the same CPUs, not what a server can do.")
    out = " ".join(lines)
    if run.get("client_command"):
        out += "\n\nThe client command of this run:\n\n```bash\n" + run["client_command"] + "\n```"
    return out


def _host(run: dict) -> str:
    return f"On {run.get('server')} (run `{run['run_id']}`" + (", server and client on one machine" if run.get("same_machine") else "") + "):"


def precision(run: dict) -> str:
    rows = run.get("precision")
    if not rows:
        return _host(run) + " this run recorded no precision figures."
    fields = (("n", "Counted n"), ("dropped", "Dropped"), ("halfwidth_level", "± half-width (level)"),
              ("cv", "CV"), ("steady_state", "Steady after (s)"), ("not_steady", "Not steady"))
    body = table(["Variant"] + [h for _, h in fields],
                 [[p.get("label") or p["variant"]] + [p["display"].get(f, "") for f, _ in fields] for p in rows])
    return _host(run) + "\n\n" + body


def latency(run: dict, variant: str | None) -> str:
    heads = (("latency_p50", "p50"), ("latency_p90", "p90"), ("latency_p99", "p99"), ("latency_p999", "p99.9"))
    rows = []
    for m in run.get("measurements") or ():
        if variant and m["variant"] != variant:
            continue
        for field, head in heads:
            if m.get(f"{field}_ms") is not None and m.get(f"{field}_uncorrected_ms") is not None:
                rows.append([m.get("label") or m["variant"], head, m["display"][field],
                             m["display"][f"{field}_uncorrected"]])
    if not rows:
        return _host(run) + " no wrk2 -U measurement in this run."
    return _host(run) + "\n\n" + table(["Variant", "Percentile", "Corrected", "Uncorrected"], rows)


def sweep(run: dict) -> str:
    a = run.get("analysis")
    if not a:
        return _host(run) + " this run recorded no sweep."
    if "capacity_rate" in a:
        d = a["display"]
        rows = [["Latency objective", d["objective"]],
                ["Capacity: highest offered rate that met it", f"{d['capacity_rate']} req/s"],
                ["Served at that rate, and its latency", f"{d['capacity_achieved']} req/s, {d['capacity_latency']}"],
                ["Lowest offered rate that missed it", d["first_violation"]],
                ["Highest rate below every miss", d["sustained_rate"]],
                ["Maximum throughput (at offered rate)", f"{d['max_throughput']} req/s ({d['max_throughput_offered']})"]]
        if d.get("suspect"):
            rows.append(["Misses below the capacity (noise suspected)", d["suspect"]])
        return _host(run) + " " + a.get("sentence", "") + "\n\n" + table(["Reading", "Value"], rows)
    parts = [f"{a.get('best_words') or 'Highest median throughput'}: **{a['best_label']}**."]
    for key, what in (("below", f"Different from the best, {a.get('worse_words') or 'with lower throughput'}"),
                      ("ties", "Not distinguishable from it"),
                      ("untested", "Too few repetitions to reach a verdict")):
        if a.get(key):
            parts.append(f"{what}: {', '.join(a[key])}.")
    return _host(run) + " " + " ".join(parts)


def modes(run: dict) -> str:
    m = run.get("modes") or {}
    out = [_host(run) + " " + (m.get("text") or "no JVM mode analysis recorded.")]
    if m.get("bimodal"):
        out.append("\n".join(f"- {b['text']}" for b in m["bimodal"]))
        if m.get("recorded") and m.get("facts"):
            out.append(table(["Fact", "Fast mode", "Slow mode", "Verdict"],
                             [[f["label"], f["display"]["fast"], f["display"]["slow"], f["short"]]
                              for f in m["facts"]]))
    return "\n\n".join(out)


def historical(sources: list) -> str:
    if not sources:
        return "*No historical figures for this step in the sources.*"
    out = []
    for s in sources:
        part = [f"**Historical figures, not measured by this project.** Source: {s.get('source') or s['source_id']}."
                + (f" {s['era_note']}" if s.get("era_note") else "")]
        if s.get("figures"):
            part.append(table(["What", "Configuration", "Value", "Hardware"], [
                [f["what"], f.get("configuration") or "not stated", _value(f),
                 f.get("hardware") or "not stated in the source"] for f in s["figures"]]))
        part += [f"- {x['text']} (hardware: {x.get('hardware') or 'not stated in the source'})"
                 for x in s.get("findings") or ()]
        out.append("\n\n".join(part))
    return "\n\n".join(out)


def _value(f: dict) -> str:
    v = f["value"]
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    unit = f.get("unit") or ""
    return f"{v}{'' if unit in ('', '%') else ' '}{unit}"


def summary_host(host: dict, titles: dict[str, str]) -> str:
    cols = (("requests_per_sec", "Requests/s"), ("speedup_vs_stock", "vs stock"),
            ("latency_avg", "Avg latency"), ("errors", "Errors"))
    rows = [[titles.get(r["step"], r["step"]), r.get("label") or r["variant"]]
            + [_figure(r["display"], f, r.get("flags")) if f == "requests_per_sec" else r["display"].get(f, "")
               for f, _ in cols] for r in host.get("rows") or ()]
    out = [_host(host)]
    if rows:
        out.append(table(["Step", "Variant"] + [h for _, h in cols], rows))
    for c in host.get("comparisons") or ():
        out.append(f"{titles.get(c['step'], c['step'])}, each variant against the first one of its step:\n\n" + table(
            ["Variant", "Requests/s", "vs first", "Avg latency", "Errors"],
            [[r.get("label") or r["variant"], r["display"].get("requests_per_sec", ""),
              r["display"].get("vs_step_first", ""), r["display"].get("latency_avg", ""),
              r["display"].get("errors", "")] for r in c["rows"]]))
    return "\n\n".join(out)


def compare_pair(pair: dict, titles: dict[str, str]) -> str:
    a, b = pair["a"], pair["b"]
    out = [f"A is run `{a['run_id']}` ({a['label']}); B is run `{b['run_id']}` ({b['label']})."]
    for s in pair.get("steps") or ():
        out.append(f"{titles.get(s['step'], s['step'])}:\n\n" + table(
            ["Variant", "A req/s", "B req/s", "B ÷ A", "Server CPU/req A · B", "Runs A / B"],
            [[r["label"] + ("" if r["a_tool"] == r["b_tool"] else f" ({r['a_tool']} vs {r['b_tool']})"),
              r["display"]["a_requests_per_sec"], r["display"]["b_requests_per_sec"],
              " ".join(x for x in (r["display"]["ratio"], r["display"].get("interval"),
                                   r["display"].get("significance")) if x),
              f"{r['display']['a_cpu']} · {r['display']['b_cpu']}", r["display"]["repetitions"]]
             for r in s["rows"]]))
    if not pair.get("steps"):
        out.append("These two runs measured no configuration in common: only their facts can be compared.")
    out.append("Hosts and load settings (**bold**: they differ):\n\n" + table(
        ["Fact", f"A: {a['server']}", f"B: {b['server']}"],
        [[f"**{f['label']}**" if f["differs"] else f["label"], f["a"], f["b"]] for f in pair.get("facts") or ()]))
    return "\n\n".join(out)


def changes(rows: list[dict]) -> str:
    """The summary's "what to change" table (data/summary.json → changes)."""
    def hosts(row: dict, kind: str) -> str:
        found = [f"**{h['who'].split(',')[0]}**: {h['brief']}" for h in row.get("hosts") or ()
                 if h["kind"] == kind and h.get("arm")]
        return "<br>".join(found) or "not measured"
    return table(["Step", "Reference hosts (one run each)", "Newest live run on an Arm server (95 % verdict)",
                  "What to change"],
                 [[f"[{r['title']}](../{r['page']}/)", hosts(r, "reference"), hosts(r, "live"), r["change"]]
                  for r in rows])


def answer(a: dict | None) -> str:
    """The answer a step page opens with (data/steps/<step>.json → answer), as Markdown."""
    if not a:
        return ""
    lines = [f"**Change:** {a['change']}", ""]
    hosts = [h for h in a.get("hosts") or () if h.get("arm")]       # Arm's repository: Arm servers only
    if hosts:
        lines += ["**What it did:**", ""]
        for h in hosts:
            if h.get("note") or len(h.get("lines") or ()) > 2:
                lines.append(f"- **{h['who']}**: {h['brief']}.")
            else:
                lines.append(f"- **{h['who']}**: " + "; ".join(line["text"] for line in h["lines"]) + ".")
        lines.append("")
    lines.append(f"**When not to:** {a['avoid']}")
    return "\n".join(lines)

