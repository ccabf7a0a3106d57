"""The class of a case's outcome: :func:`classify` (pure: a :class:`~harness.census.case.Case` and
its :class:`~harness.census.case.Outcome` in, a :class:`~harness.census.case.Verdict` out).

In this order:

1. **hang**: the command was still running at the timeout;
2. **traceback**: a Python traceback on stdout or stderr, or an exit status no ``tunepath`` exit
   gives (anything but 0, 1, 2 and 130; a negative status is a signal);
3. a failure (an exit status other than 0, or than the case's ``accepted`` ones): **write on
   failure** when a watched file was created, changed or removed (or the case's check found
   what the command left); **traceback** when stderr holds several lines (warnings ``tunepath:
   warning: …`` aside): a crash in several lines; **silently wrong** when it holds none: a
   failure without a word; **wrongly refused** when the input was valid (``accept``); else **ok**;
4. a success: **silently wrong** when the input must be refused, when the case's check found
   something wrong (a user's file removed), when a damaged input's output does not show the
   damage, or when a valid input's figures differ from the intact report's; else **ok**.

The damage shows in ``tunepath parse``'s JSON as ``requests_per_sec_trusted: false`` or a
problem listed (but a request count, duration or rate that differs from the intact report's
always needs the rate untrusted), or as the warning a case names (``warned``: a report cut where
a whole report of another mode of the tool ends, which no parser can tell from a cut one); a
damaged report whose figures all equal the intact report's is ok too (the damage reached no
figure). In a table for people it shows as a ⚑, a word (:data:`FLAG_WORDS`) or ``"trusted": false``.
"""

from __future__ import annotations

import json
import re

from harness.census.case import (ACCEPT, FLAG, HANG, OK, REFUSE, SILENT, TRACEBACK, WORDS, WRITE, WRONG_REFUSAL,
                                 Case, Outcome, Verdict)

__all__ = ["EXIT_STATUSES", "FIGURES", "RATE", "FLAG_WORDS", "classify", "error_lines", "figures_differ",
           "shows_damage"]

EXIT_STATUSES = frozenset({0, 1, 2, 130})      # success, a status (lab status), an expected failure, Ctrl-C
TRACEBACK_MARK = "Traceback (most recent call last)"
# what a report's pages show: one that differs from the intact report's needs a problem
FIGURES = ("tool", "threads", "connections", "requests", "duration_s", "requests_per_sec", "socket_errors",
           "non_2xx_3xx", "transfer_per_sec_bytes", "bytes_read", "latency_ms", "percentiles_ms", "histogram",
           "uncorrected_histogram")
RATE = ("requests", "duration_s", "requests_per_sec")      # a changed one: the rate is not to be trusted
FLAG_WORDS = ("⚑", "derived", "damaged", "untrusted", "not trusted", "problem", "problems")
WARNING = "tunepath: warning:"


def _short(text: str, limit: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit - 1] + "…"


def error_lines(stderr: str) -> list[str]:
    """The lines of stderr that are not blank and not ``tunepath: warning: …``."""
    return [ln for ln in stderr.splitlines() if ln.strip() and not ln.startswith(WARNING)]


def _crash(out: Outcome) -> str | None:
    """Why the outcome is a crash (a traceback or an odd exit status), or None."""
    for name, text in (("stderr", out.stderr), ("stdout", out.stdout)):
        if TRACEBACK_MARK in text:
            last = [ln for ln in text.splitlines() if ln.strip()][-1]
            return f"a Python traceback on {name}: {_short(last)}"
    if out.status is not None and out.status < 0:
        return f"killed by signal {-out.status}"
    if out.status not in EXIT_STATUSES:
        return f"exit status {out.status}, which no tunepath exit gives"
    return None


def figures_differ(data: dict, reference: dict) -> list[str]:
    """The figures (:data:`FIGURES`) of a parse that differ from the intact report's."""
    return [k for k in FIGURES if data.get(k) != reference.get(k)]


def shows_damage(case: Case, stdout: str) -> str | None:
    """How a successful command's output shows the damage (a few words), or None when it does not."""
    if case.shows == WORDS:
        for word in FLAG_WORDS:
            if re.search(rf"(?<!\w){re.escape(word)}(?!\w)", stdout, re.IGNORECASE):
                return f"flagged ({word!r} in the output)"
        return "flagged (trusted: false)" if re.search(r'trusted"\s*:\s*false', stdout) else None
    try:
        data = json.loads(stdout)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    codes = [f"{p.get('code')} {p.get('field')}" for p in data.get("problems") or [] if isinstance(p, dict)]
    if codes:
        return "flagged: " + ", ".join(codes[:4]) + (" …" if len(codes) > 4 else "")
    if data.get("requests_per_sec_trusted") is False:
        return "flagged: requests_per_sec_trusted is false"
    warned = [w for w in data.get("warnings") or [] if case.warned and case.warned in str(w)]
    if warned:
        return f"warned: {_short(warned[0], 100)}"
    return None


