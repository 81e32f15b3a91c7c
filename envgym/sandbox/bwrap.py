"""The embedded sandbox: Debian's bubblewrap (``bwrap``), one fresh bwrap per command.

Layout of one sandbox on the host (``$TMPDIR/envgym-sandbox-<pid>-<random>/``, root 0711)::

    owner           the pid of the Python process that made it (stale folders are reaped)
    workspace/      the repository copy, bound read-write at /workspace
    tmp/            bound read-write at /tmp (and $HOME): survives between commands
    etc/            generated passwd, group, hostname, hosts
    grade-<random>/ only during run_pytest: the JUnit XML is written there

Every command is ``bwrap --unshare-all --die-with-parent --new-session`` (empty network
namespace, own PID namespace whose init is bwrap, own user/IPC/UTS/cgroup namespaces) over a
read-only ``/usr`` (``/bin``, ``/lib``, ``/sbin`` are its symlinks), a chosen few ``/etc`` files,
an empty ``/usr/local`` and the sandbox's own ``/proc`` and minimal ``/dev``; nothing else of the
host (no ``/root``, ``/home``, ``/work``, no host ``/proc``). A small bash launcher sets the
limits with ``ulimit`` (CPU, address space, processes, file size, no core files) and execs
``bash -c COMMAND``. When the command ends, or at the timeout (the outer bwrap is killed), the
PID namespace's init dies and the kernel kills every process in it: nothing outlives a command.

When envgym runs as root, bwrap itself runs as ``nobody`` (uid 65534): an unprivileged user
namespace then maps the sandbox user to ``nobody`` on the host, so the sandbox holds no host
capability and ``RLIMIT_NPROC`` is enforced (the kernel ignores it for host root), counted per
command in its own user namespace.
"""

from __future__ import annotations

import json
import os
import secrets
import selectors
import shutil
import signal
import subprocess
import tempfile
import time
import weakref
from collections.abc import Mapping, Sequence
from pathlib import Path

from envgym.errors import ConfigError, MissingDependencyError
from envgym.sandbox._prepare import prepare_workspace
from envgym.sandbox.base import (
    BASE_ENV,
    PYTEST_WRAPPER,
    READ_CHUNK,
    CommandResult,
    Limits,
    OutputSink,
    PytestRun,
    Sandbox,
    check_command,
    check_relpath,
    check_restore,
    check_test_ids,
    command_timeout,
    describe_end,
    elapsed,
    grading_path,
    parse_junit,
    pid_alive,
    pytest_argv,
    refused,
)

__all__ = ["BwrapSandbox", "bwrap_path"]

INSTALL_HINT = "apt-get install bubblewrap (scripts/setup.sh does it)"
#: The host user bwrap runs as when envgym runs as root.
NOBODY = 65534
#: The user and group commands see inside the sandbox.
SANDBOX_UID = 1000
#: /etc entries bound read-only when present (what bash, python3, git and the loader need).
ETC_FILES = (
    "alternatives",
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "localtime",
    "nsswitch.conf",
    "bash.bashrc",
    "inputrc",
    "profile",
    "mime.types",
    "python3",
    "python3.11",
    "debian_version",
    "os-release",
)
PREFIX = "envgym-sandbox-"
_reaped = False


def bwrap_path() -> str | None:
    """The ``bwrap`` executable on ``PATH``, or None."""
    return shutil.which("bwrap")


def _reap_stale(parent: Path) -> int:
    """Delete sandbox folders whose owning process is gone (a crash skipped their cleanup)."""
    removed = 0
    for folder in parent.glob(PREFIX + "*"):
        try:
            owner = int((folder / "owner").read_text())
        except (OSError, ValueError):
            continue
        if not pid_alive(owner):
            shutil.rmtree(folder, ignore_errors=True)
            removed += 1
    return removed


def _cleanup(root: str, procs: set[subprocess.Popen[bytes]]) -> None:
    for proc in list(procs):
        _kill(proc)
    shutil.rmtree(root, ignore_errors=True)


