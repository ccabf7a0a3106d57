"""Recording a live run as it happens.

A run being recorded lives in ``runs/.inprogress/<run_id>/``; its ``run.json`` is
rewritten atomically after every event (measurement, verification, skipped variant,
executed block, error), so an interrupted run still tells what happened. When the run
ends — complete or failed — the directory is renamed to ``runs/<run_id>``; an existing
run is never overwritten.

Everything recorded goes through a :class:`Masker`: machine paths always become role names
(the server's home ``~``, ``$JAVA_HOME``, ``$TUNEPATH_PROJECT`` …) or paths relative to the
run (:func:`path_roles`), so a run carries no trace of the machine that recorded it; with
``--mask-hosts`` host names, addresses and user names become role names too.
:func:`rewrite_run` applies the same masking to a run recorded before.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
from pathlib import Path

from tunepath.errors import TunepathError
from tunepath.evidence.store import RUN_ID, RunStore
from tunepath.model.shell import quote
from tunepath.parse.record import json_safe

__all__ = ["RunRecorder", "new_run_id", "claim_run_id", "INPROGRESS", "Masker", "path_roles", "rewrite_run", "mask_file"]

INPROGRESS = ".inprogress"


def new_run_id(server_name: str, now: dt.datetime | None = None) -> str:
    now = now or dt.datetime.now(dt.timezone.utc)
    slug = re.sub(r"[^a-z0-9-]+", "-", server_name.lower()).strip("-")[:30] or "host"
    return f"live-{now:%Y%m%d-%H%M%S}-{slug}"


def claim_run_id(runs_dir: Path, server_name: str, now: dt.datetime | None = None) -> str:
    """A new run id, its directory in ``runs/.inprogress`` created by this call alone: two runs
    that start in the same second on servers of the same name (two runs on one machine) get
    ``…-vm`` and ``…-vm-2``, never one record."""
    base = new_run_id(server_name, now)
    inprogress = Path(runs_dir) / INPROGRESS
    inprogress.mkdir(parents=True, exist_ok=True)
    for n in range(1, 1000):
        run_id = base if n == 1 else f"{base}-{n}"
        if (Path(runs_dir) / run_id).exists():
            continue
        try:
            (inprogress / run_id).mkdir()
        except FileExistsError:
            continue
        return run_id
    raise TunepathError(f"no free run id like {base!r} in {runs_dir}")


class Masker:
    """Replaces machine paths, host names and addresses by role names in everything a run records.

    ``paths`` (see :func:`path_roles`) are replaced first, where a path starts (not inside
    another path) and up to a ``/`` or the path's end: ``/root`` becomes ``~`` in
    ``/root/apache-tomcat`` but stays in ``/rootfs``. A path that a command quoted (a shell
    word in ``'…'``, an httpd.conf value in ``"…"``: it holds a space) is quoted again as the
    same command renders its role, so a recorded command stays the one its page prints from the
    recorded context. ``replacements`` (host names, addresses, user names) then, as whole names."""

    def __init__(self, replacements: dict[str, str] | None = None, paths: dict[str, str] | None = None):
        # longest first, so "host.example" is replaced before "host"; whole names only, so
        # masking a host called "vm" leaves "JVM" alone
        by_length = lambda items: sorted(((k, v) for k, v in items if k and k != v), key=lambda kv: -len(kv[0]))  # noqa: E731
        self.pairs = []
        for k, v in by_length((paths or {}).items()):
            shell = k.replace("'", "'\"'\"'")               # how shlex.quote writes a ' inside '…'
            self.pairs += [(re.compile(rf"'{re.escape(shell)}((?:/[^'\n]*)?)'"), _requoted(v)),
                           (re.compile(rf'"{re.escape(k)}((?:/[^"\n]*)?)"'), _requoted(v)),
                           (re.compile(rf"(?<![\w.~$-]){re.escape(k)}(?![\w-]|\.\w)"), v)]
        self.pairs += [(re.compile(rf"(?<![\w.-]){re.escape(k)}(?![\w-]|\.\w)"), v)
                       for k, v in by_length((replacements or {}).items())]

    def add(self, secret: str, placeholder: str) -> None:
        """Mask ``secret`` wherever it appears (not only as a whole name)."""
        self.pairs.insert(0, (re.compile(re.escape(secret)), placeholder))

    def __call__(self, value):
        if not self.pairs:
            return value
        if isinstance(value, str):
            for pattern, new in self.pairs:
                value = pattern.sub(new if callable(new) else (lambda _m, new=new: new), value)
            return value
        if isinstance(value, dict):
            return {k: self(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self(v) for v in value]
        return value


PLAIN_DIRECTIVE = re.compile(r"[\w@%+=:,./~${}-]+")     # an httpd.conf value that needs no quotes


def _requoted(role: str):
    """The replacement of a quoted path: its role, quoted by the rule that quoted the path (the
    shell's for '…', httpd.conf's for "…"); a "…" that did not need quoting is left to the plain rule."""
    def replace(m: re.Match) -> str:
        text = role + m.group(1)
        if m.group(0)[0] == "'":
            return quote(text)
        if PLAIN_DIRECTIVE.fullmatch(m.group(0)[1:-1]):
            return m.group(0)
        return text if PLAIN_DIRECTIVE.fullmatch(text) else f'"{text}"'
    return replace


STANDARD_DIRS = ("/usr/", "/opt/", "/srv/", "/etc/", "/var/lib/")   # where a reader's own system has them too


def _under(path: str, dirs) -> bool:
    return any(path == d or path.startswith(d.rstrip("/") + "/") for d in dirs)


def path_roles(homes=(), *, java_home: str | None = None, tomcat_home: str | None = None,
               run_dirs=(), files: dict[str, str] | None = None, project: str | None = None,
               runs_dir: str | None = None) -> dict[str, str]:
    """The machine paths a run must not carry, each with what it records instead.

    - the run's own directory (being recorded, and final): ``.``, relative to the run;
    - a JDK outside the standard places (``/usr``, ``/opt`` …): ``$JAVA_HOME``;
    - Tomcat's directory outside every home and the standard places: ``$TOMCAT_HOME``;
    - ``files`` named by role (the inventory, the Tomcat tarball …), as given;
    - the project's checkout ``$TUNEPATH_PROJECT``, a runs directory outside it ``$TUNEPATH_RUNS``;
    - each host's home directory: ``~`` (Tomcat's reader-facing home is ``~/apache-tomcat-…``).

    Longer paths win, so a JDK inside the checkout is ``$JAVA_HOME``, not ``$TUNEPATH_PROJECT/…``.
    Relative, ``~``-prefixed and root (``/``) paths are left alone."""
    homes = [h.rstrip("/") for h in homes if h and h.startswith("/") and h.rstrip("/")]
    roles: dict[str, str] = {}

    def put(path, role: str) -> None:
        path = str(path or "").rstrip("/")
        if path.startswith("/") and path not in roles:
            roles[path] = role

    for d in run_dirs:
        put(d, ".")
    if java_home and not _under(java_home, STANDARD_DIRS):
        put(java_home, "$JAVA_HOME")
    if tomcat_home and not _under(tomcat_home, [*STANDARD_DIRS, *homes]):
        put(tomcat_home, "$TOMCAT_HOME")
    for path, role in (files or {}).items():
        put(path, role)
    put(project, "$TUNEPATH_PROJECT")
    if runs_dir and not (project and _under(str(runs_dir), [str(project)])):
        put(runs_dir, "$TUNEPATH_RUNS")
    for home in homes:
        put(home, "~")
    return roles


def rewrite_run(run_dir: Path, mask: Masker) -> list[str]:
    """Mask a recorded run after the fact, exactly as a live run masks what it records:
    ``run.json``, verification outputs, executed notebooks, charts. The load generators' raw
    outputs (``raw/``) stay byte for byte. Returns the files changed (relative to the run)."""
    run_dir = Path(run_dir)
    changed = []
    for path in sorted(p for p in run_dir.rglob("*") if p.is_file()):
        rel = path.relative_to(run_dir)
        if rel.parts[0] == "raw":
            continue
        if mask_file(path, mask):
            changed.append(str(rel))
    return changed


def mask_file(path: Path, mask: Masker) -> bool:
    """Mask one recorded text file in place (atomically); JSON files (run.json, notebooks) value by
    value, in the layout they were written in. Returns whether it changed."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        return False                 # not text: nothing a path could hide in
    try:
        if path.suffix not in (".json", ".ipynb"):
            raise ValueError("not JSON")
        indent = 2 if path.name == "run.json" else 1      # RunRecorder.save / nbformat
        new = json.dumps(mask(json.loads(text)), indent=indent, ensure_ascii=False) + text[len(text.rstrip("\n")):]
    except ValueError:           # not JSON (or cut short): masked as text
        new = mask(text)
    if new == text:
        return False
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(new, encoding="utf-8")
    os.replace(tmp, path)
    return True


