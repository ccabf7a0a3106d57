"""Text bound for a terminal.

Recorded strings (a server name, a host fact, a run field quoted in an error) come from files anyone
may have edited. Printed raw, ``\\x1b]0;…\\x07`` retitles the window and ``\\x1b[2J`` clears it; a
carriage return hides what came before it on the line. :func:`safe` shows every such character as a
visible ``\\xNN`` escape instead: the C0 controls (a tab and, unless told, a newline are kept), DEL
and the C1 controls (U+0080 to U+009F, which some terminals obey like an ESC sequence).

:func:`one_line_cut` keeps a message readable: an error quoting a 15 KB detail is cut in its middle.
"""

from __future__ import annotations

import re

__all__ = ["safe", "one_line_cut"]

_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")          # a tab and a newline are kept
_CONTROLS_AND_NEWLINE = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f]")


def _escape(match: re.Match) -> str:
    return f"\\x{ord(match.group()):02x}"


def safe(text, newlines: bool = True) -> str:
    """``text`` with its control characters shown as ``\\xNN`` (newlines kept when ``newlines``)."""
    return (_CONTROLS if newlines else _CONTROLS_AND_NEWLINE).sub(_escape, str(text))


def one_line_cut(text: str, head: int = 300, tail: int = 200) -> str:
    """Each line of ``text`` at most about ``head + tail`` characters: a longer one keeps its start and
    its end (where a message says what to do) and says how much was left out."""
    def cut(line: str) -> str:
        if len(line) <= head + tail + 40:
            return line
        return f"{line[:head]} … [{len(line) - head - tail:,} characters left out] … {line[-tail:]}"

    return "\n".join(cut(line) for line in str(text).split("\n"))