def _kill(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the outer bwrap: its child (the namespace's init, --die-with-parent) dies with it
    and the kernel then kills every process of the namespace."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:  # pragma: no cover - SIGKILL is not ignorable
        pass


def _wait_namespace_gone(info_fd: int, limit: float = 10.0) -> None:
    """Wait until the init of a finished command's PID namespace has exited: the kernel kills
    and reaps every other process of the namespace before that init can exit."""
    with os.fdopen(info_fd, "rb") as info:
        data = info.read()
    try:
        pid = int(json.loads(data)["child-pid"])
    except (ValueError, KeyError, TypeError):
        return  # bwrap failed before starting the namespace: nothing ran
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0]
        except (OSError, IndexError):
            return
        if state in ("Z", "X"):
            return
        time.sleep(0.001)


class BwrapSandbox(Sandbox):
    """A bubblewrap sandbox (see the module docstring for what is isolated and how)."""

    kind = "bwrap"

    @classmethod
    def reap(cls) -> int:
        """Delete sandbox folders left by processes that died before closing them; returns how many."""
        return _reap_stale(Path(tempfile.gettempdir()))

    @classmethod
    def unavailable_reason(cls) -> str | None:
        if bwrap_path() is None:
            return f"bubblewrap (bwrap) is not installed or not on PATH: {INSTALL_HINT}"
        return None

    def __init__(
        self,
        source: Path | str,
        *,
        overlay: Mapping[str, bytes] = {},
        image: str | None = None,
        limits: Limits = Limits(),  # noqa: B008 - frozen
        env: Mapping[str, str] = {},
    ) -> None:
        exe = bwrap_path()
        if exe is None:
            err = MissingDependencyError("bubblewrap", "swe", "The bwrap sandbox")
            message = (
                "The bwrap sandbox needs bubblewrap (the `bwrap` program), which is not installed or not on "
                f"PATH. Install it with: {INSTALL_HINT}."
            )
            err.args = (message,)
            err.msg = message  # ImportError.__str__ prints .msg
            raise err
        if not isinstance(limits, Limits):
            raise ConfigError(f"limits must be an envgym.sandbox.Limits, got {type(limits).__name__}.")
        if image is not None and not isinstance(image, str):
            raise ConfigError(f"image must be a string or None, got {image!r}.")
        source = Path(source)
        if not source.is_dir():
            raise ConfigError(f"the sandbox source must be an existing folder, got {str(source)!r}.")
        extra_env = dict(env)
        for key, value in extra_env.items():
            if not isinstance(key, str) or not isinstance(value, str) or not key or "=" in key or "\x00" in key + value:
                raise ConfigError(f"env must map variable names to strings, got {key!r}: {value!r}.")
        overlay = {str(check_relpath(rel)): bytes(data) for rel, data in overlay.items()}

        global _reaped
        parent = Path(tempfile.gettempdir())
        if not _reaped:
            _reaped = True
            _reap_stale(parent)
        self._bwrap = exe
        self.limits = limits
        self._as_root = os.geteuid() == 0
        self._owner = (NOBODY, NOBODY) if self._as_root else None
        self._procs: set[subprocess.Popen[bytes]] = set()
        root = Path(tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-", dir=parent))
        self._root = root
        self._finalizer = weakref.finalize(self, _cleanup, str(root), self._procs)
        try:
            (root / "owner").write_text(str(os.getpid()))
            os.chmod(root, 0o711)
            self._workspace = root / "workspace"
            shutil.copytree(source, self._workspace, symlinks=True)
            for rel, data in overlay.items():
                self._write(rel, data)
            (root / "tmp").mkdir(mode=0o700)
            etc = root / "etc"
            etc.mkdir()
            (etc / "passwd").write_text(
                f"root:x:0:0:root:/root:/usr/sbin/nologin\nagent:x:{SANDBOX_UID}:{SANDBOX_UID}::/tmp:/bin/bash\n"
                "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
            )
            (etc / "group").write_text(f"root:x:0:\nagent:x:{SANDBOX_UID}:\nnogroup:x:65534:\n")
            (etc / "hostname").write_text("sandbox\n")
            (etc / "hosts").write_text("127.0.0.1 localhost sandbox\n::1 localhost\n")
            if self._owner is not None:
                self._chown_tree(self._workspace)
                os.chown(root / "tmp", *self._owner)
        except BaseException:
            self.close()
            raise
        self._env = {**BASE_ENV, **extra_env}
        self._base_args = self._mount_args()

    # ------------------------------------------------------------------ host side
    def _chown_tree(self, top: Path) -> None:
        assert self._owner is not None
        os.chown(top, *self._owner, follow_symlinks=False)
        for folder, dirs, files in os.walk(top):
            for name in dirs + files:
                os.chown(os.path.join(folder, name), *self._owner, follow_symlinks=False)

    def _host_path(self, relpath: str) -> Path:
        """The host path of a workspace file, refused when a symlink leads it outside (no agent
        process is alive between commands, so the check cannot be raced)."""
        rel = check_relpath(relpath)
        path = self._workspace / rel
        real = Path(os.path.realpath(path))
        ws = Path(os.path.realpath(self._workspace))
        if real != ws and ws not in real.parents:
            raise PermissionError(f"{relpath!r} leads outside the workspace (a symlink to {str(real)!r}).")
        return path

    def _write(self, relpath: str, data: bytes) -> None:
        path = self._host_path(relpath)
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.is_symlink():
            path.unlink()
        path.write_bytes(data)
        if self._owner is not None:
            ws = self._workspace
            for folder in [path, *path.parents]:
                if folder == ws or ws not in folder.parents:
                    break
                os.chown(folder, *self._owner, follow_symlinks=False)

    def read_file(self, relpath: str) -> bytes:
        self._check_open()
        return self._host_path(relpath).read_bytes()

    def write_file(self, relpath: str, data: bytes) -> None:
        self._check_open()
        if not isinstance(data, (bytes, bytearray)):
            raise ConfigError(f"write_file needs bytes, got {type(data).__name__}.")
        self._write(relpath, bytes(data))

    # ------------------------------------------------------------------ commands
    def _mount_args(self) -> list[str]:
        args = [
            self._bwrap,
            "--unshare-all",
            "--die-with-parent",
            "--new-session",
            "--cap-drop",
            "ALL",
            "--uid",
            str(SANDBOX_UID),
            "--gid",
            str(SANDBOX_UID),
            "--hostname",
            "sandbox",
            "--ro-bind",
            "/usr",
            "/usr",
            "--tmpfs",
            "/usr/local",
            "--remount-ro",
            "/usr/local",
        ]
        for name in ("bin", "lib", "lib64", "sbin", "lib32", "libx32"):
            host = Path("/") / name
            if host.is_symlink():
                args += ["--symlink", os.readlink(host), f"/{name}"]
            elif host.is_dir():
                args += ["--ro-bind", str(host), f"/{name}"]
        for name in ETC_FILES:
            if os.path.lexists(f"/etc/{name}"):
                args += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
        for name in ("passwd", "group", "hostname", "hosts"):
            args += ["--ro-bind", str(self._root / "etc" / name), f"/etc/{name}"]
        args += [
            "--proc",
            "/proc",
            "--dev",
            "/dev",
            "--bind",
            str(self._root / "tmp"),
            "/tmp",
            "--bind",
            str(self._workspace),
            self.workdir,
            "--chdir",
            self.workdir,
            "--clearenv",
        ]
        return args

    def _launcher(self, cpu_seconds: int) -> list[str]:
        limits = self.limits
        script = (
            f"ulimit -c 0 && ulimit -f {limits.file_size_mb * 1024} && ulimit -v {limits.memory_mb * 1024} "
            f"&& ulimit -u {limits.processes} && ulimit -S -t {cpu_seconds} && ulimit -H -t {cpu_seconds + 1} "
            '&& exec /bin/bash -c "$1"'
        )
        return ["/bin/bash", "-c", script, "envgym-sandbox"]

    def _spawn(
        self, command: str, timeout: float, env: Mapping[str, str], binds: Sequence[str] = (), cpu_seconds: int = 0
    ) -> tuple[int | None, bool, OutputSink, float]:
        started = time.perf_counter()
        args = list(self._base_args)
        for key, value in env.items():
            args += ["--setenv", key, value]
        args += list(binds)
        args += ["--remount-ro", "/"]  # the root (bwrap's tmpfs with the mount points) is read-only too
        args += ["--", *self._launcher(cpu_seconds or self.limits.cpu_seconds), command]
        sink = OutputSink(self.limits.max_output_bytes)
        # bwrap reports the host pid of the namespace's init on --info-fd: the namespace is gone
        # (every process in it dead) once that init has exited, which the outer bwrap does not wait for.
        info_read, info_write = os.pipe()
        args[1:1] = ["--info-fd", str(info_write)]
        try:
            proc = subprocess.Popen(
                args,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                close_fds=True,
                pass_fds=(info_write,),
                user=self._owner[0] if self._owner else None,
                group=self._owner[1] if self._owner else None,
                extra_groups=[] if self._owner else None,
                env={"PATH": os.defpath},
            )
        except BaseException:
            os.close(info_read)
            raise
        finally:
            os.close(info_write)
        self._procs.add(proc)
        timed_out = False
        try:
            assert proc.stdout is not None
            fd = proc.stdout.fileno()
            deadline = started + timeout
            with selectors.DefaultSelector() as selector:
                selector.register(fd, selectors.EVENT_READ)
                while True:
                    left = deadline - time.perf_counter()
                    if left <= 0:
                        timed_out = True
                        _kill(proc)
                        break
                    if not selector.select(left):
                        continue
                    chunk = os.read(fd, READ_CHUNK)
                    if not chunk:
                        break
                    sink.write(chunk)
            # After a kill the namespace is gone: the pipe reaches end of file at once.
            while chunk := os.read(fd, READ_CHUNK):
                sink.write(chunk)
            proc.stdout.close()
            code = proc.wait()
        finally:
            if proc.poll() is None:
                _kill(proc)
            self._procs.discard(proc)
            _wait_namespace_gone(info_read)
        return (None if timed_out else code), timed_out, sink, elapsed(started)

    def run(self, command: str, *, timeout: float | None = None) -> CommandResult:
        self._check_open()
        seconds = command_timeout(self.limits, timeout)
        why = check_command(command)
        if why is not None:
            return refused(why)
        code, timed_out, sink, took = self._spawn(command, seconds, self._env)
        note = describe_end(code, timed_out, seconds, sink, self.limits, self.limits.cpu_seconds)
        return CommandResult(sink.text(), code, timed_out, sink.total, sink.truncated, took, note)

    def run_pytest(
        self,
        test_ids: Sequence[str],
        *,
        restore: Mapping[str, bytes],
        pythonpath: Sequence[str] = (),
        timeout: float = 300.0,
        per_test_timeout: float | None = None,
    ) -> PytestRun:
        self._check_open()
        ids = check_test_ids(test_ids)
        restore = check_restore(restore)
        seconds = command_timeout(self.limits, timeout)
        entries = grading_path(self.workdir, pythonpath)
        started = time.perf_counter()
        for proc in list(self._procs):  # nothing should be alive between commands; make sure
            _kill(proc)
        prepare_workspace(self._workspace, restore, self._owner)
        private = Path(tempfile.mkdtemp(prefix="grade-", dir=self._root))
        inside = f"/.grading-{secrets.token_hex(8)}"
        try:
            if self._owner is not None:
                os.chown(private, *self._owner)
            spec = {
                "argv": pytest_argv(ids, f"{inside}/report.xml", self.workdir, per_test_timeout),
                "path": entries,
            }
            (private / "spec.json").write_text(json.dumps(spec))
            (private / "wrapper.py").write_text(PYTEST_WRAPPER)
            env = {**self._env, "PYTHONDONTWRITEBYTECODE": "1"}
            command = f"exec /usr/bin/python3 -I {inside}/wrapper.py {inside}/spec.json"
            binds = ["--bind", str(private), inside]
            code, timed_out, sink, _ = self._spawn(
                command, seconds, env, binds, cpu_seconds=max(self.limits.cpu_seconds, int(seconds) + 1)
            )
            report = private / "report.xml"
            outcomes: dict[str, str] = {}
            report_ok = False
            if report.is_file() and not report.is_symlink():
                try:
                    outcomes = parse_junit(report.read_bytes(), ids)
                    report_ok = True
                except Exception:  # noqa: BLE001 - any unreadable report is "no report"
                    report_ok = False
        finally:
            shutil.rmtree(private, ignore_errors=True)
        tail = sink.text()[-4000:]
        if timed_out:
            tail += f"\n[envgym: pytest killed at the {seconds:g} s timeout]"
        return PytestRun(code, outcomes, report_ok, elapsed(started), tail)

    def __repr__(self) -> str:
        state = "closed" if self.closed else str(self._root)
        return f"BwrapSandbox({state})"
