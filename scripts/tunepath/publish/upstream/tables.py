"""Plain-Markdown renderings of the site's data-driven blocks, for the upstream export: each
function takes the built data of one run (``data/steps/<step>.json``) and returns Markdown
that uses no shortcode. The figures are the ``display`` strings the site prints, unchanged; every
string of the data reaches the page through ``escape.py`` (text, code span or code block)."""

from __future__ import annotations

from tunepath.publish.upstream.escape import cell, code, fence, text

__all__ = ["table", "results", "provenance", "precision", "latency", "sweep", "modes",
           "historical", "summary_host", "compare_pair", "cell", "verification", "cmdline_diff"]

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


def table(head: list[str], rows: list[list[str]]) -> str:
    """A table of cells already escaped (``text``, ``code`` or our own markup)."""
    lines = ["| " + " | ".join(cell(h) for h in head) + " |",
             "|" + "|".join("---" for _ in head) + "|"]
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def _figure(display: dict, field: str, flags: list) -> str:
    shown = text(display.get(field) or "—")
    if any(f.get("field") == field for f in flags or ()):
        shown += " ⚑"
    extras = [text(display.get(e)) for e in _EXTRAS.get(field, ()) if display.get(e)]
    if field == "requests_per_sec" and display.get("repetitions"):
        extras.insert(0, f"median of {text(display['repetitions'])}")
    return shown + (f" ({'; '.join(extras)})" if extras else "")


def _label(row: dict) -> str:
    return text(row.get("label") or row["variant"])


def results(run: dict) -> str:
    ms = run.get("measurements") or []
    if not ms:
        return "\n".join(f"- **{text(s['variant'])}** was skipped: {text(s['reason'])}" for s in run.get("skipped") or ())
    cols = [(f, h) for f, h, always in _RESULT_COLUMNS
            if always or any(m["display"].get(f) not in _TRIVIAL for m in ms)]
    first = next((m["display"].get("step_first_label") for m in ms if m["display"].get("step_first_label")), "")
    head = ["Variant"] + [f"vs {text(first)}" if f == "vs_step_first" and first else h for f, h in cols]
    rows = [[f"{_label(m)} ({text(m.get('tool') or 'tool not recorded')}, "
             f"CPUs {text(m['display'].get('cpus_online') or 'n/a')})"]
            + [_figure(m["display"], f, m.get("flags")) for f, _ in cols] for m in ms]
    out = [table(head, rows)]
    flags = [(_label(m), f) for m in ms for f in m.get("flags") or ()]
    if flags:
        out.append("Noise flags (⚑ in the table):\n\n" + "\n".join(
            f"- {label}, {code(f['code'])}: {text(f['text'])}" for label, f in flags))
    skipped = run.get("skipped") or ()
    if skipped:
        out.append("Skipped in this run:\n\n" + "\n".join(f"- {text(s['variant'])}: {text(s['reason'])}"
                                                           for s in skipped))
    return "\n\n".join(out)


