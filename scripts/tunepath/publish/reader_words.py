"""Recorded text as a reader sees it: no whole kernel command line, no loopback SSH address.

A run's notes and flags are written while it runs, with what the controller knew: the SSH
address it reached a host at (on the lab, a random port on ``127.0.0.1``) and, after a reboot,
the whole ``/proc/cmdline``. The run record keeps them as written (they are evidence); the pages
get them here, at publish time:

    cmdline_words("the line is `BOOT_IMAGE=/vmlinuz root=UUID=… ro iommu.strict=1`")
    # 'the line is `iommu.strict=1`; 2 others not shown, full line in the run record'
    loopback_words("on tplab-c1@127.0.0.1:49313", "tunepath-vm", {"tplab-c1@127.0.0.1:49313"})
    # 'on client tplab-c1'
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from tunepath.model.cmdline import KernelCmdline

__all__ = ["cmdline_words", "host_label", "loopback_words", "reader_words", "loopback_everywhere"]

# a backquoted kernel command line: it names the boot image or the root device
_CMDLINE = re.compile(r"`([^`]*\b(?:BOOT_IMAGE|root)=[^`]*)`")
# an SSH address on the loopback interface: user@127.x.x.x:port (a random port each lab run)
_LOOPBACK = re.compile(r"(client )?\b([\w.-]+)@(?:127(?:\.\d{1,3}){3}|localhost|\[::1\]):\d+")
_FULL = "full line in the run record"


def _reduced(line: str) -> str:
    c = KernelCmdline.parse(line)
    others = c.other_count + len(c.init_args)
    shown = f"`{c.shown}`" if c.relevant else "none of the path's kernel parameters"
    more = f"{others} other{'s' if others != 1 else ''} not shown, " if others else ""
    return f"{shown}; {more}{_FULL}"


def cmdline_words(text: str) -> str:
    """``text`` with each backquoted kernel command line reduced to the path's parameters."""
    return _CMDLINE.sub(lambda m: _reduced(m[1]), text)


def host_label(address: str) -> str:
    """A loopback SSH address as its host's label (the user it logs in as: on the lab, the
    client's namespace, ``tplab-c1``); any other address unchanged."""
    m = _LOOPBACK.fullmatch(address.strip())
    return m[2] if m else address


def loopback_words(text: str, server: str | None = None, clients: Iterable[str] = ()) -> str:
    """``text`` with each loopback SSH address replaced by its host: "client <label>" for one of
    ``clients`` (addresses) or one already called a client; the server's name for any other
    when ``server`` is given."""
    known = set(clients)

    def label(m: re.Match) -> str:
        address = m[0].removeprefix("client ")
        if m[1] or address in known or not server:
            return f"client {m[2]}"
        return server
    return _LOOPBACK.sub(label, text)


def reader_words(text: str, server: str | None = None, clients: Iterable[str] = ()) -> str:
    """Both: kernel command lines reduced, loopback addresses as hosts."""
    return loopback_words(cmdline_words(text), server, clients)


def loopback_everywhere(data, server: str | None = None, clients: Iterable[str] = ()):
    """``data`` (a run's page data: dicts, lists, strings) with :func:`loopback_words` applied to
    every string in it: the one place where a recorded SSH address becomes its host's name."""
    known = frozenset(clients)
    if isinstance(data, str):
        return loopback_words(data, server, known) if "@" in data else data
    if isinstance(data, dict):
        return {k: loopback_everywhere(v, server, known) for k, v in data.items()}
    if isinstance(data, (list, tuple)):
        return [loopback_everywhere(v, server, known) for v in data]
    return data
