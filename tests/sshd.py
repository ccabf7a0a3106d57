"""A real OpenSSH server on a loopback port, with throwaway host and user keys."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

SSHD = Path("/usr/sbin/sshd")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Sshd:
    dir: Path
    port: int
    proc: subprocess.Popen
    user_key: Path
    host_pub: Path

    def known_hosts_line(self, pub: Path | None = None) -> str:
        kind, key = (pub or self.host_pub).read_text().split()[:2]
        return f"[127.0.0.1]:{self.port} {kind} {key}\n"

    def inventory(self, known_hosts: Path, path: Path | None = None) -> Path:
        path = path or self.dir / "hosts.toml"
        host = (f'host = "127.0.0.1"\nport = {self.port}\nuser = "{os.environ.get("USER", "root")}"\n'
                f'key_file = "{self.user_key}"\n')
        path.write_text(f'known_hosts = "{known_hosts}"\n\n[server]\n{host}\n[[clients]]\n{host}')
        return path

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)


def keygen(path: Path) -> Path:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True)
    return path


def start_sshd(workdir: Path) -> Sshd:
    workdir.mkdir(parents=True, exist_ok=True)
    host_key = keygen(workdir / "host_key")
    user_key = keygen(workdir / "user_key")
    shutil.copy(f"{user_key}.pub", workdir / "authorized_keys")
    port = free_port()
    config = workdir / "sshd_config"
    config.write_text(
        f"Port {port}\nListenAddress 127.0.0.1\nHostKey {host_key}\nPidFile {workdir}/sshd.pid\n"
        f"AuthorizedKeysFile {workdir}/authorized_keys\nStrictModes no\nPasswordAuthentication no\n"
        "KbdInteractiveAuthentication no\nPermitRootLogin prohibit-password\nUsePAM no\n"
        "AcceptEnv none\nPrintMotd no\nSubsystem sftp internal-sftp\n"
        f"SetEnv HOME={os.environ['HOME']}\n")       # the test session's own HOME (tests/conftest.py)
    Path("/run/sshd").mkdir(exist_ok=True)       # privilege separation directory
    proc = subprocess.Popen([str(SSHD), "-D", "-e", "-f", str(config)], stdout=subprocess.DEVNULL,
                            stderr=open(workdir / "sshd.log", "wb"))
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                break
        except OSError:
            if proc.poll() is not None:
                raise RuntimeError(f"sshd exited: {(workdir / 'sshd.log').read_text()}")
            time.sleep(0.1)
    return Sshd(workdir, port, proc, user_key, Path(f"{host_key}.pub"))
