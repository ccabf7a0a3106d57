"""tunepath: the pipeline behind the Tomcat-on-Neoverse learning path.

Data flows one way: a run's raw evidence (``runs/``) → parsed reports → frames → Hugo
data and charts → pages. The subpackages, from the bottom up (see docs/architecture.md):

- :mod:`tunepath.model`: typed records every layer shares (host context, blocks, variants);
- :mod:`tunepath.parse`: wrk/wrk2, ab, siege and JMeter reports, units, merging several clients;
- :mod:`tunepath.evidence`: recorded runs, reading (store) and writing (recorder);
- :mod:`tunepath.analysis`: statistics, noise flags, sweeps, frames, run comparison;
- :mod:`tunepath.publish`: charts, formatting, Hugo data, notebooks, the execution cache, the build;
- :mod:`tunepath.live`: hosts, host state, facts, Tomcat, httpd, load generators, measuring;
- :mod:`tunepath.lab`: a server and two clients as network namespaces (and a VM server), beside live;
- :mod:`tunepath.steps`: the learning path's steps, one module each, and their registry;
- the orchestrators on top, the only modules besides the steps that import the registry:
  :mod:`tunepath.pipeline` (what the notebooks call), :mod:`tunepath.cli` (the ``tunepath``
  command), :mod:`tunepath.publish.build` (the replay build) and :mod:`tunepath.live.runner`
  (``tunepath run``).

The base modules: ``errors`` (:class:`~tunepath.errors.TunepathError`), ``versions`` (pins),
``settings`` (a live run's settings, listed once), ``project`` (where the project is) and
``memo`` (what the kernels of one build share). The pipeline's benchmarks and the fault
injection harness live outside the package, in ``scripts/harness/``.
"""

__version__ = "0.1.0"
