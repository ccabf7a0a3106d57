"""Step: the summary — every run's tuning sequence and comparisons, per host."""

from __future__ import annotations

from tunepath.steps.base import Step

__all__ = ["STEP"]


class Summary(Step):
    name = "summary"
    title = "Summary"
    kind = "analysis"
    why = ("Collects each run's tuning sequence (stock → access log off → threads → NIC queues → NUMA → IOMMU), "
           "computes the speed-up over that run's own stock baseline and writes `data/summary.json`. Each host "
           "gets its own table and charts.")

    @property
    def data_file(self) -> str:
        return "data/summary.json"

    def history(self, result, run) -> list[dict]:
        rows = result.all_rows[result.all_rows.run_id == run.run_id]
        return rows[rows.order >= 0].sort_values("order").to_dict("records")

    def charts(self, result, static) -> list:
        from tunepath.publish import charts as chartlib

        out = []
        for run in result.charted_runs:
            rows = self.history(result, run)
            if not rows or run.info.matrix is not None:      # a matrix's runs: the history page's
                continue
            highlight = {f"{r['step']}/{r['variant']}" for r in rows}
            out.append(chartlib.headline_chart(rows, highlight, static, "summary", run.run_id))
            out.append(chartlib.latency_chart(rows, highlight, static, f"summary-latency-{run.run_id}", run.run_id))
        return out

    def document(self, result, charts: list[dict], notebook: dict, historical_dir) -> dict:
        from tunepath.publish.hugo_data import summary_document

        by_run: dict[str, list[dict]] = {}
        for c in charts:
            by_run.setdefault(c["run_id"], []).append(c)
        return summary_document(result.runs, result.all_rows, by_run, notebook, result.registry,
                                history_page=result.registry.get("history").page)


STEP = Summary()
