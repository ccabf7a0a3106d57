"""tunepath: the pipeline behind the Tomcat-on-Neoverse learning path.

Data flows one way: a run's raw evidence (``runs/``) → parsed frames → Hugo data
and charts → pages. Modules: :mod:`~tunepath.units` and :mod:`~tunepath.parser`
(wrk/wrk2 output), :mod:`~tunepath.runstore` (recorded runs),
:mod:`~tunepath.steps` (what each step changes and the exact commands),
:mod:`~tunepath.results` (frames), :mod:`~tunepath.charts`,
:mod:`~tunepath.export` (Hugo data), :mod:`~tunepath.build` (notebooks + Hugo),
:mod:`~tunepath.cli`.
"""

__version__ = "0.1.0"
