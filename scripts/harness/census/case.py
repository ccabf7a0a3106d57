"""The census's records: one hostile case, what running it gave, and the class it falls in.

A :class:`Case` says what to run (``tunepath`` and its arguments, stdin), how to build its hostile
input in a fresh temporary directory (``setup``), what a correct ``tunepath`` does with it
(``expect``) and where a failure may write nothing (``watch``). An :class:`Outcome` is what
running it gave; :func:`harness.census.classify.classify` turns the two into a :class:`Verdict`.
Pure: nothing here runs a command.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

__all__ = ["REFUSE", "ACCEPT", "FLAG", "EXPECTATIONS", "CLOSED", "JSON", "WORDS",
           "OK", "TRACEBACK", "HANG", "WRITE", "SILENT", "WRONG_REFUSAL", "CLASSES", "TMP",
           "Case", "Outcome", "Verdict"]

# what a correct tunepath does with the input
REFUSE = "refuse"      # exit status other than 0, and one line on stderr
ACCEPT = "accept"      # exit status 0 (or one of the case's ``accepted`` statuses)
FLAG = "flag"          # the input is damaged: a one-line refusal, or exit 0 with output that shows the damage
EXPECTATIONS = (REFUSE, ACCEPT, FLAG)

# stdin other than bytes (None is /dev/null)
CLOSED = "closed"          # file descriptor 0 closed, as `<&-` does

# how a FLAG case's output shows the damage
JSON = "json"          # `tunepath parse`'s JSON: requests_per_sec_trusted false, or a problem listed
WORDS = "words"        # a table for people (`tunepath compare`): a ⚑ or a word such as "derived"

# the classes, in the order of the table's columns
OK = "ok"
TRACEBACK = "traceback"            # a Python traceback, a failure without its one line, a status no exit gives
HANG = "hang"                      # still running at the timeout (its process group was killed)
WRITE = "write on failure"         # a failure that created, changed or removed a watched file
SILENT = "silently wrong"          # exit 0 where the input must be refused, or damage that does not show
WRONG_REFUSAL = "wrongly refused"  # a valid input refused
CLASSES = (OK, TRACEBACK, HANG, WRITE, SILENT, WRONG_REFUSAL)

TMP = "{tmp}"          # in a case's argv: its temporary directory


@dataclass(frozen=True)
class Case:
    """One hostile input for one ``tunepath`` command."""

    name: str                                   # group/…, unique; ``--only`` globs match it
    group: str                                  # a row of the table: parse, run, supersede, …
    argv: tuple[str, ...]                       # after `tunepath`; {tmp} is the case's directory
    expect: str                                 # REFUSE, ACCEPT or FLAG
    setup: Callable[[Path], object] | None = None    # builds the input in the directory; what it
                                                     # returns is kept alive while the command runs
    stdin: bytes | str | None = None            # bytes, CLOSED, or None for /dev/null
    watch: tuple[str, ...] = ()                 # directories (relative to {tmp}) a failure must not touch
    project: tuple[str, ...] | None = None      # a copy of the project at {tmp}/project, with these runs
    reference: Path | None = None               # the intact report a damaged one is compared with
    shows: str = JSON                           # how a FLAG case's output shows the damage
    warned: str = ""                            # FLAG: a warning holding these words shows it too
    check: Callable[[Path, str], str | None] | None = None   # after the command, given the directory and
                                                              # stdout: what it left wrong, or None
    accepted: frozenset[int] = frozenset({0})   # ACCEPT: the exit statuses that are success
    note: str = ""                              # what the input is, for --list

    def __post_init__(self) -> None:
        if self.expect not in EXPECTATIONS:
            raise ValueError(f"{self.name}: expect must be one of {EXPECTATIONS}, not {self.expect!r}")
        if not self.name.startswith(self.group + "/"):
            raise ValueError(f"{self.name}: a case's name starts with its group ({self.group}/)")

    def command(self, tmp: Path) -> list[str]:
        """The arguments after ``tunepath``, with {tmp} replaced by the case's directory."""
        return [a.replace(TMP, str(tmp)) for a in self.argv]


@dataclass
class Outcome:
    """What running a case gave."""

    status: int | None                  # the exit status (negative: a signal); None when it hung
    stdout: str = ""
    stderr: str = ""
    wall_s: float = 0.0
    timed_out: bool = False
    writes: list[str] = field(default_factory=list)       # watched paths created, changed or removed
    left: str | None = None             # the case's check: what the command left wrong
    reference: dict | None = None       # `tunepath parse` of the intact report, for FLAG and ACCEPT cases


@dataclass(frozen=True)
class Verdict:
    """The class of one case's outcome, and why, in a few words."""

    cls: str
    reason: str
