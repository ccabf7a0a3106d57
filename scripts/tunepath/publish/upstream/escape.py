"""Escaping for the upstream export: every string a run recorded (labels, host names, notes,
commands, outputs, alt text) is written into Markdown only through one of these, so that none of
it can become HTML, Markdown structure or a Hugo shortcode (issue 30, finding 6).

- :func:`text`: running text or a table cell: one line; ``&``, ``<`` and ``>`` as HTML entities;
  Markdown's punctuation (emphasis, code, links, table pipes, a leading heading, list or quote
  marker) backslash-escaped.
- :func:`code`: an inline code span, delimited by more backticks than any run inside it.
- :func:`fence`: a fenced code block, its fence longer than any backtick run inside it.
- :func:`comment`: the inside of an HTML comment.
- :func:`cell`: a table cell built from the above and our own markup: one line, its pipes escaped.

Hugo reads ``{{<`` and ``{{%`` as shortcodes anywhere in a page, code blocks included, and
``<!--more-->`` as the summary divider: every one of these functions breaks them with a zero-width
space (invisible when shown, and no longer a delimiter).
"""

from __future__ import annotations

import html
import re

__all__ = ["text", "code", "fence", "comment", "cell", "inert", "ZERO_WIDTH"]

ZERO_WIDTH = "\u200b"
_HUGO = re.compile(r"\{\{(?=[<%])|<!--(?=\s*more\s*-->)", re.I)
#: Markdown's inline punctuation; "_" only where it may open or close emphasis (not inside a word)
_PUNCTUATION = re.compile(r"[\\`*\[\]|~]|(?<![^\W_])_|_(?![^\W_])")
#: what would start a heading, a list item or a thematic break at the start of a line
_MARKER = re.compile(r"(?:#{1,6}|[-+=]+|\d{1,9}[.)])(?=\s|$)")
_TICKS = re.compile(r"`+")
_LANG = re.compile(r"[\w+.-]{1,30}")


def inert(value) -> str:
    """``value`` with every Hugo shortcode delimiter (and summary divider) broken."""
    return _HUGO.sub(lambda m: m.group(0) + ZERO_WIDTH, str(value))


def _line(value) -> str:
    return " ".join(str("" if value is None else value).split())


def text(value) -> str:
    """A run's string as running text or in a table cell: shown as written, structure-free."""
    out = _PUNCTUATION.sub(lambda m: "\\" + m.group(0), html.escape(_line(value), quote=False))
    marker = _MARKER.match(out)
    if marker:          # escaped where it opens a line (a list item's text, a paragraph)
        at = marker.end() - 1 if out[0].isdigit() else 0
        out = f"{out[:at]}\\{out[at:]}"
    return inert(out)


def _longest_ticks(value: str) -> int:
    return max((len(m) for m in _TICKS.findall(value)), default=0)


def code(value) -> str:
    """An inline code span holding ``value`` (on one line) exactly."""
    body = inert(_line(value))
    ticks = "`" * (_longest_ticks(body) + 1)
    pad = " " if body.startswith("`") or body.endswith("`") else ""
    return f"{ticks}{pad}{body}{pad}{ticks}"


def fence(value, lang: str | None = None) -> str:
    """A fenced code block holding ``value``: no line of it can close the fence; ``lang`` only
    when it is a language name."""
    body = inert(str("" if value is None else value).rstrip("\n"))
    ticks = "`" * max(3, _longest_ticks(body) + 1)
    info = lang if lang and _LANG.fullmatch(lang) else ""
    return f"{ticks}{info}\n{body}\n{ticks}"


def comment(value) -> str:
    """Text for the inside of an HTML comment: one line, no ``--`` (which may not appear in one,
    and whose ``-->`` would end it), no markup."""
    out = html.escape(_line(value), quote=False)
    while "--" in out:
        out = out.replace("--", "- -")
    return inert(out)


def cell(value) -> str:
    """A table cell: one line, every pipe not yet escaped escaped (its pieces already escaped
    by :func:`text` or :func:`code`)."""
    return re.sub(r"(?<!\\)\|", r"\\|", _line(value))
