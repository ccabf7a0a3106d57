"""Step: compare two recorded runs — ratios per step, and the host facts that differ."""

from __future__ import annotations

from tunepath.analysis.compare import compare_document, default_pair, step_rows
from tunepath.steps.base import Step

__all__ = ["STEP"]


class Compare(Step):
    name = "compare"
    title = "Compare two runs"
    kind = "analysis"
    why = ("Puts any two recorded runs side by side: for each step, the measurements both made, the ratio of "
           "their throughput (with an interval where both repeated the measurement) and the host facts and load "
           "settings that differ. Different machines and settings mean a ratio says how far apart two results "
           "are, not why. Every pair of runs is written; the page opens on the two most comparable: the newest two "
           "runs of the same host kind (the same CPU model and CPU count), else the newest two live runs, else the "
           "two servers nearest in CPU count, always two that measured something in common.")
    notebook_cells = (
        ("markdown", "## The default pair\n\nFor each step, the measurements both runs made and the ratio of "
                     "their throughput; then the host facts and load settings that differ."),
        ("code", "pipeline.analysis(result)"),
    )

    def pairs(self, result, charts: dict | None = None, notebook: dict | None = None) -> dict:
        return compare_document(result.runs, result.all_rows, result.registry, self, charts, notebook)

    def readings(self, result) -> dict:
        """The default pair, once (not per run): its ratios per measurement, the facts that differ."""
        found = self.default_pair_tables(result)
        return {found["pair"]: found} if found else {}

    def default_pair_tables(self, result):
        """The default pair as two tables: the ratios per measurement, the facts that differ."""
        import pandas as pd

        doc = self.pairs(result)
        if not doc["pairs"]:
            return None
        first = next((p for p in doc["pairs"] if p["default"]), None)
        if first is None:
            return None
        ratios = pd.DataFrame([dict(step=s["step"], variant=r["variant"], a=r["a_requests_per_sec"],
                                    b=r["b_requests_per_sec"], ratio=r["ratio"], low=r["low"], high=r["high"],
                                    significant=r["significant"])
                               for s in first["steps"] for r in s["rows"]])
        return {"pair": first["id"], "ratios": ratios,
                "facts_differ": pd.DataFrame([f for f in first["facts"] if f["differs"]])}

    def charts(self, result, static) -> list:
        from tunepath.publish.charts import ratio_chart

        pair = default_pair(result.runs, result.all_rows)
        if not pair:
            return []
        a, b = pair
        rows = [dict(r, label=f"{s.title.split(':')[0]}: {r['label']}", run_id=f"{a.run_id}--{b.run_id}")
                for s in result.registry for r in step_rows(a, b, result.all_rows, s.name)]
        if not rows:
            return []
        return [ratio_chart(
            rows, static, f"compare-{a.run_id}--{b.run_id}",
            f"{b.run_id} ÷ {a.run_id}", f"Dot chart of the ratio of requests per second, run {b.run_id} over "
            f"run {a.run_id}, per measurement both made",
            f"Requests per second of {b.run_id} ({b.server.name}) divided by those of {a.run_id} "
            f"({a.server.name}), for each measurement both runs made. The table of host facts and load settings "
            "marks where the two runs differ: the ratio says how far apart the results are, not why.")]

    def document(self, result, charts: list[dict], notebook: dict, historical_dir) -> dict:
        return self.pairs(result, {c["run_id"]: c for c in charts}, notebook)


STEP = Compare()