class RunRecorder:
    def __init__(self, runs_dir: Path, record: dict, masker: Masker | None = None):
        run_id = record["run_id"]
        if not RUN_ID.match(run_id):
            raise TunepathError(f"bad run id {run_id!r}")
        self.runs_dir = Path(runs_dir)
        self.mask = masker or Masker()
        self.final = self.runs_dir / run_id
        if self.final.exists():
            raise TunepathError(f"run {run_id!r} already exists in {self.runs_dir}; runs are never overwritten")
        self.dir = self.runs_dir / INPROGRESS / run_id
        self.dir.mkdir(parents=True, exist_ok=True)
        self.record = self.mask(record)
        for key in ("measurements", "verification", "skipped", "blocks", "warnings"):
            self.record.setdefault(key, [])
        self.save()

    @classmethod
    def resume(cls, runs_dir: Path, run_id: str, masker: Masker | None = None) -> "RunRecorder":
        path = Path(runs_dir) / INPROGRESS / run_id / "run.json"
        if not path.is_file():
            raise TunepathError(f"no run {run_id!r} being recorded in {Path(runs_dir) / INPROGRESS}")
        self = cls.__new__(cls)
        self.runs_dir = Path(runs_dir)
        self.mask = masker or Masker()
        self.final = self.runs_dir / run_id
        self.dir = path.parent
        self.record = json.loads(path.read_text(encoding="utf-8"))
        return self

    @classmethod
    def reopen(cls, run_dir: Path, masker: Masker | None = None) -> "RunRecorder":
        """The run in ``run_dir``, being recorded or recorded, to add a note to (``tunepath restore``
        after the run ended); it stays where it is."""
        self = cls.__new__(cls)
        self.dir = self.final = Path(run_dir)
        self.runs_dir = self.dir.parent.parent if self.dir.parent.name == INPROGRESS else self.dir.parent
        self.mask = masker or Masker()
        self.record = json.loads((self.dir / "run.json").read_text(encoding="utf-8"))
        if not isinstance(self.record, dict) or not isinstance(self.record.get("run_id"), str):
            raise TunepathError(f"{self.dir / 'run.json'} is no run record")
        return self

    @property
    def run_id(self) -> str:
        return self.record["run_id"]

    def save(self) -> None:
        """Write run.json whole; a figure that is not finite (NaN, inf) is recorded as null, since
        the store reads run.json strictly and would refuse the run."""
        tmp = self.dir / "run.json.tmp"
        tmp.write_text(json.dumps(json_safe(self.record), indent=2, ensure_ascii=False, allow_nan=False) + "\n",
                       encoding="utf-8")
        os.replace(tmp, self.dir / "run.json")

    def write_file(self, rel: str, data: str | bytes) -> str:
        target = self.dir / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(data, str):
            data = self.mask(data).encode("utf-8")
        target.write_bytes(data)
        return rel

    # -- events --------------------------------------------------------------------
    def measurement(self, step: str, variant: str, stdout: str, stderr: str, exit_status: int,
                    command: str, tool: str, repetition: int = 1, parts: list[dict] | None = None,
                    **extra) -> None:
        """One measurement's raw output and facts. ``parts``: when several clients drove the
        load at once, each client's own output (``client``, ``stdout``, ``stderr``, ``exit_status``
        and any extra fields); ``stdout`` is then the first client's."""
        base = f"raw/{step}-{variant}" + (f".r{repetition}" if repetition > 1 else "")
        entry = {"step": step, "variant": variant, "stdout": self.write_file(base + ".txt", stdout),
                 "command": self.mask(command), "tool": tool, "exit_status": exit_status,
                 "source": "live run"}
        if repetition > 1:
            entry["repetition"] = repetition
        if stderr.strip():
            entry["stderr"] = self.write_file(base + ".stderr", stderr)
        if parts:
            entry["parts"] = []
            for i, part in enumerate(parts, 1):
                part = dict(part)
                rel = self.write_file(f"{base}.client-{i}.txt", part.pop("stdout"))
                err = part.pop("stderr", "") or ""
                item = {"client": self.mask(part.pop("client")), "stdout": rel}
                if err.strip():
                    item["stderr"] = self.write_file(f"{base}.client-{i}.stderr", err)
                item.update(self.mask(part))
                entry["parts"].append(item)
        entry.update(self.mask(extra))
        self.record["measurements"] = [m for m in self.record["measurements"]
                                       if (m["step"], m["variant"], m.get("repetition", 1))
                                       != (step, variant, repetition)] + [entry]
        self.save()

    def repetitions(self, step: str, rounds: int, reason: str, rule: dict, order: list[str],
                    variants: dict | None = None) -> None:
        """How a step's interleaved repetitions ended: rounds, why, the rule, the order, and what each
        variant ended with (``variants``: n, dropped, halfwidth_pct, cv_pct, steady_state_s …)."""
        self.record.setdefault("repetitions", {})[step] = {"rounds": rounds, "reason": self.mask(reason),
                                                           "rule": rule, "order": order,
                                                           **({"variants": self.mask(variants)} if variants else {})}
        self.save()

    def step_timing(self, step: str, started: float, finished: float) -> None:
        """Wall time of a step's live execution (for the orchestration-overhead benchmark)."""
        as_iso = lambda t: dt.datetime.fromtimestamp(t, dt.timezone.utc).isoformat(timespec="seconds")  # noqa: E731
        self.record.setdefault("step_timings", {})[step] = {
            "started": as_iso(started), "finished": as_iso(finished), "wall_s": round(finished - started, 3)}
        self.save()

    def verification(self, step: str, name: str, host: str, command: str, output: str) -> None:
        rel = self.write_file(f"verify/{step}-{name}.txt", output)
        self.record["verification"].append({"step": step, "name": name, "host": host,
                                            "command": self.mask(command), "output": rel,
                                            "source": "live run"})
        self.save()

    def skipped(self, step: str, variant: str, reason: str, commands: list[str] | None = None) -> None:
        entry = {"step": step, "variant": variant, "reason": self.mask(reason)}
        if commands:
            entry["commands"] = self.mask(commands)
        self.record["skipped"].append(entry)
        self.save()

    def block(self, step: str, block_id: str, host: str, text: str, outcome: str, **extra) -> None:
        """What happened to one command block: ran, skipped (with reason) or dry-run."""
        entry = {"step": step, "block": block_id, "host": host, "text": self.mask(text), "outcome": outcome}
        entry.update(self.mask(extra))
        self.record["blocks"].append(entry)
        self.save()

    def note_put_back(self, lines: list[str], when: str, steps: list[str] | None = None) -> None:
        """Note what putting the server back did, whoever did it (a step's guard, the end of the run,
        an abort), on the pages of ``steps`` (None: every page of the run)."""
        if not lines:
            return
        note = {"text": f"{when}, the hosts were put back as the run found them: {'; '.join(lines)}."}
        if steps:
            note["steps"] = list(steps)
        self.record.setdefault("notes", []).append(self.mask(note))
        self.save()

    def warn(self, message: str) -> None:
        message = self.mask(message)
        if message not in self.record["warnings"]:
            self.record["warnings"].append(message)
            self.save()

    def fail(self, step: str, message: str, host: str | None = None, command: str | None = None) -> None:
        self.record["status"] = "failed"
        self.record["error"] = self.mask({"step": step, "message": message, "host": host, "command": command})
        self.save()

    def finish(self) -> Path:
        """Move the run into ``runs/``. A run with no error is complete."""
        self.record.setdefault("status", "complete")
        if self.record["status"] == "partial":
            self.record["status"] = "complete"
        self.record["finished"] = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
        self.save()
        if self.final.exists():
            raise TunepathError(f"run {self.run_id!r} appeared in {self.runs_dir} meanwhile; left at {self.dir}")
        os.rename(self.dir, self.final)
        try:
            (self.runs_dir / INPROGRESS).rmdir()
        except OSError:
            pass
        RunStore(self.runs_dir).load(self.run_id)   # validate what was written
        return self.final
