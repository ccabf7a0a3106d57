"""The JupyterLab options ``scripts/notebook`` refuses: those that undo its own protections.

``scripts/notebook`` serves the step notebooks, and their kernel runs commands on the user's
hosts, so the server listens on 127.0.0.1 only, wants a token, and checks XSRF. A user's own
options come after the script's and would win, so these are refused unless the user says, with
``--allow-unsafe``, that exposing the server is what they mean:

- an address other than the loopback (``--ip``, ``--ServerApp.ip``);
- an empty token (``--ServerApp.token=``, ``--IdentityProvider.token=``, or ``JUPYTER_TOKEN`` set
  and empty);
- XSRF checks off (``--ServerApp.disable_check_xsrf=True``);
- remote access or any origin allowed (``--ServerApp.allow_remote_access=True``,
  ``--ServerApp.allow_origin=*``).

``python -m tunepath.jupyter check [OPTION …]`` prints one line per refused option and exits 2.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence

__all__ = ["refused", "main", "ALLOW"]

ALLOW = "--allow-unsafe"
_LOOPBACK = {"127.0.0.1", "localhost", "::1", "[::1]"}
_TRUE = {"true", "1", "yes", "on"}
_APPS = ("ServerApp", "NotebookApp", "IdentityProvider")


def _name(option: str) -> str:
    """The trait an option sets, without its application: ``--ServerApp.ip`` → ``ip``."""
    name = option.lstrip("-")
    for app in _APPS:
        if name.startswith(app + "."):
            return name[len(app) + 1:]
    return name


def _pairs(args: Sequence[str]):
    """(option, value) for each ``--opt=value`` or ``--opt value``; value None for a bare flag."""
    i = 0
    while i < len(args):
        arg = args[i]
        if arg.startswith("--") and "=" in arg:
            option, _, value = arg.partition("=")
            yield option, value
        elif arg.startswith("--") and i + 1 < len(args) and not args[i + 1].startswith("--"):
            yield arg, args[i + 1]
            i += 1
        elif arg.startswith("--"):
            yield arg, None
        i += 1


def refused(args: Sequence[str], env: Mapping[str, str]) -> list[str]:
    """Why each option in ``args`` (and the environment's token) would expose the server."""
    out = []
    for option, value in _pairs(args):
        name, v = _name(option), (value or "").strip()
        if name == "ip" and v.lower() not in _LOOPBACK:
            out.append(f"{option}={value}: the server would listen beyond this machine")
        elif name == "token" and value is not None and not v:
            out.append(f"{option}=: an empty token lets anyone who reaches the port run commands")
        elif name == "disable_check_xsrf" and (value is None or v.lower() in _TRUE):
            out.append(f"{option}: without XSRF checks, any web page you open can drive the kernel")
        elif name == "allow_remote_access" and (value is None or v.lower() in _TRUE):
            out.append(f"{option}: the server would accept requests from other hosts")
        elif name == "allow_origin" and v == "*":
            out.append(f"{option}=*: any web site could call the server")
    if "JUPYTER_TOKEN" in env and not env["JUPYTER_TOKEN"].strip():
        out.append("JUPYTER_TOKEN is set and empty: set a token, or unset it to get one")
    return out


def main(argv: Sequence[str] | None = None, env: Mapping[str, str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] != "check":
        print("usage: python -m tunepath.jupyter check [JUPYTERLAB OPTION …]", file=sys.stderr)
        return 2
    problems = refused(argv[1:], os.environ if env is None else env)
    for p in problems:
        print(f"scripts/notebook: refused {p}. The notebooks' kernel runs commands on your hosts; "
              f"give {ALLOW} if exposing it is what you mean.", file=sys.stderr)
    return 2 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
