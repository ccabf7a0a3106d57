"""tunepath: the pipeline behind the Tomcat-on-Neoverse learning path.

Data flows one way: a run's raw evidence (``runs/``) → parsed reports → frames → Hugo
data and charts → pages. The subpackages, from the bottom up (see docs/architecture.md):

- :mod:`tunepath.model`: typed records every layer shares (host context, blocks, variants);
- :mod:`tunepath.parse`: wrk/wrk2, ab and JMeter reports, units, merging several clients;
- :mod:`tunepath.evidence`: recorded runs, reading (store) and writing (recorder);
- :mod:`tunepath.analysis`: statistics, noise flags, sweeps, frames, run comparison;
- :mod:`tunepath.publish`: charts, formatting, Hugo data, notebooks, the execution cache, the build;
- :mod:`tunepath.live`: hosts, host state, facts, Tomcat, httpd, load generators, measuring;
- :mod:`tunepath.steps`: the learning path's steps, one module each, and their registry;
- :mod:`tunepath.pipeline` (what the notebooks call) and :mod:`tunepath.cli` on top.
"""

__version__ = "0.1.0"
