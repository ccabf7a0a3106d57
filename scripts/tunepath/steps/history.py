"""Step: the history — each configuration's figures across runs of one host kind, by Tomcat and Java
release and date, with change points (Apache Otava)."""

from __future__ import annotations

from tunepath.steps.base import Step

__all__ = ["STEP"]

SMOKE_TESTS = frozenset({"setup"})     # its one measurement checks that Tomcat answers
CHARTED = ("baseline", "stock")        # each host kind's chart: the path's first configuration


class History(Step):
    name = "history"
    title = "History across versions and runs"
    kind = "analysis"
    why = ("Follows each configuration's key figures (server CPU per request, p99 latency, and requests/s where "
           "the load was closed loop) across the recorded runs of one host kind, in the order of their Tomcat "
           "and Java releases, then their dates, and marks the change points Apache Otava's E-divisive method "
           "finds between two runs. Host kinds are never mixed; emulated servers are left out.")
    notebook_cells = (
        ("markdown", "## Change points\n\nEvery change point found between two runs, per host kind; then how "
                     "often the same detection finds one in the same values shuffled (its false alarms)."),
        ("code", "pipeline.analysis(result)"),
    )

    def found(self, result):
        from tunepath.analysis.history import history

        if result.findings is None:
            result.findings = history(result.runs, result.all_rows, skip_steps=SMOKE_TESTS)
        return result.findings

    def readings(self, result) -> dict:
        import pandas as pd

        h = self.found(result)
        changes = pd.DataFrame([dict(kind=s.kind, step=s.step, variant=s.variant, figure=s.figure.label,
                                     versions=c.what(s.axis), change_pct=round(c.change_pct, 1), pvalue=c.pvalue)
                                for s, c in h.changes])
        fa = h.false_alarms
        return {"history": {"changes": changes, "false_alarms": pd.DataFrame([dict(
            series=fa.series, shuffles=fa.shuffles, alarms=fa.alarms, rate=fa.rate)])}}

    def charts(self, result, static) -> list:
        from tunepath.publish.historychart import history_chart
        from tunepath.publish.historydoc import charted

        out = []
        for i, (kind, s) in enumerate(charted(self.found(result), CHARTED).items(), 1):
            step = result.registry.get(s.step)
            title = f"{s.figure.label[0].upper()}{s.figure.label[1:]}, {step.title.split(':')[0]}: {s.variant} — {kind}, {s.fixed}"
            out.append(history_chart(s, title, static, f"history-{i}"))
        return out

    def document(self, result, charts: list[dict], notebook: dict, historical_dir) -> dict:
        from tunepath.publish.historydoc import charted, history_document

        h = self.found(result)
        by_kind = dict(zip(charted(h, CHARTED), charts))
        return history_document(h, self, result.registry, result.runs, by_kind, notebook, grid=CHARTED)


STEP = History()
