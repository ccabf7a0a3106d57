"""Import the recorded wrk2 rate sweep of the sandbox (``shared/reference/sandbox-wrk2-rate-sweep``)
as the run ``runs/sandbox-wrk2-rate-sweep``: the raw outputs copied byte for byte, the
commands from the ``.cmd`` files, the host facts from the sweep's README.

    python -m tunepath.evidence.importref ../shared/reference/sandbox-wrk2-rate-sweep runs
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from tunepath.errors import TunepathError
from tunepath.evidence.store import RunStore

RUN_ID = "sandbox-wrk2-rate-sweep"
URL_PORT = 18180
CMD_FILE = re.compile(r"rate-(\d+)\.cmd")


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise TunepathError(f"{path}: not UTF-8 text; a .cmd file holds the command that was run") from None
    except OSError as exc:
        raise TunepathError(f"{path}: cannot be read ({exc.strerror or exc})") from None


def _measurements(directory: Path, files: dict[str, bytes]) -> tuple[list[dict], list[int]]:
    """One measurement per ``rate-N.cmd`` (rising rates), its raw output added to ``files``."""
    measurements, rates = [], []
    if not directory.is_dir():
        raise TunepathError(f"{directory}: not a directory (give the recorded sweep's directory)")
    found = sorted(((int(m.group(1)), p) for p in directory.iterdir() if (m := CMD_FILE.fullmatch(p.name))),
                   key=lambda rp: rp[0])
    for rate, cmd_file in found:
        lines = _read(cmd_file).splitlines()
        if not lines or not lines[0].strip():
            raise TunepathError(f"{cmd_file}: empty; its first line must be the command that was run")
        command = lines[0].strip()
        status = re.search(r"exit status:\s*(\d+)", "\n".join(lines[1:]))
        raw = directory / f"rate-{rate}.txt"
        if not raw.is_file():
            raise TunepathError(f"{raw} is missing beside {cmd_file}")
        files[f"raw/rate-sweep-rate-{rate}.txt"] = raw.read_bytes()
        measurements.append({"step": "rate-sweep", "variant": f"rate-{rate}",
                             "stdout": f"raw/rate-sweep-rate-{rate}.txt", "command": command, "tool": "wrk2",
                             "exit_status": int(status.group(1)) if status else None,
                             "cpus_online": "0-1", "source": f"{directory.name}/{raw.name}"})
        rates.append(rate)
    if not measurements:
        raise TunepathError(f"no rate-*.cmd files in {directory}")
    return measurements, rates


def _verification(directory: Path, files: dict[str, bytes]) -> list[dict]:
    """The warm-up before the sweep, if recorded (not a measurement)."""
    if not (directory / "warmup.txt").is_file():
        return []
    files["verify/rate-sweep-warm-up.txt"] = (directory / "warmup.txt").read_bytes()
    return [{"step": "rate-sweep", "name": "warm-up", "host": "client",
             "command": f"wrk2 -t2 -c16 -d15 -R5000 http://127.0.0.1:{URL_PORT}"
                        "/examples/servlets/servlet/HelloWorldExample",
             "output": "verify/rate-sweep-warm-up.txt",
             "source": f"{directory.name}/warmup.txt (15 s at 5,000 req/s, not measured)"}]


def _hosts() -> dict:
    """The server and the client: one sandbox machine, facts from the sweep's README."""
    same = "same machine"
    server_facts = {
        "cpu_model": "Intel(R) Xeon(R) Processor @ 2.50GHz (KVM guest)", "cpus": 2, "cpus_online": "0-1",
        "numa_nodes": 1, "kernel": "6.18.44", "kernel_cmdline": None, "iommu": None, "nic": None,
        "os": "Debian GNU/Linux 12 (bookworm) 12.11", "java_version": "OpenJDK 17.0.15",
        "tomcat_version": "11.0.10", "load_generator": None, "nofile_limit": {"soft": "20000", "hard": "20000"},
    }
    client_facts = dict(server_facts, java_version=None, tomcat_version=None,
                        load_generator={"name": "wrk2", "version": "giltene/wrk2, built from source"})
    why = "not recorded with the sweep"
    return {
        "server": {"name": "sandbox", "description": "KVM guest, 2 vCPU Intel Xeon @ 2.50GHz, 1 NUMA node, "
                   "Debian 12, kernel 6.18.44; server and client on one machine over loopback — not a "
                   "benchmark host", "facts": server_facts,
                   "facts_missing": {"kernel_cmdline": why, "iommu": why, "nic": "loopback only",
                                     "load_generator": "runs on the client"}},
        "client": {"name": "sandbox", "description": f"wrk2 (giltene/wrk2, built from source) on the {same}",
                   "facts": client_facts,
                   "facts_missing": {"kernel_cmdline": why, "iommu": why, "nic": "loopback only",
                                     "java_version": "not needed on a client",
                                     "tomcat_version": "not installed on a client"}},
    }


