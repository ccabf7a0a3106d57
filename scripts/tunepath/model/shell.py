"""Building shell commands: every value that enters a command goes through :func:`quote`.

Commands are run on the hosts with bash and printed on the pages for readers to copy, so
one helper must serve both. :func:`quote` is :func:`shlex.quote` with two exceptions a
reader needs:

- a leading ``~/`` stays unquoted, so the shell expands it (``~/'my tomcat'``);
- the path's own variables (:data:`PLACEHOLDERS`: ``${tomcat_ip}``, ``${net}``,
  ``$JAVA_HOME`` …) stay unquoted, so a reader's shell expands them. Only these names:
  an unknown ``${IFS}`` in a value is quoted like any other text, because an unquoted
  expansion is split into words.

An ordinary value (letters, digits and ``@%+=:,./-``) renders as itself, so the commands
of the recorded runs do not change. A value that no quoting makes safe for a command that
is also printed line by line (a newline, a NUL, another control character) is refused with a
:class:`~tunepath.errors.TunepathError`, as are ports and numbers that are not whole
numbers (``True`` is not a port).
"""

from __future__ import annotations

import os
import re
import shlex

from tunepath.errors import TunepathError

__all__ = ["PLACEHOLDERS", "PORT_PLACEHOLDER", "LIVE_MEMBER", "quote", "path", "port", "number", "check_text", "heredoc"]

# a shell function, `live`: is a process of the group $g still running? One that has exited but is not
# yet reaped (a zombie: some container inits reap late) has ended. /proc/PID/stat after the name:
# state, ppid, process group
LIVE_MEMBER = ("live() { for f in /proc/[0-9]*/stat; do read -r l < \"$f\" 2>/dev/null || continue; "
               "set -- ${l##*) }; [ \"$3\" = \"$g\" ] && [ \"$1\" != Z ] && return 0; done; return 1; };")

# the variables the path's pages use for what differs between hosts (what each means, and which
# context field it stands for: tunepath.model.reader.VARIABLES)
PLACEHOLDERS = frozenset({"tomcat_ip", "tomcat_port", "net", "JAVA_HOME", "TOMCAT_HOME", "CATALINA_HOME", "HOME",
                          "WRK2"})
PORT_PLACEHOLDER = "${tomcat_port}"     # the one port a command may name by its variable: Tomcat's HTTP port
_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)")
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")


def check_text(value: str, what: str = "value") -> str:
    """``value`` if it holds no newline, NUL or other control character (a tab is fine)."""
    if not isinstance(value, str):
        raise TunepathError(f"{what} must be text, not {type(value).__name__} ({value!r})")
    found = _CONTROL.search(value)
    if found:
        raise TunepathError(f"{what} {value!r} holds a control character ({found.group()!r}): it cannot go "
                            "into a shell command safely; choose a value without one")
    return value


def _quote_words(text: str) -> str:
    """``text`` quoted, the path's variables left for the shell to expand."""
    out, last = [], 0
    for m in _VARIABLE.finditer(text):
        if (m.group(1) or m.group(2)) not in PLACEHOLDERS:
            continue
        if m.start() > last:
            out.append(shlex.quote(text[last:m.start()]))
        out.append(m.group())
        last = m.end()
    if last < len(text) or not out:
        out.append(shlex.quote(text[last:]))
    return "".join(out)


def quote(value, what: str = "value") -> str:
    """One shell word for ``value`` (a string, a path or a whole number)."""
    if isinstance(value, bool):
        raise TunepathError(f"{what} must be text or a whole number, not {value!r}")
    if isinstance(value, int):
        return str(value)
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    text = check_text(value, what)
    if text == "~":
        return "~"
    if text.startswith("~/"):
        return "~/" + (_quote_words(text[2:]) if len(text) > 2 else "")
    return _quote_words(text)


def path(*parts, what: str = "path") -> str:
    """Parts joined with ``/`` into one quoted path: ``path(home, "bin/startup.sh")``."""
    texts = [check_text(os.fspath(p), what) for p in parts]     # an error names the value, not the joined path
    return quote("/".join(texts), what)


def number(value, what: str = "number") -> str:
    """A whole number (not a bool, not text) as it goes into a command."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TunepathError(f"{what} must be a whole number, not {value!r}")
    return str(value)


def port(value, what: str = "port") -> str:
    """A TCP port: a whole number from 1 to 65535 (``True`` is not port 1), or the reader's
    ``${tomcat_port}`` (:data:`PORT_PLACEHOLDER`), left for the shell to expand."""
    if value == PORT_PLACEHOLDER:
        return PORT_PLACEHOLDER
    text = number(value, what)
    if not 0 < value < 65536:
        raise TunepathError(f"{what} must be from 1 to 65535, not {value}")
    return text


def heredoc(target: str, text: str, delimiter: str = "EOF") -> str:
    """``cat > TARGET <<'EOF'`` … ``EOF``: ``text`` written verbatim (no expansion) to the quoted
    ``target``; refused when a line of ``text`` would end the here-document early."""
    if any(line == delimiter for line in text.splitlines()):
        raise TunepathError(f"a line of the text written to {target} is {delimiter!r}, which would end the "
                            "here-document early")
    return f"cat > {target} <<'{delimiter}'\n{text}{delimiter}"
