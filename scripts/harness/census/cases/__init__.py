"""Every case of the census, by the command it tries (:func:`all_cases`).

- :mod:`~harness.census.cases.parse_numbers`: ``tunepath parse`` on reports with damaged numbers,
  figures that contradict each other, two reports in one file;
- :mod:`~harness.census.cases.parse_cuts`: reports cut at every line boundary and mid-number;
- :mod:`~harness.census.cases.parse_files`: big and odd inputs (16 MiB, FIFOs, binary, stdin closed);
- :mod:`~harness.census.cases.live`: ``tunepath run --check-options`` with hostile inventories and
  options, ``tunepath restore`` against a closed port;
- :mod:`~harness.census.cases.runs`: ``supersede``, ``compare`` and ``plan`` on damaged runs;
- :mod:`~harness.census.cases.site`: ``export``, ``notebooks``, ``build`` and ``lab status``.

:mod:`~harness.census.cases.inputs` holds what their set-ups share.
"""

from __future__ import annotations

from harness.census.case import Case

__all__ = ["all_cases"]


def all_cases() -> list[Case]:
    """Every case, in the order of the table's groups; names are unique."""
    from harness.census.cases import live, parse_cuts, parse_files, parse_numbers, runs, site

    found = [*parse_numbers.cases(), *parse_cuts.cases(), *parse_files.cases(), *live.cases(), *runs.cases(),
             *site.cases()]
    seen: set[str] = set()
    twice = [c.name for c in found if c.name in seen or seen.add(c.name)]
    if twice:
        raise ValueError(f"cases named twice: {', '.join(twice)}")
    return found
