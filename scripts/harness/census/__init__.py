"""The hostile-input census of the ``tunepath`` command: ``python -m harness.census`` (``scripts/census``).

Every command a user types is tried with hostile input, as a user would try it: ``python -m
tunepath.cli …`` in a subprocess, in a fresh temporary directory of its own, with its own HOME and,
where the command needs one, a copy of the project's pieces and of a few small runs. Each case
(:class:`harness.census.case.Case`) names its command, its input, what a correct ``tunepath`` does
with it (refuse it in one line, accept it, or flag the damage) and the directories a failure must
not touch. Each outcome falls in one class (:mod:`harness.census.classify`): **ok**,
**traceback**, **hang**, **write on failure**, **silently wrong** or **wrongly refused**. The goal
(issue 30, item 6): none but ok.

The modules: :mod:`~harness.census.cli` (options, the run, the exit status),
:mod:`~harness.census.cases` (the cases, by command), :mod:`~harness.census.runner` (one case in
its directory, the timeout, the pool), :mod:`~harness.census.sandbox` (the directory, the
project's copy, the environment, the commands it never runs), :mod:`~harness.census.snapshot`
(what a command wrote; the checkout's trees, unchanged), :mod:`~harness.census.classify` (the
class), :mod:`~harness.census.report` (the table and the JSON results). docs/census.md says how
to read them.
"""
