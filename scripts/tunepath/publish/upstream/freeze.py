"""Freeze a page of this site into plain Markdown for Arm's learning-paths repository: every
shortcode of ours becomes text, a table, a fenced code block or an image, read from the built
data (``data/``, ``static/charts/``) of one chosen run; ``notice``, which that repository also
defines, stays.

``SiteData.load(project)`` reads the build's output once; ``Freezer(data, run).page(body, step)``
returns the frozen body and the chart files it references. Every string of the data reaches the
page through ``escape.py``: a run's labels, hosts, notes, commands and outputs stay what they are.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

from tunepath.errors import TunepathError
from tunepath.publish.upstream import rules, tables
from tunepath.publish.upstream.escape import code, fence, text

__all__ = ["SiteData", "Freezer", "Frozen", "SHORTCODE"]

#: {{< name args >}} or {{% name args %}} (closing forms too)
SHORTCODE = re.compile(r"\{\{([<%])\s*(/?)\s*([A-Za-z][\w-]*)(.*?)\s*[>%]\}\}")
#: prose about the project's own lab runs ({{% lab %}}…{{% /lab %}}): the export shows Arm servers only
LAB = re.compile(r"[ \t]*\{\{%\s*lab\s*%\}\}.*?\{\{%\s*/lab\s*%\}\}[ \t]*", re.S)


@dataclass
class SiteData:
    root: Path
    order: list[dict]                 # data/path.json steps
    steps: dict[str, dict]            # data/steps/<step>.json
    summary: dict

    @classmethod
    def load(cls, project: Path) -> "SiteData":
        data = Path(project) / "data"
        path_json = data / "path.json"
        if not path_json.is_file() or not list((data / "steps").glob("*.json")):
            raise TunepathError(f"no built data in {data} (data/path.json and data/steps/*.json): "
                                "run `tunepath build` first, the export reads what it writes")
        try:
            steps = {p.stem: json.loads(p.read_text(encoding="utf-8")) for p in (data / "steps").glob("*.json")}
            summary_file = data / "summary.json"
            summary = json.loads(summary_file.read_text(encoding="utf-8")) if summary_file.is_file() else {}
            order = json.loads(path_json.read_text(encoding="utf-8"))["steps"]
        except (OSError, ValueError, KeyError) as e:
            raise TunepathError(f"the built data in {data} is unreadable ({e}): run `tunepath build` again") from e
        return cls(Path(project), order, steps, summary)

    def runs(self) -> set[str]:
        ids = {r["run_id"] for d in self.steps.values() for r in d.get("runs") or ()}
        return ids | {h["run_id"] for h in self.summary.get("hosts") or ()}


@dataclass
class Frozen:
    text: str
    images: dict[str, Path] = field(default_factory=dict)    # file name beside the page → source
    runs: list[dict] = field(default_factory=list)            # the runs whose figures it shows


def _args(raw: str) -> tuple[list[str], dict[str, str]]:
    pos, named = [], {}
    for token in shlex.split(raw):
        key, eq, value = token.partition("=")
        if eq and re.fullmatch(r"[A-Za-z_][\w-]*", key):
            named[key] = value
        else:
            pos.append(token)
    return pos, named


class NoArmRun(TunepathError):
    """A shortcode asked for figures, and no run of its step was on an Arm server."""


#: what a page says in place of figures that only x86 or emulated hosts recorded
NO_ARM_RUN = ("*No run on an Arm server has measured this step yet: rerun it on yours with the tunepath "
              "project's notebooks.*")


class Freezer:
    """Renders our shortcodes from the data of one run per step: ``run`` where the step has it,
    else the step's primary run; a shortcode's own ``run="…"`` wins."""

    def __init__(self, data: SiteData, run: str | None = None):
        if run is not None and run not in data.runs():
            raise TunepathError(f"--run {run}: no step of the built data has that run "
                                f"(have: {', '.join(sorted(data.runs()))})")
        self.data, self.chosen = data, run
        self.titles = {s["name"]: s["title"] for s in data.order}

    def step(self, name: str, where: str) -> dict:
        if name not in self.data.steps:
            raise TunepathError(f"{where}: no data/steps/{name}.json: run `tunepath build`")
        return self.data.steps[name]

    def run_of(self, step: str, where: str, run: str | None = None, has=None, any_host: bool = False) -> dict:
        """The run a shortcode reads: its own ``run=``; else the chosen run where it has what the
        shortcode asks for (``has(run)``), else the step's primary run. Only a run on an Arm server
        (the repository is Arm's): else :class:`NoArmRun`; ``any_host`` for a reader's commands,
        which are the path's on any host."""
        d = self.step(step, where)
        every = {r["run_id"]: r for r in d.get("runs") or ()}
        by_id = every if any_host else {i: r for i, r in every.items() if r.get("arm")}
        if not by_id and every:
            raise NoArmRun(f"{where}: no run on an Arm server")
        if not any_host and run is None and d.get("primary_run") not in by_id:
            run = next(iter(by_id))          # the step's first run on an Arm server
        if run and run in every and run not in by_id:
            raise NoArmRun(f"{where}: run {run} is not on an Arm server")
        wanted = [run] if run else [i for i in (self.chosen, d.get("primary_run")) if i in by_id]
        for i in wanted:
            if i in by_id and (has is None or has(by_id[i])):
                return by_id[i]
        if not wanted or wanted[-1] not in by_id:
            raise TunepathError(f"{where}: step {step!r} has no run {(run or d.get('primary_run'))!r} "
                                f"(have: {', '.join(by_id)})")
        return by_id[wanted[-1]]

    def page(self, body: str, step: str, where: str) -> Frozen:
        """``body`` in plain Markdown: each shortcode rendered from the data, the lab's prose left out,
        and where no Arm server has figures, one note saying so (the first place that has none)."""
        out = Frozen("")
        parts, pos, said = [], 0, False
        body = LAB.sub("", body)
        for m in SHORTCODE.finditer(body):
            parts.append(body[pos:m.start()])
            pos = m.end()
            name = m.group(3)
            if name in rules.SHORTCODES:
                parts.append(m.group(0))
                continue
            pos_args, named = _args(m.group(4))
            named.setdefault("step", step)
            try:
                parts.append(self.render(name, pos_args, named, out, f"{where}: {{{{< {name} >}}}}"))
            except NoArmRun:
                parts.append("" if said else NO_ARM_RUN)
                said = True
        parts.append(body[pos:])
        out.text = re.sub(r"\n{3,}", "\n\n", "".join(parts))
        return out

    def render(self, name: str, pos: list[str], a: dict[str, str], out: Frozen, where: str) -> str:
        simple = {"value": self._value, "commands": self._commands, "verification": self._verification,
                  "kernel-cmdline": self._cmdline, "notebook": self._notebook, "placement": self._placement,
                  "results": self._results, "charts": self._charts, "chart": self._charts,
                  "precision": self._precision, "latency-corrections": self._latency,
                  "sweep": self._sweep, "jvm-modes": self._modes, "facts-table": self._facts_table,
                  "historical": self._historical,
                  "summary": self._summary, "compare": self._compare, "variables": self._variables,
                  "sweep-commands": self._sweep_commands, "changes": self._changes,
                  "history": self._history, "history-method": self._history_method}
        if name not in simple:
            raise TunepathError(f"{where}: no plain-Markdown rendering for shortcode {name!r} "
                                "(add one in tunepath/publish/upstream/freeze.py)")
        return simple[name](a, out, where)

    def _used(self, out: Frozen, run: dict) -> dict:
        """Record a run the page shows (its full record, with server and date, where a step has it)."""
        if all(r["run_id"] != run["run_id"] for r in out.runs):
            full = next((r for d in self.data.steps.values() for r in d.get("runs") or ()
                         if r["run_id"] == run["run_id"]), run)
            out.runs.append(full)
        return run

    def _run(self, a: dict, out: Frozen, where: str, has=None) -> dict:
        return self._used(out, self.run_of(a["step"], where, a.get("run"), has))

    def _value(self, a, out, where) -> str:
        run = self._run(a, out, where, lambda r: _measurement(r, a.get("variant"), a.get("field")))
        m = next((m for m in run.get("measurements") or () if m["variant"] == a.get("variant")), None)
        if m is None or a.get("field") not in m.get("display", {}):
            raise TunepathError(f"{where}: run {run['run_id']} has no {a.get('variant')!r} "
                                f"figure {a.get('field')!r}")
        return text(m["display"][a["field"]] or "n/a")

    def _commands(self, a, out, where) -> str:
        run = self.run_of(a["step"], where, a.get("run"), lambda r: a.get("block") in (r.get("commands") or {}),
                          any_host=True)
        if run.get("arm"):          # a reader's command is the path's: it shows no other host's figure
            self._used(out, run)
        block = (run.get("commands") or {}).get(a.get("block"))
        if not block:
            raise TunepathError(f"{where}: run {run['run_id']} has no command block {a.get('block')!r}")
        head = (f"**On the {text(block.get('host') or 'server')}:**"
                + (f" {text(block['title'])}" if block.get("title") else ""))
        return f"{head}\n\n{fence(command_text(block), block.get('lang') or 'bash')}\n"

    def _verification(self, a, out, where) -> str:
        name = a.get("name")
        if a.get("runs") == "emulated":     # an emulated server's outputs: not an Arm server's
            raise NoArmRun(f"{where}: an emulated server's outputs")
        run = self._run(a, out, where, lambda r: name in (r.get("verification") or {}))
        if name in (run.get("verification") or {}):
            return tables.verification(run, name)
        cmd = (run.get("verification_commands") or {}).get(name)
        command = cmd.get("command") or cmd.get("text") if isinstance(cmd, dict) else cmd
        shown = f"{fence(command, 'bash')}\n\n" if command else ""
        return f"{shown}Run {code(run['run_id'])} recorded no output of this check."

    def _cmdline(self, a, out, where) -> str:
        """The chosen run's kernel command line after the block's reboot; else every run's that
        rebooted there (as the site shows them)."""
        block = a.get("block")
        rebooted = [r for r in self.step(a["step"], where).get("runs") or ()
                    if r.get("arm") and ((r.get("commands") or {}).get(block) or {}).get("kernel_cmdline")]
        chosen = [r for r in rebooted if r["run_id"] == (a.get("run") or self.chosen)]
        if not rebooted:
            return "No run of this step rebooted the server here, so none recorded the new kernel command line."
        return "\n\n".join(tables.cmdline_diff(self._used(out, r), block) for r in chosen or rebooted)

    def _sweep_commands(self, a, out, where) -> str:
        """The rate sweep's other load blocks (``load-rate-N`` after the one shown in full), rate by
        rate, as a reader types them: one line naming the rates, then one code block."""
        after = a.get("after")
        run = self._run(a, out, where, lambda r: after in (r.get("commands") or {}))
        rest = sorted(((int(i.removeprefix("load-rate-")), b) for i, b in (run.get("commands") or {}).items()
                       if i.startswith("load-rate-") and i != after and i.removeprefix("load-rate-").isdigit()),
                      key=lambda pair: pair[0])
        if not rest:
            return ""
        rates = ", ".join(f"{rate:,}" for rate, _ in rest)
        commands = "\n".join(command_text(b) for _, b in rest)
        return (f"The other rates run the same command with only `-R` changed: {rates} req/s, in that order.\n\n"
                f"{fence(commands, 'bash')}\n")

    def _variables(self, a, out, where) -> str:
        """The path's variables (data/steps/setup.json): a table, then the export lines per host."""
        rows = self.step("setup", where).get("variables") or []
        if not rows:
            raise TunepathError(f"{where}: data/steps/setup.json has no variables (rebuild with `tunepath build`)")
        table = ["| Variable | Set on | What it holds |", "| --- | --- | --- |"]
        table += ["| " + " | ".join(tables.cell(c) for c in (code(v["shell"]), text(v["hosts"]), text(v["meaning"])))
                  + " |" for v in rows]
        blocks = []
        for host in ("server", "client"):
            lines = [v["export"] for v in rows if host in v["hosts"]]
            if lines:
                blocks.append(f"**On the {host}** (example values: use your own):\n\n" + fence("\n".join(lines), "bash"))
        return "\n".join(table) + "\n\n" + "\n\n".join(blocks) + "\n"

    def _notebook(self, a, out, where) -> str:
        named = {s["name"]: s.get("notebook") for s in self.data.order}   # data/path.json: every step, the summary too
        if not named.get(a["step"]):
            raise TunepathError(f"{where}: step {a['step']!r} has no notebook in data/path.json: run `tunepath build`")
        nb = Path(named[a["step"]])
        return (f"The calculation behind these figures is the notebook {code('notebooks/' + nb.name)} of the "
                "tunepath project, which recomputes them from the recorded runs.")

    def _placement(self, a, out, where) -> str:
        run = self._run(a, out, where)
        return f"{text(run['placement']['text'])} {text(run['warmup_rule']['text'])}"

    def _results(self, a, out, where) -> str:
        run = self._run(a, out, where)
        return tables.results(run) + "\n\n" + tables.provenance(run)

    def _charts(self, a, out, where) -> str:
        d = self.step(a["step"], where)
        if a.get("id"):
            arm = {r["run_id"] for r in d.get("runs") or () if r.get("arm")}
            charts = [c for c in d.get("charts") or () if c["id"] == a["id"]]
            if charts and not {c.get("run_id") for c in charts} <= arm:
                raise NoArmRun(f"{where}: chart {a['id']} is not an Arm server's")
        else:
            run = self._run(a, out, where)
            charts = [c for c in d.get("charts") or () if c.get("run_id") == run["run_id"]]
        if not charts:
            raise TunepathError(f"{where}: step {a['step']!r} has no chart {a.get('id') or 'of the chosen run'}")
        return "\n\n".join(self.image(c, out, where) for c in charts)

    def image(self, chart: dict, out: Frozen, where: str) -> str:
        src = self.data.root / "static" / chart["src"]
        if not src.is_file():
            raise TunepathError(f"{where}: chart file {src} is missing: run `tunepath build`")
        out.images[src.name] = src
        caption = (chart.get("caption") or "").strip()
        # the caption under the image, not as its title: the repository's image audit reads an
        # image's target up to the first ")", and captions hold parentheses
        return f"![{alt_text(chart['alt'])}#center]({src.name})" + (f"\n\n*{text(caption)}*" if caption else "")

    def _precision(self, a, out, where) -> str:
        return tables.precision(self._run(a, out, where))

    def _latency(self, a, out, where) -> str:
        return tables.latency(self._run(a, out, where), a.get("variant"))

    def _sweep(self, a, out, where) -> str:
        return tables.sweep(self._run(a, out, where))

    def _modes(self, a, out, where) -> str:
        return tables.modes(self._run(a, out, where))

    def _facts_table(self, a, out, where) -> str:
        return tables.facts_table(self._run(a, out, where, lambda r: bool((r.get("analysis") or {}).get("facts_table"))))

    def _historical(self, a, out, where) -> str:
        return tables.historical(self.step(a["step"], where).get("historical") or [])

    def _summary(self, a, out, where) -> str:
        """Every host, each labelled with its run, as the site shows them."""
        every = self.data.summary.get("hosts") or []
        if not every:
            raise TunepathError(f"{where}: data/summary.json has no hosts: run `tunepath build`")
        hosts = [h for h in every if h.get("arm")]        # Arm's repository: Arm servers' figures only
        parts = []
        for host in hosts:
            self._used(out, host)
            charts = [self.image(c, out, where) for c in host.get("charts") or ()]
            parts.append("\n\n".join([tables.summary_host(host, self.titles)] + charts))
        return "\n\n".join(parts)

    def _changes(self, a, out, where) -> str:
        rows = self.data.summary.get("changes") or []
        if not rows:
            raise TunepathError(f"{where}: data/summary.json has no changes: run `tunepath build`")
        return tables.changes(rows)

    def _compare(self, a, out, where) -> str:
        pairs = [p for p in self.step("compare", where).get("pairs") or ()
                 if p["a"].get("arm") and p["b"].get("arm")]     # Arm's repository: Arm servers only
        if not pairs:
            raise NoArmRun(f"{where}: no two runs on Arm servers to compare")
        pair = next((p for p in pairs if p.get("default")), None)
        if pair is None:      # never two different machines in full: their ratio shows the machines
            return ("No two runs of the same host kind measured a configuration in common, so no pair is shown "
                    "in full. The pairs of recorded runs:\n\n" + "\n".join(
                        f"- {_pair(p)}" for p in pairs))
        for r in (pair["a"], pair["b"]):
            self._used(out, r)
        chart = self.image(pair["chart"], out, where) + "\n\n" if pair.get("chart") else ""
        others = [f"- {_pair(p)}: {text(p['common'])} measurement(s) in common, "
                  f"{text(p['facts_differ'])} fact(s) differ"
                  for p in pairs if p is not pair]
        rest = ("\n\nThe other pairs of recorded runs (shown in full on the tunepath site and by "
                "`tunepath compare RUN_A RUN_B`):\n\n" + "\n".join(others)) if others else ""
        return chart + tables.compare_pair(pair, self.titles) + rest


    def _history(self, a, out, where) -> str:
        """The change points of each Arm host kind (Arm's repository: Arm servers' figures only)."""
        kinds = [k for k in self.step("history", where).get("kinds") or () if k.get("arm")]
        if not kinds:
            raise NoArmRun(f"{where}: no two runs of one Arm host kind")
        parts = []
        for k in kinds:
            chart = [self.image(k["chart"], out, where)] if k.get("chart") else []
            parts.append("\n\n".join([f"### {text(k['kind'])}", tables.history_changes(k), *chart]))
        return "\n\n".join(parts)

    def _history_method(self, a, out, where) -> str:
        d = self.step("history", where)
        f, m = d["false_alarms"], d["method"]
        if not f["series"]:
            return "No series had enough runs to measure the false-alarm rate."
        return (f"Change points are kept at p < {text(m['max_pvalue'])}. With the values of each of the "
                f"{text(f['series'])} searched series shuffled {text(m['shuffles'])} times, {text(f['alarms'])} "
                f"still showed a change point: a false-alarm rate of {text(f['rate'])} per series.")


def _pair(p: dict) -> str:
    return (f"A {code(p['a']['run_id'])} ({text(p['a']['server'])}), "
            f"B {code(p['b']['run_id'])} ({text(p['b']['server'])})")


def _measurement(run: dict, variant: str | None, field: str | None) -> bool:
    return any(m["variant"] == variant and field in (m.get("display") or {})
               for m in run.get("measurements") or ())


def command_text(block: dict) -> str:
    """The command a reader types: a block's ``text`` is its reader's version (the path's
    variables); ``as_run`` is what the run executed."""
    return block["text"]


def alt_text(alt: str) -> str:
    """Alt text the repository's audit accepts (4 to 45 words): the chart's own, or its first
    sentence when the whole is longer; the figures are in the page's tables."""
    low, high = rules.ALT_WORDS
    alt = " ".join(alt.split())
    if len(re.findall(r"[A-Za-z0-9]+", alt)) > high:
        alt = re.split(r"(?<=[.;:])\s", alt, maxsplit=1)[0].rstrip(".;:") + "."
    # brackets would end the image's description, and the entities of angle brackets count as words
    return text(alt.translate(str.maketrans("[]<>", "()‹›")))
