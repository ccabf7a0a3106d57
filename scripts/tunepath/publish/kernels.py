"""Preloaded kernels: the replay build's kernels forked from one process that imported what they need.

Every step notebook of a replay build runs in a kernel of its own (``python3``, ipykernel), and
every such kernel used to spend most of a second importing the same modules (ipykernel and
IPython, pandas, matplotlib, tunepath) before the notebook's first line did any work. The
build now starts one *preloading process* (``python -m tunepath.publish.kernels SOCKET``)
that imports those modules once and then waits; each kernel is a ``fork()`` of it that goes
on exactly as ``python -m ipykernel_launcher -f CONNECTION_FILE`` would: in the notebook's
directory, with the environment jupyter_client prepared, its stderr in the build's kernel log,
in a session of its own. The notebook then finds its modules already imported. Nothing else
differs: a kernel forked this way has no state but those imports, and its notebook's outputs
are the same bytes.

jupyter_client still manages each kernel (:func:`tunepath.publish.notebooks.quiet_kernel_manager`
launches through :meth:`Preloaded.fork`): :class:`Forked` stands in for the ``Popen`` of a
kernel it started itself (alive or not, signals to its process group). Where forking is not
possible (another kernel command, no preloading process, a request that fails) the kernel
starts the ordinary way. The preloading process ends with the build, or with the process that
started it; a kernel ends when the preloading process does (ipykernel's parent poller).
"""

from __future__ import annotations

import json
import os
import shutil
import select
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

__all__ = ["ENV", "PRELOAD", "wanted", "Preloaded", "Forked", "serve"]

ENV = "TUNEPATH_PRELOAD_KERNELS"     # "0": every kernel starts the ordinary way

# what every replay notebook imports (a module that fails to import is skipped)
PRELOAD = ("ipykernel.kernelapp", "IPython.display", "tunepath.pipeline", "tunepath.publish.charts",
           "matplotlib.figure", "matplotlib.ticker", "matplotlib.backends.backend_svg",
           "tunepath.publish.hugo_data", "tunepath.analysis.compare", "tunepath.analysis.sweep",
           "jsonschema", "nbformat")
READY_TIMEOUT_S = 60.0


def wanted() -> bool:
    """Whether the build forks its kernels (not where ``$TUNEPATH_PRELOAD_KERNELS`` is 0, nor
    without ``fork``)."""
    return os.environ.get(ENV, "1").strip() != "0" and hasattr(os, "fork")


class Forked:
    """What jupyter_client needs of a kernel process (``subprocess.Popen``'s poll, wait and
    signals) for a kernel forked by the preloading process, which reaps it: it is alive until
    its pid file descriptor says it exited. Its exit status is not known (0)."""

    stdin = stdout = stderr = None

    def __init__(self, pid: int):
        self.pid = pid
        self.returncode: int | None = None
        self._fd: int | None = None
        try:
            self._fd = os.pidfd_open(pid)
        except ProcessLookupError:
            self.returncode = 0
        except (AttributeError, OSError):
            self._fd = None          # no pidfd here: ask the kernel with signal 0

    def poll(self) -> int | None:
        if self.returncode is not None:
            return self.returncode
        if self._fd is not None:
            if select.select([self._fd], [], [], 0)[0]:
                os.close(self._fd)
                self._fd, self.returncode = None, 0
        else:
            try:
                os.kill(self.pid, 0)
            except ProcessLookupError:
                self.returncode = 0
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        end = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if end is not None and time.monotonic() >= end:
                raise subprocess.TimeoutExpired(["forked kernel", str(self.pid)], timeout)
            time.sleep(0.02)
        return self.returncode

    def send_signal(self, signum: int) -> None:
        if self.poll() is None:
            os.kill(self.pid, signum)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


DIR_PREFIX = "tunepath-kernels-"        # then the building process's pid


def _forget_dead() -> None:
    """The socket directories of builds whose process is gone (a SIGKILLed build cannot remove its
    own), this user's only."""
    for old in Path(tempfile.gettempdir()).glob(f"{DIR_PREFIX}*"):
        pid = old.name[len(DIR_PREFIX):].split("-", 1)[0]
        try:
            if not pid.isdigit() or old.is_symlink() or old.stat().st_uid != os.getuid():
                continue
            os.kill(int(pid), 0)
        except ProcessLookupError:
            shutil.rmtree(old, ignore_errors=True)
        except OSError:
            continue


