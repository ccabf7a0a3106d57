"""tunepath: the pipeline behind the Tomcat-on-Neoverse learning path.

Data flows one way: a run's raw evidence (``runs/``) → parsed frames → Hugo data
and charts → pages. Modules: :mod:`~tunepath.parse.units` and :mod:`~tunepath.parse.wrk`
(wrk/wrk2 output), :mod:`~tunepath.evidence.store` (recorded runs),
:mod:`~tunepath.steps.legacy` (what each step changes and the exact commands),
:mod:`~tunepath.analysis.frames` (frames), :mod:`~tunepath.publish.charts`,
:mod:`~tunepath.publish.hugo_data` (Hugo data), :mod:`~tunepath.publish.build` (notebooks + Hugo),
:mod:`~tunepath.cli`.
"""

__version__ = "0.1.0"
