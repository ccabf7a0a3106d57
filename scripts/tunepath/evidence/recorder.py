"""Recording a live run as it happens.

A run being recorded lives in ``runs/.inprogress/<run_id>/``; its ``run.json`` is
rewritten atomically after every event (measurement, verification, skipped variant,
executed block, error), so an interrupted run still tells what happened. When the run
ends — complete or failed — the directory is renamed to ``runs/<run_id>``; an existing
run is never overwritten.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
from pathlib import Path

from tunepath.errors import TunepathError
from tunepath.evidence.store import RUN_ID, RunStore

__all__ = ["RunRecorder", "new_run_id", "INPROGRESS", "Masker"]

INPROGRESS = ".inprogress"


def new_run_id(server_name: str, now: dt.datetime | None = None) -> str:
    now = now or dt.datetime.now(dt.timezone.utc)
    slug = re.sub(r"[^a-z0-9-]+", "-", server_name.lower()).strip("-")[:30] or "host"
    return f"live-{now:%Y%m%d-%H%M%S}-{slug}"


class Masker:
    """Replaces host names and addresses by role names in everything a run records."""

    def __init__(self, replacements: dict[str, str] | None = None):
        # longest first, so "host.example" is replaced before "host"; whole names only, so
        # masking a host called "vm" leaves "JVM" alone
        self.pairs = [(re.compile(rf"(?<![\w.-]){re.escape(k)}(?![\w-]|\.\w)"), v)
                      for k, v in sorted(((k, v) for k, v in (replacements or {}).items() if k and k != v),
                                         key=lambda kv: -len(kv[0]))]

    def add(self, secret: str, placeholder: str) -> None:
        """Mask ``secret`` wherever it appears (not only as a whole name)."""
        self.pairs.insert(0, (re.compile(re.escape(secret)), placeholder))

    def __call__(self, value):
        if not self.pairs:
            return value
        if isinstance(value, str):
            for pattern, new in self.pairs:
                value = pattern.sub(new, value)
            return value
        if isinstance(value, dict):
            return {k: self(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self(v) for v in value]
        return value


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

    @property
    def run_id(self) -> str:
        return self.record["run_id"]

    def save(self) -> None:
        tmp = self.dir / "run.json.tmp"
        tmp.write_text(json.dumps(self.record, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
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

    def repetitions(self, step: str, rounds: int, reason: str, rule: dict, order: list[str]) -> None:
        """How a step's interleaved repetitions ended: rounds, why, the rule and the order."""
        self.record.setdefault("repetitions", {})[step] = {"rounds": rounds, "reason": self.mask(reason),
                                                           "rule": rule, "order": order}
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
