"""The lab's users: one ordinary login per host namespace, and sudo for the server's alone.

Users are machine-wide (the namespaces share ``/etc/passwd`` and ``/home``): ``<prefix>-srv``,
``<prefix>-c1`` and ``<prefix>-c2``, made with ``useradd -m`` and bash, with no password (``*``:
nothing can log in with one, but the account is not locked, so sshd takes its key). Each one's
``~/.ssh/authorized_keys`` holds the lab's one public key. The server's user gets passwordless
sudo, from ``/etc/sudoers.d/<prefix>-lab`` (mode 0440, checked with ``visudo -cf`` before it is
put in place), as the path asks of a real server; the clients' users may run only
:data:`CLIENT_SUDO` as root, the kernel step's one client setting.

Ownership: ``create_user`` writes a creation mark into the new home, :data:`CREATION_MARK`, a file
owned by root (the user cannot forge one) recording the account's name, uid and home's inode.
``down`` removes an account only while it still matches its mark (:func:`not_ours`): a state that
lists someone else's account, or an account made again under a lab user's name, removes nothing.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import stat
from dataclasses import asdict, dataclass
from pathlib import Path

from tunepath.errors import TunepathError
from tunepath.lab.system import run, tool

__all__ = ["SUDOERS_DIR", "CREATION_MARK", "CreationMark", "user_name", "sudoers_path", "user_exists", "create_user",
           "authorize", "not_ours", "delete_user", "write_sudoers", "remove_sudoers", "user_sudo_line",
           "client_sudo_line", "sudoers_text", "CLIENT_SUDO"]

SUDOERS_DIR = Path("/etc/sudoers.d")
# the one command the clients' users may run as root: the kernel step's client setting (tcp_tw_reuse is
# per network namespace), exactly as its page prints it, with the values 0-2 it takes
CLIENT_SUDO = "/usr/sbin/sysctl -w net.ipv4.tcp_tw_reuse=[0-2]"
CREATION_MARK = ".tunepath-lab-user"      # in the home of each user the lab created


def user_name(prefix: str, suffix: str) -> str:
    return f"{prefix}-{suffix}"


def sudoers_path(prefix: str) -> Path:
    return SUDOERS_DIR / f"{prefix}-lab"      # no '.' in the name: sudo reads it


def user_exists(name: str) -> bool:
    try:
        pwd.getpwnam(name)
        return True
    except KeyError:
        return False


def create_user(name: str) -> None:
    run([tool("useradd"), "--create-home", "--shell", "/bin/bash", "--password", "*",
         "--comment", "tunepath lab user", name], f"creating user {name}")
    try:
        _mark(name)
    except OSError as exc:           # unmarked, `down` would leave it: remove it now, while it is surely ours
        run([tool("userdel"), "--remove", name], f"removing user {name}")
        raise TunepathError(f"creating user {name}: cannot write its creation mark {CREATION_MARK} in its home "
                            f"({exc.strerror or exc}); the user is removed again") from None
    perf = Path("/tmp") / f"hsperfdata_{name}"        # a former user's of this name: its JVMs could not write
    if perf.is_dir() and not perf.is_symlink() and perf.stat().st_uid != pwd.getpwnam(name).pw_uid:
        shutil.rmtree(perf, ignore_errors=True)


def authorize(name: str, public_key: str) -> None:
    """``~name/.ssh/authorized_keys`` holds exactly ``public_key``, owned by the user (sshd's
    StrictModes accepts nothing looser)."""
    entry = pwd.getpwnam(name)
    ssh = Path(entry.pw_dir) / ".ssh"
    ssh.mkdir(mode=0o700, exist_ok=True)
    keys = ssh / "authorized_keys"
    keys.write_text(public_key.strip() + "\n")
    for path, mode in ((ssh, 0o700), (keys, 0o600)):
        os.chown(path, entry.pw_uid, entry.pw_gid)
        os.chmod(path, mode)


@dataclass(frozen=True)
class CreationMark:
    """An account as the lab created it: what :data:`CREATION_MARK` records, and ``down`` compares."""
    user: str
    uid: int
    home: str
    home_inode: int

    @classmethod
    def of(cls, entry: pwd.struct_passwd) -> "CreationMark":
        return cls(entry.pw_name, entry.pw_uid, entry.pw_dir, Path(entry.pw_dir).lstat().st_ino)


def _mark(name: str) -> None:
    """The creation mark: written by this process (root), so owned by it, in the new account's home."""
    entry = pwd.getpwnam(name)
    path = Path(entry.pw_dir) / CREATION_MARK
    path.unlink(missing_ok=True)              # not one a skeleton home could bring (it would be the user's)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o444)
    with open(fd, "w", encoding="utf-8") as f:
        f.write(json.dumps(asdict(CreationMark.of(entry))) + "\n")