def _failed(case: Case, out: Outcome) -> Verdict:
    if out.writes:
        more = f" (and {len(out.writes) - 3} more)" if len(out.writes) > 3 else ""
        return Verdict(WRITE, f"exit {out.status}, yet it touched {', '.join(out.writes[:3])}{more}")
    if out.left:
        return Verdict(WRITE, f"exit {out.status}, yet {out.left}")
    lines = error_lines(out.stderr)
    if not lines:
        said = out.stdout.strip().splitlines()[-1:] or ["nothing"]
        return Verdict(SILENT, f"exit {out.status} without a word on stderr (stdout ends {_short(said[0], 100)!r})")
    if len(lines) > 1:
        return Verdict(TRACEBACK, f"exit {out.status} with {len(lines)} lines on stderr, not one: {_short(lines[0])}")
    if case.expect == ACCEPT:
        return Verdict(WRONG_REFUSAL, f"exit {out.status}: {_short(lines[0])}")
    return Verdict(OK, f"refused: {_short(lines[0])}")


def _rate_still_trusted(out: Outcome) -> str | None:
    """When a figure of the rate (:data:`RATE`) differs from the intact report's, the rate must not
    be trusted, whatever else is flagged: what is wrong, or None."""
    try:
        data = json.loads(out.stdout)
    except ValueError:
        return None
    if out.reference is None or not isinstance(data, dict) or data.get("requests_per_sec_trusted") is not True:
        return None
    changed = [k for k in RATE if data.get(k) != out.reference.get(k)]
    return (f"{', '.join(changed)} differ from the intact report's, yet requests_per_sec_trusted is true"
            if changed else None)


def _damage_hidden(case: Case, out: Outcome) -> Verdict:
    """A FLAG case that exited 0: ok when the output shows the damage, or when no figure differs
    from the intact report's."""
    shown = shows_damage(case, out.stdout)
    rate = _rate_still_trusted(out)
    if rate:
        return Verdict(SILENT, f"{rate} ({shown})" if shown else rate)
    if shown:
        return Verdict(OK, shown)
    if case.shows == WORDS:
        return Verdict(SILENT, "exit 0, and the output shows no ⚑ or word for the damaged figure")
    try:
        data = json.loads(out.stdout)
    except ValueError:
        return Verdict(SILENT, f"exit 0, and stdout is not JSON: {_short(out.stdout, 80)!r}")
    if out.reference is not None and isinstance(data, dict):
        differ = figures_differ(data, out.reference)
        if not differ:
            return Verdict(OK, "the damage reached no figure (all equal the intact report's)")
        new = [w for w in data.get("warnings") or [] if w not in (out.reference.get("warnings") or [])]
        said = f"; only a warning: {_short(new[0], 100)}" if new else ""
        return Verdict(SILENT, f"exit 0, trusted, no problem, yet {', '.join(differ)} differ from the intact "
                               f"report's{said}")
    return Verdict(SILENT, "exit 0, trusted, and no problem listed for a report that cannot be right")


def _said(case: Case, stdout: str) -> str:
    """What a command that should have refused its input printed instead, in a few words."""
    shown = shows_damage(case, stdout)
    if shown:
        return f"it only {shown}"
    try:
        data = json.loads(stdout)
    except ValueError:
        data = None
    if isinstance(data, dict) and "tool" in data:
        return f"it read one {data['tool']} report of {data.get('requests')} requests, trusted, with no problem"
    first = stdout.strip().splitlines()[:1]
    return f"it printed {_short(first[0], 100)!r}" if first else "it printed nothing"


def _succeeded(case: Case, out: Outcome) -> Verdict:
    if out.left:
        return Verdict(SILENT, f"exit {out.status}, yet {out.left}")
    if case.expect == REFUSE:
        return Verdict(SILENT, f"exit {out.status}; the input must be refused, yet {_said(case, out.stdout)}")
    if case.expect == FLAG:
        return _damage_hidden(case, out)
    if out.reference is not None:
        try:
            differ = figures_differ(json.loads(out.stdout), out.reference)
        except (ValueError, AttributeError):
            return Verdict(SILENT, f"exit 0, and stdout is not a JSON object: {_short(out.stdout, 80)!r}")
        if differ:
            return Verdict(SILENT, f"{', '.join(differ)} differ from the intact report's")
        return Verdict(OK, "accepted, figures equal to the intact report's")
    return Verdict(OK, "accepted" if out.status == 0 else f"exit {out.status}, a status it may give")


def classify(case: Case, out: Outcome) -> Verdict:
    """The class of ``out``, what running ``case`` gave (see the module's docstring for the order)."""
    if out.timed_out:
        return Verdict(HANG, f"no exit after {out.wall_s:.0f} s; its process group was killed")
    crash = _crash(out)
    if crash:
        return Verdict(TRACEBACK, crash)
    success = out.status == 0 or (case.expect == ACCEPT and out.status in case.accepted)
    return _succeeded(case, out) if success else _failed(case, out)