class Preloaded:
    """The build's preloading process (a context manager: it ends when the build's notebooks
    are done)."""

    def __init__(self, env: dict[str, str], log_path: Path, cwd: Path):
        _forget_dead()
        self.dir = Path(tempfile.mkdtemp(prefix=f"{DIR_PREFIX}{os.getpid()}-"))   # 0700; a short socket path
        self.socket = self.dir / "fork.sock"
        self.failed = False                    # not ready in time: every kernel starts the ordinary way
        Path(log_path).parent.mkdir(parents=True, exist_ok=True)
        with open(log_path, "ab") as log:
            self.process = subprocess.Popen([sys.executable, "-m", "tunepath.publish.kernels", str(self.socket)],
                                            stdin=subprocess.DEVNULL, stderr=log, cwd=str(cwd),
                                            env={**os.environ, **env})

    @classmethod
    def start(cls, env: dict[str, str], log_path: Path, cwd: Path) -> "Preloaded | None":
        """The preloading process, or None where it cannot start (kernels start the ordinary way)."""
        if not wanted():
            return None
        try:
            return cls(env, log_path, cwd)
        except OSError:
            return None

    def __enter__(self) -> "Preloaded":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        for path in (self.socket, self.dir):
            try:
                path.unlink() if path.is_socket() else path.rmdir()
            except OSError:
                pass

    def _connect(self) -> socket.socket | None:
        end = time.monotonic() + READY_TIMEOUT_S
        while not self.failed and self.process.poll() is None:
            conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                conn.connect(str(self.socket))
                return conn
            except (FileNotFoundError, ConnectionRefusedError):
                conn.close()
            if time.monotonic() >= end:
                self.failed = True
            time.sleep(0.02)
        return None

    def fork(self, kernel_cmd: list[str], kw: dict, log_path: str | None) -> Forked | None:
        """Fork a kernel for ``kernel_cmd`` (jupyter_client's launch: ``python -m
        ipykernel_launcher ARGS``) with the launch's ``cwd`` and ``env``; None where this kernel
        must start the ordinary way."""
        if (len(kernel_cmd) < 3 or kernel_cmd[1:3] != ["-m", "ipykernel_launcher"]
                or os.path.realpath(kernel_cmd[0]) != os.path.realpath(sys.executable)):
            return None
        request = {"argv": kernel_cmd[3:], "cwd": str(kw.get("cwd") or os.getcwd()),
                   "env": dict(kw.get("env") or os.environ), "stderr": log_path}
        conn = self._connect()
        if conn is None:
            return None
        try:
            with conn, conn.makefile("rwb") as stream:
                stream.write(json.dumps(request).encode() + b"\n")
                stream.flush()
                answer = json.loads(stream.readline() or b"{}")
        except (OSError, ValueError):
            return None
        return Forked(answer["pid"]) if isinstance(answer.get("pid"), int) else None


# --- the preloading process ---------------------------------------------------------------------

def _die_with_parent() -> None:
    """SIGTERM to this process when the build that started it ends (Linux)."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)    # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _kernel(request: dict) -> None:
    """In the forked child: become ``python -m ipykernel_launcher ARGS`` as jupyter_client asked."""
    code = 1
    try:
        os.setsid()
        for signum in (signal.SIGCHLD, signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, signal.SIG_DFL)
        if request.get("stderr"):
            fd = os.open(request["stderr"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            os.dup2(fd, 2)
            os.close(fd)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        from ipykernel import kernelapp

        # the launcher's argv; the parent poller watches the preloading process
        argv = [*request["argv"], f"--IPKernelApp.parent_handle={os.getppid()}"]
        sys.argv = [str(Path(kernelapp.__file__).parent.parent / "ipykernel_launcher.py"), *argv]
        kernelapp.launch_new_instance(argv=argv)
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 0
    except BaseException:                       # noqa: BLE001 - reported on the kernel's stderr
        import traceback

        traceback.print_exc()
    finally:
        try:
            import atexit

            atexit._run_exitfuncs()             # what a kernel's normal exit runs (IPython's history)
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


class _KernelShell:
    """What ``get_ipython()`` is inside a kernel, as far as a module asks at import time."""

    kernel = True


def _preload() -> None:
    """Import :data:`PRELOAD` as a kernel would. A module that looks at ``get_ipython()`` when
    imported must see a kernel's shell: pandas, for one, shows 20 columns of a table in a kernel,
    and sizes tables to the terminal elsewhere (``display.max_columns``)."""
    import builtins
    import importlib

    builtins.get_ipython = lambda: _KernelShell()         # kernels define it before any notebook import
    try:
        for name in PRELOAD:
            try:
                importlib.import_module(name)
            except Exception as exc:                      # noqa: BLE001 - imported by the kernel, or not
                print(f"tunepath kernels: not preloaded: {name}: {exc}", file=sys.stderr, flush=True)
    finally:
        del builtins.get_ipython                          # the kernel's shell defines its own


def serve(socket_path: str) -> None:
    """Import :data:`PRELOAD`, then fork a kernel for each request on ``socket_path``."""
    _die_with_parent()
    signal.signal(signal.SIGINT, signal.SIG_IGN)          # the build stops this process itself
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)         # kernels are reaped as they exit
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    if sys.path and (sys.path[0] in ("", os.getcwd())):
        del sys.path[0]                                   # as ipykernel_launcher does; IPython adds it back
    _preload()
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    tmp = f"{socket_path}.{os.getpid()}"
    server.bind(tmp)
    server.listen(16)
    os.replace(tmp, socket_path)                          # ready: clients connect from now on
    while True:
        conn, _ = server.accept()
        with conn, conn.makefile("rwb") as stream:
            try:
                request = json.loads(stream.readline())
            except ValueError:
                continue
            pid = os.fork()
            if pid == 0:
                server.close()
                stream.close()
                conn.close()
                _kernel(request)
            stream.write(json.dumps({"pid": pid}).encode() + b"\n")
            stream.flush()


if __name__ == "__main__":
    serve(sys.argv[1])