def not_ours(name: str) -> str | None:
    """Why the account ``name`` is not one the lab created (None: it is, or it no longer exists):
    its home must hold the creation mark, a regular file of one link owned by this process's
    user (root), naming this account's name, uid, home and home inode."""
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        return None
    home = Path(entry.pw_dir)
    try:
        fd = os.open(home / CREATION_MARK, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        with open(fd, "rb") as f:
            info = os.fstat(f.fileno())
            if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1 or info.st_uid != os.geteuid():
                return f"{home / CREATION_MARK} is not the lab's file"
            lab = CreationMark(**json.loads(f.read(4096)))
        now = CreationMark.of(entry)
    except (OSError, ValueError, TypeError):
        return f"no creation mark of the lab in its home {home}"
    if lab != now:
        return (f"its mark records uid {lab.uid} and home {lab.home} (inode {lab.home_inode}), the account now has "
                f"uid {now.uid} and home {now.home} (inode {now.home_inode})")
    return None


def delete_user(name: str) -> None:
    """``userdel -r``: the user, its home and its mail spool (none is fine); then the JVM's
    ``/tmp/hsperfdata_<user>``, which a later user of the same name (another uid) could not write
    to: its JVMs would then keep no GC and JIT counters."""
    if user_exists(name):
        run([tool("userdel"), "--remove", name], f"removing user {name}",
            hint="a process of the user may still run (ps -u " + name + ")")
    perf = Path("/tmp") / f"hsperfdata_{name}"
    if perf.is_dir() and not perf.is_symlink():
        shutil.rmtree(perf, ignore_errors=True)


def user_sudo_line(name: str) -> str:
    return f"{name} ALL=(ALL) NOPASSWD: ALL\n"


def client_sudo_line(name: str) -> str:
    """What a client's user may run as root: the kernel step's one client setting, nothing wider (a
    client namespace shares the machine's kernel, so a wider sysctl could change the machine's own)."""
    return f"{name} ALL=(root) NOPASSWD: {CLIENT_SUDO}\n"


def sudoers_text(server: str, clients=()) -> str:
    return ("# tunepath lab: removed by `tunepath lab down`\n" + user_sudo_line(server)
            + "".join(client_sudo_line(c) for c in clients))


def write_sudoers(path: Path, server: str, clients=()) -> None:
    """Passwordless sudo for ``server``, and for each of ``clients`` only :data:`CLIENT_SUDO`: validated
    in a file sudo ignores (its name holds a '.'), then renamed into place, so sudo never reads half a
    file or a file visudo refused."""
    tmp = path.with_name(f"{path.name}.tunepath-tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o440)
    try:
        os.write(fd, sudoers_text(server, clients).encode())
        os.fchmod(fd, 0o440)
    finally:
        os.close(fd)
    try:
        run([tool("visudo"), "-cf", str(tmp)], f"checking the sudoers file for {server}")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def remove_sudoers(path: Path) -> None:
    path.unlink(missing_ok=True)