def _notes() -> list[dict]:
    """What a reader must know about how the sweep was recorded."""
    return [
        {"text": "Server and client ran on one 2-vCPU KVM guest over loopback: they compete for the same "
                 "CPUs and no NIC is involved. The sweep shows the method, not what a server can do."},
        {"text": "One JVM served the whole sweep, rates in rising order, after a 15 s warm-up at 5,000 "
                 "req/s. Stock Tomcat: only the HTTP port was changed (18180). CPU steal was not "
                 "recorded during this sweep, so noise flags cannot be computed for it.",
         "steps": ["rate-sweep"]},
        {"text": "ulimit -n could only be raised to 20000 (the hard limit), not 65535."},
    ]


def _context(rates: list[int]) -> dict:
    """The run's parameters: stock Tomcat on port 18180, wrk2 with 2 threads and 16 connections."""
    return {"tomcat_home": "~/apache-tomcat-11.0.10", "tomcat_version": "11.0.10",
            "server_address": "127.0.0.1", "port": URL_PORT, "total_cpus": 2, "baseline_cpus": "0-1",
            "numa_cpus": "0-1", "load_generator": "wrk2", "threads": 2, "connections": 16,
            "rate": max(rates), "duration_s": 20, "warmup_s": 15, "open_loop": True,
            "latency_flag": True, "sweep_rates": rates, "sweep_warmup_rate": 5000}


def sweep_record(directory: Path) -> tuple[dict, dict[str, bytes]]:
    """The run record of the sweep in ``directory``, and its files (path in the run -> bytes)."""
    directory = Path(directory)
    files: dict[str, bytes] = {}
    measurements, rates = _measurements(directory, files)
    verification = _verification(directory, files)
    record = {
        "run_id": RUN_ID, "kind": "reference", "status": "complete",
        "kind_label": "recorded reference run",
        "label": "sandbox, recorded wrk2 rate sweep (server and client on one machine)",
        "date": None, "date_note": "recorded before this project's first run; the date was not kept",
        "source": "A real wrk2 rate sweep against stock Tomcat 11.0.10 on the project's sandbox, recorded "
                  "for replay (shared/reference/sandbox-wrk2-rate-sweep): raw outputs copied byte for byte",
        "same_machine": True,
        "notes": _notes(),
        "hosts": _hosts(),
        "context": _context(rates),
        "measurements": measurements, "verification": verification, "skipped": [],
    }
    return record, files


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2:
        print("usage: python -m tunepath.evidence.importref SWEEP_DIR RUNS_DIR", file=sys.stderr)
        return 2
    try:
        record, files = sweep_record(Path(argv[0]))
        RunStore(Path(argv[1])).write(record, files)
    except TunepathError as exc:
        print(f"importref: {exc}", file=sys.stderr)
        return 2
    print(f"recorded {Path(argv[1]) / RUN_ID}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