def provenance(run: dict) -> str:
    versions = ", ".join(f"{text(k.replace('_', ' '))} {text(v)}" for k, v in (run.get("versions") or {}).items())
    client = ("the same machine as the server (loopback)" if run.get("same_machine")
              else text(run.get("client") or "not stated"))
    when = text(run.get("date") or run.get("date_note") or "not recorded")
    lines = [f"These figures come from run {code(run['run_id'])}: server {text(run.get('server'))}"
             + (f" ({text(run['server_desc'])})" if run.get("server_desc") else "")
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
        out += "\n\nThe client command of this run:\n\n" + fence(run["client_command"], "bash")
    return out


def _host(run: dict) -> str:
    return (f"On {text(run.get('server'))} (run {code(run['run_id'])}"
            + (", server and client on one machine" if run.get("same_machine") else "") + "):")


def precision(run: dict) -> str:
    rows = run.get("precision")
    if not rows:
        return _host(run) + " this run recorded no precision figures."
    fields = (("n", "Counted n"), ("dropped", "Dropped"), ("halfwidth_level", "± half-width (level)"),
              ("cv", "CV"), ("steady_state", "Steady after (s)"), ("not_steady", "Not steady"))
    body = table(["Variant"] + [h for _, h in fields],
                 [[_label(p)] + [text(p["display"].get(f, "")) for f, _ in fields] for p in rows])
    return _host(run) + "\n\n" + body


def latency(run: dict, variant: str | None) -> str:
    heads = (("latency_p50", "p50"), ("latency_p90", "p90"), ("latency_p99", "p99"), ("latency_p999", "p99.9"))
    rows = []
    for m in run.get("measurements") or ():
        if variant and m["variant"] != variant:
            continue
        for field, head in heads:
            if m.get(f"{field}_ms") is not None and m.get(f"{field}_uncorrected_ms") is not None:
                rows.append([_label(m), head, text(m["display"][field]),
                             text(m["display"][f"{field}_uncorrected"])])
    if not rows:
        return _host(run) + " no wrk2 -U measurement in this run."
    return _host(run) + "\n\n" + table(["Variant", "Percentile", "Corrected", "Uncorrected"], rows)


def sweep(run: dict) -> str:
    a = run.get("analysis")
    if not a:
        return _host(run) + " this run recorded no sweep."
    if "capacity_rate" in a:
        d = {k: text(v) for k, v in a["display"].items()}
        rows = [["Latency objective", d["objective"]],
                ["Capacity: highest offered rate that met it", f"{d['capacity_rate']} req/s"],
                ["Served at that rate, and its latency", f"{d['capacity_achieved']} req/s, {d['capacity_latency']}"],
                ["Lowest offered rate that missed it", d["first_violation"]],
                ["Highest rate below every miss", d["sustained_rate"]],
                ["Maximum throughput (at offered rate)", f"{d['max_throughput']} req/s ({d['max_throughput_offered']})"]]
        if d.get("suspect"):
            rows.append(["Misses below the capacity (noise suspected)", d["suspect"]])
        return _host(run) + " " + text(a.get("sentence", "")) + "\n\n" + table(["Reading", "Value"], rows)
    parts = [f"{text(a.get('best_words') or 'Highest median throughput')}: **{text(a['best_label'])}**."]
    for key, what in (("below", f"Different from the best, {text(a.get('worse_words') or 'with lower throughput')}"),
                      ("ties", "Not distinguishable from it"),
                      ("untested", "Too few repetitions to reach a verdict")):
        if a.get(key):
            parts.append(f"{what}: {', '.join(text(x) for x in a[key])}.")
    return _host(run) + " " + " ".join(parts)


def modes(run: dict) -> str:
    m = run.get("modes") or {}
    out = [_host(run) + " " + text(m.get("text") or "no JVM mode analysis recorded.")]
    if m.get("bimodal"):
        out.append("\n".join(f"- {text(b['text'])}" for b in m["bimodal"]))
        if m.get("recorded") and m.get("facts"):
            out.append(table(["Fact", "Fast mode", "Slow mode", "Verdict"],
                             [[text(f["label"]), text(f["display"]["fast"]), text(f["display"]["slow"]),
                               text(f["short"])] for f in m["facts"]]))
    return "\n\n".join(out)


def facts_table(run: dict) -> str:
    """What each configuration's run recorded beside its figures (the facts-table shortcode)."""
    t = (run.get("analysis") or {}).get("facts_table")
    if not t:
        return _host(run) + " this run recorded none of these facts."
    keys = [c["key"] for c in t["columns"]]
    body = table(["Configuration"] + [text(c["label"]) for c in t["columns"]],
                 [[text(r["label"])] + [text(r["cells"].get(k, "")) for k in keys] for r in t["rows"]])
    return _host(run) + "\n\n" + body + "\n\n" + text(t.get("note", ""))


def historical(sources: list) -> str:
    if not sources:
        return "*No historical figures for this step in the sources.*"
    out = []
    for s in sources:
        part = [f"**Historical figures, not measured by this project.** Source: "
                f"{text(s.get('source') or s['source_id'])}." + (f" {text(s['era_note'])}" if s.get("era_note") else "")]
        if s.get("figures"):
            part.append(table(["What", "Configuration", "Value", "Hardware"], [
                [text(f["what"]), text(f.get("configuration") or "not stated"), text(_value(f)),
                 text(f.get("hardware") or "not stated in the source")] for f in s["figures"]]))
        part += [f"- {text(x['text'])} (hardware: {text(x.get('hardware') or 'not stated in the source')})"
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
    rows = [[text(titles.get(r["step"], r["step"])), _label(r)]
            + [_figure(r["display"], f, r.get("flags")) if f == "requests_per_sec" else text(r["display"].get(f, ""))
               for f, _ in cols] for r in host.get("rows") or ()]
    out = [_host(host)]
    if rows:
        out.append(table(["Step", "Variant"] + [h for _, h in cols], rows))
    for c in host.get("comparisons") or ():
        out.append(f"{text(titles.get(c['step'], c['step']))}, each variant against the first one of its step:\n\n"
                   + table(["Variant", "Requests/s", "vs first", "Avg latency", "Errors"],
                           [[_label(r)] + [text(r["display"].get(f, "")) for f in
                                           ("requests_per_sec", "vs_step_first", "latency_avg", "errors")]
                            for r in c["rows"]]))
    return "\n\n".join(out)


def compare_pair(pair: dict, titles: dict[str, str]) -> str:
    a, b = pair["a"], pair["b"]
    out = [f"A is run {code(a['run_id'])} ({text(a['label'])}); B is run {code(b['run_id'])} ({text(b['label'])})."]
    for s in pair.get("steps") or ():
        out.append(f"{text(titles.get(s['step'], s['step']))}:\n\n" + table(
            ["Variant", "A req/s", "B req/s", "B ÷ A", "Server CPU/req A · B", "Runs A / B"],
            [[_pair_row(r)] + [text(r["display"][f"{k}_requests_per_sec"]) + (" ⚑" if r.get(f"{k}_flags") else "")
                               for k in "ab"]
             + [text(" ".join(x for x in (r["display"]["ratio"], r["display"].get("interval"),
                                          r["display"].get("significance")) if x)),
                f"{text(r['display']['a_cpu'])} · {text(r['display']['b_cpu'])}", text(r["display"]["repetitions"])]
             for r in s["rows"]]))
        flags = [(f"{k.upper()}: {_label(r)}", f) for r in s["rows"] for k in "ab" for f in r.get(f"{k}_flags") or ()]
        if flags:
            out.append("Noise flags (⚑ in the table):\n\n" + "\n".join(
                f"- {label}, {code(f['code'])}: {text(f['text'])}" for label, f in flags))
    if not pair.get("steps"):
        out.append("These two runs measured no configuration in common: only their facts can be compared.")
    out.append("Hosts and load settings (**bold**: they differ):\n\n" + table(
        ["Fact", f"A: {text(a['server'])}", f"B: {text(b['server'])}"],
        [[f"**{text(f['label'])}**" if f["differs"] else text(f["label"]), text(f["a"]), text(f["b"])]
         for f in pair.get("facts") or ()]))
    return "\n\n".join(out)


def _pair_row(r: dict) -> str:
    return text(r["label"]) + ("" if r["a_tool"] == r["b_tool"] else f" ({text(r['a_tool'])} vs {text(r['b_tool'])})")


def changes(rows: list[dict]) -> str:
    """The summary's "what to change" table (data/summary.json → changes)."""
    def hosts(row: dict, kind: str) -> str:
        found = [f"**{text(h['host'])}**: {text(h['brief'])}" for h in row.get("hosts") or ()
                 if h["kind"] == kind and h.get("arm")]
        return "<br>".join(found) or "not measured"
    return table(["Step", "Reference hosts (one run each)", "Newest live run on an Arm server (95 % verdict)",
                  "What to change"],
                 [[f"[{text(r['title'])}](../{r['page']}/)", hosts(r, "reference"), hosts(r, "live"), r["change"]]
                  for r in rows])


def history_changes(kind: dict) -> str:
    """One host kind's change points (data/steps/history.json → kinds), as the site's table shows them."""
    if not kind["changes"]:
        return f"No change point between two runs of {text(kind['kind'])}."
    return table(["Configuration", "Figure", "Between", "Before · after", "Change"],
                 [[f"[{text(c['step_title'])}](../{c['page']}/): {text(c['variant_label'])}",
                   f"{text(c['figure'])} ({text(c['fixed'])})",
                   f"{text(c['what'])} ({code(c['before']['run_id'])} → {code(c['after']['run_id'])})",
                   f"{text(c['before']['value'])} · {text(c['after']['value'])}",
                   f"{text(c['change'])} ({text(c['pvalue'])})"] for c in kind["changes"]])


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
                lines.append(f"- **{text(h['who'])}**: {text(h['brief'])}.")
            else:
                lines.append(f"- **{text(h['who'])}**: " + "; ".join(text(line["text"]) for line in h["lines"]) + ".")
        lines.append("")
    lines.append(f"**When not to:** {a['avoid']}")
    return "\n".join(lines)



def verification(run: dict, name: str) -> str:
    """One run's verification block: its command, then its output (trimmed as on the site, with
    the labels of a state that differs from the measured one), or why it was skipped."""
    v = run["verification"][name]
    where = (f"{text(run.get('server'))} (run {code(run['run_id'])}"
             + (", an emulated server" if run.get("emulated") else "") + ")")
    head = f"**On the {text(v.get('host') or 'server')}:**\n\n{fence(v['command'], 'bash')}\n\n"
    if v.get("status") == "skipped":
        return head + f"Skipped on {where}, so there is no output: {text(v.get('reason') or 'no reason recorded')}.\n"
    if v.get("status") == "empty":
        return head + f"Ran on {where} and printed nothing.\n"
    if v.get("status") == "failed":
        return head + f"Failed on {where}; it printed:\n\n{fence(v['output'].rstrip(), 'output')}\n"
    notes = "".join(f"{text(c['text'])}\n\n" for c in v.get("conditions") or () if c.get("text"))
    shown = (v.get("excerpt") if v.get("trimmed") else None) or v["output"]
    cut = " (the lines that matter; the run record holds the whole output)" if v.get("trimmed") else ""
    return head + notes + f"The output on {where}{cut}:\n\n{fence(shown.rstrip(), 'output')}\n"


def cmdline_diff(run: dict, block: str) -> str:
    """What a reboot changed on the kernel command line, in the path's parameters only (the
    verification data's ``kernel_cmdline_before.after[block]``: model/cmdline)."""
    entry = ((run.get("kernel_cmdline_before") or {}).get("after") or {}).get(block) or {}
    added, removed = entry.get("added") or [], entry.get("removed") or []
    said = (f"After the reboot, `cat /proc/cmdline` on {text(run.get('server'))} (run {code(run['run_id'])}) showed "
            + (f"these parameters added: {code(' '.join(added))}" if added else "no parameter added"))
    return said + (f"; removed: {code(' '.join(removed))}." if removed else ".")
