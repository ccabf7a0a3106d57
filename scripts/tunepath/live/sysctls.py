"""Kernel settings (sysctls) a step's variants run under, on the server and on the clients: saved
before the first change, switched before each measurement, and put back.

Each host keeps the values it had before the run's first change to them in
:data:`SAVED` (``~/.tunepath/original-sysctls.json``). A name saved once keeps its first value, so
a machine that is both server and client (one home, one file) still holds the originals.
:func:`switch` sets a variant's values and puts the step's other names back to their saved values,
so that interleaved variants each run under their own settings. :func:`put_back` writes back every
saved value that differs and removes the file once all are back; :mod:`tunepath.live.restore` calls
it for the server and every client when a step ends, fails or is interrupted, and from
``tunepath restore``.

Every change is one ``sudo sysctl -w NAME=VALUE``, exactly as the page prints it, so a client whose
sudo allows only that command (the lab's) can make it.
"""

from __future__ import annotations

import json
import re
import time

from tunepath.errors import TunepathError
from tunepath.live.hosts import Host
from tunepath.model.plan import Sysctl
from tunepath.model.shell import heredoc, quote

__all__ = ["SAVED", "read_values", "saved_values", "save", "apply", "switch", "put_back", "put_back_all", "show", "listing", "check"]

SAVED = "~/.tunepath/original-sysctls.json"


def read_values(host: Host, names) -> dict[str, str | None]:
    """The current value of each name on ``host`` (None: the kernel, or this network namespace, has no such
    setting)."""
    names = list(dict.fromkeys(names))
    if not names:
        return {}
    paths = " ".join(quote(Sysctl(n, "0").path) for n in names)
    r = host.run(f"for f in {paths}; do if [ -r \"$f\" ]; then echo \"$f=$(cat \"$f\")\"; else echo \"$f=\"; fi; "
                 "done", check=False, timeout=30)
    found = dict(re.findall(r"^/proc/sys/(\S+?)=(.*)$", r.stdout, re.M))
    return {n: (found.get(n.replace(".", "/")) or "").strip() or None for n in names}


def saved_values(host: Host) -> dict[str, str]:
    """The values saved on ``host`` before the run changed them ({}: nothing saved)."""
    r = host.run(f"cat {SAVED} 2>/dev/null", check=False, timeout=15)
    if not r.stdout.strip():
        return {}
    try:
        values = json.loads(r.stdout)["values"]
        if not isinstance(values, dict) or not all(isinstance(v, str) and v.isdigit() for v in values.values()):
            raise ValueError("values are not whole numbers")
        for name in values:
            Sysctl(name, values[name])
    except (ValueError, KeyError, TypeError) as exc:
        raise TunepathError(f"on {host.name}: {SAVED} is damaged ({exc}); inspect it (cat {SAVED}) before "
                            "setting the kernel's values back by hand") from None
    return values


def save(host: Host, names, now: dict[str, str | None] | None = None) -> dict[str, str]:
    """Save the current value of each name not saved yet (flushed before any change); returns all saved.
    ``now``: the current values, when the caller has just read them."""
    values = saved_values(host)
    unsaved = [n for n in names if n not in values]
    current = now if now is not None else read_values(host, unsaved)
    new = {n: current[n] for n in unsaved if current.get(n) is not None}
    if not new:
        return values
    values.update(new)
    text = json.dumps({"saved": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "values": values}, sort_keys=True) + "\n"
    tmp = SAVED + ".tmp"
    host.run(f"mkdir -p ~/.tunepath && {heredoc(tmp, text)}\nsync {tmp} && mv {tmp} {SAVED} && sync ~/.tunepath",
             timeout=30)
    return values


def apply(host: Host, settings, now: dict[str, str | None] | None = None) -> list[str]:
    """Set each setting whose value differs, one ``sudo sysctl -w`` each; returns the commands run.
    ``now``: the current values, when the caller has just read them."""
    settings = list(settings)
    if now is None:
        now = read_values(host, [s.name for s in settings])
    done = []
    for s in settings:
        if now.get(s.name) != s.value:
            host.run(s.command, timeout=30, as_written=True)
            done.append(s.command)
    return done


def switch(host: Host, role: str, wanted, touched) -> dict[str, str | None]:
    """On ``host`` (``role`` server or client): the settings in ``wanted`` set, every other name in
    ``touched`` (those the step's other variants change) back to its saved value. Saves first. Returns
    each touched name's value as the kernel reports it afterwards (None: this kernel or namespace has
    no such setting): the read before the change when nothing changed, else a read after it."""
    wanted = [s for s in wanted if s.host == role]
    names = sorted({s.name for s in touched if s.host == role})
    if not names:
        return {}
    now = read_values(host, names)
    saved = save(host, names, now)
    own = {s.name for s in wanted}
    changes = [*wanted, *(Sysctl(n, saved[n], role) for n in names if n not in own and n in saved)]
    return read_values(host, names) if apply(host, changes, now) else now


def put_back(host: Host, forget: bool = True) -> list[str]:
    """Every saved value that differs written back; the saved file removed once all are back (``forget``).
    One line per change, naming host and command."""
    saved = saved_values(host)
    if not saved:
        return []
    try:
        done = apply(host, [Sysctl(n, v) for n, v in sorted(saved.items())])
    except TunepathError as exc:
        raise TunepathError(f"{exc}; the saved values stay in {SAVED} on {host.name}: rerun `tunepath restore`") \
            from None
    if forget:
        host.run(f"rm -f {SAVED}", check=False, timeout=15)
    return [f"{c.removeprefix('sudo sysctl -w ')} again on {host.name} (`{c}`)" for c in done]


def put_back_all(hosts) -> list[str]:
    """:func:`put_back` on every host, each tried even when another fails (one error naming them all)."""
    done, problems = [], []
    for host in hosts:
        try:
            done += put_back(host)
        except Exception as exc:                 # noqa: BLE001 (the others are still put back)
            problems.append(str(exc))
    if problems:
        raise TunepathError("; ".join(problems))
    return done


def show(host: Host, names) -> str:
    """``name = value`` lines as ``sysctl`` prints them; a setting this kernel or namespace lacks says so."""
    return listing(read_values(host, names))


def listing(values: dict[str, str | None]) -> str:
    """:func:`show`'s lines for values already read."""
    return "".join(f"{n} = {v}\n" if v is not None else f"{n}: not present here\n" for n, v in values.items())


def check(host: Host, settings) -> str | None:
    """Why ``settings`` cannot be changed on ``host`` (None: they can): a setting its kernel or network
    namespace lacks, or a sudo that does not allow the exact command."""
    settings = list(settings)
    missing = [n for n, v in read_values(host, [s.name for s in settings]).items() if v is None]
    if missing:
        return (f"{', '.join(missing)} does not exist on {host.name} (/proc/sys has no such file: a network "
                "namespace other than the host's own has no per-device backlog setting, and an old kernel may lack "
                "one)")
    for s in settings:
        allowed = host.run(f"[ \"$(id -u)\" = 0 ] || sudo -n -l {s.command.removeprefix('sudo ')} >/dev/null 2>&1",
                           check=False, timeout=15)
        if allowed.exited != 0:
            return f"needs root on {host.name} for `{s.command}`, and sudo does not allow it without a password"
    return None
