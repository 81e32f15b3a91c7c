"""The embedded sandbox: Debian's bubblewrap (``bwrap``), one fresh bwrap per command.

Layout of one sandbox on the host (``$TMPDIR/envgym-sandbox-<pid>-<random>/``, root 0711)::

    owner           the pid of the Python process that made it (stale folders are reaped)
    box/            a tmpfs of ``Limits.disk_mb`` and ``Limits.inodes`` (as root; else a folder)
      workspace/    the repository copy, bound read-write at /workspace
      tmp/          bound read-write at /tmp (and $HOME): survives between commands
    etc/            generated passwd, group, hostname, hosts
    grade-<random>/ only during run_pytest: the grading copy and the JUnit XML

Every command is ``bwrap --unshare-all --unshare-user --disable-userns --die-with-parent
--new-session --seccomp`` (empty network namespace, own PID namespace whose init is bwrap, own
user/IPC/UTS/cgroup namespaces, no nested user namespaces) over a read-only system taken from
:func:`sandbox_rootfs`, the minimal Debian the Docker images are made of (``/usr``, the loader's
links and a chosen few ``/etc`` files), an empty ``/usr/local`` and the sandbox's own ``/proc``
and minimal ``/dev``; nothing of the host. Without that root file system the host's ``/usr`` is
used with its ``dist-packages`` holding only pytest and what it imports (the host's other Python
packages, six among them, would be answers to the tasks). A small bash
launcher sets per-process limits with ``ulimit`` (CPU, address space, processes, file size, no
core files) and execs ``bash -c COMMAND``.

**Nothing outlives its command.** Three layers, each enough on its own:

* the seccomp filter (:mod:`envgym.sandbox._seccomp`) refuses ``ptrace`` and the other calls a
  process could use to steer the namespace's init (turning off its die-with-parent) or to make
  a namespace of its own;
* the PID namespace: when its init dies (the command ended, or envgym kills it at the timeout or
  at close), the kernel kills every process in it;
* as root, every sandbox has its own cgroup (:mod:`envgym.sandbox._cgroup`; v2, v1 or both),
  joined before bwrap starts, holding ``Limits.memory_mb`` (plus ``Limits.disk_mb``: the
  workspace's tmpfs is RAM charged to the same group) and ``Limits.processes`` for all its
  processes together and killed as a whole (``cgroup.kill``, else signal by signal until empty)
  at the end of every command and at close.

When envgym runs as root, bwrap itself runs as ``nobody`` (uid 65534): an unprivileged user
namespace then maps the sandbox user to ``nobody`` on the host, so the sandbox holds no host
capability and ``RLIMIT_NPROC`` is enforced (the kernel ignores it for host root).

**Grading** (:meth:`BwrapSandbox.run_pytest`) kills the sandbox's processes, copies the workspace
through directory descriptors without following links (:func:`envgym.sandbox._prepare.grading_copy`:
no host operation by path name inside the agent's folders) into a fresh folder, and runs pytest
in a fresh bwrap over that copy with a fresh ``/tmp``.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
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
from envgym.sandbox import _cgroup, _seccomp
from envgym.sandbox._prepare import CopyLimitError, grading_copy, read_regular, remove_tree, write_regular
from envgym.sandbox.base import (
    BASE_ENV,
    GRADING_ENV,
    PYTEST_WRAPPER,
    READ_CHUNK,
    CommandResult,
    Limits,
    OutputSink,
    PytestRun,
    Sandbox,
    canary,
    check_command,
    check_relpath,
    check_restore,
    check_test_ids,
    command_timeout,
    describe_end,
    elapsed,
    grading_path,
    grading_run,
    parse_junit,
    pid_alive,
    pytest_argv,
    refused,
)

__all__ = ["DEFAULT_ROOTFS", "BwrapSandbox", "bwrap_path", "sandbox_rootfs"]

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
#: The system Python's package folder: hidden in the sandbox but for pytest and what it imports.
DIST_PACKAGES = "/usr/lib/python3/dist-packages"
#: Other host folders holding Python packages, hidden (Debian's pip wheels carry six, for one).
HIDDEN_FOLDERS = ("/usr/share/python-wheels",)
#: What the sandbox's pytest needs from DIST_PACKAGES (found by importing them once).
PYTEST_MODULES = ("pytest", "pytest_timeout")
PREFIX = "envgym-sandbox-"
MNT_DETACH = 2
#: Where the sandbox's system comes from: a Debian root file system (the one the Docker images
#: are made of, kept by ``python -m envgym.environments.swe.images build``); "host" forces the
#: host's own /usr with its Python packages hidden.
ROOTFS_ENV = "ENVGYM_SANDBOX_ROOTFS"
DEFAULT_ROOTFS = "/var/lib/envgym/rootfs-bookworm"


def sandbox_rootfs() -> Path | None:
    """The root file system bwrap sandboxes are built from, or None for the host's /usr."""
    chosen = os.environ.get(ROOTFS_ENV, DEFAULT_ROOTFS)
    if chosen == "host":
        return None
    root = Path(chosen)
    return root if (root / "usr" / "bin" / "python3").exists() else None


_reaped = False


def bwrap_path() -> str | None:
    """The ``bwrap`` executable on ``PATH``, or None."""
    return shutil.which("bwrap")


@functools.lru_cache(maxsize=1)
def _bwrap_options() -> frozenset[str]:
    """Which optional bwrap flags this bwrap knows (``--disable-userns`` came in 0.8)."""
    exe = bwrap_path()
    if exe is None:
        return frozenset()
    try:
        text = subprocess.run([exe, "--help"], capture_output=True, timeout=10, check=False).stdout.decode()
    except (OSError, subprocess.TimeoutExpired):
        return frozenset()
    return frozenset(flag for flag in ("--disable-userns", "--seccomp", "--unshare-user") if flag in text)


@functools.lru_cache(maxsize=1)
def _pytest_entries() -> tuple[str, ...]:
    """Top-level entries of DIST_PACKAGES that ``/usr/bin/python3`` imports for pytest (and their
    metadata folders): the only ones a sandbox sees."""
    probe = (
        "import importlib, json, sys\n"
        f"for name in {PYTEST_MODULES!r}:\n"
        "    try:\n        importlib.import_module(name)\n    except ImportError:\n        pass\n"
        "print(json.dumps(sorted({getattr(m, '__file__', None) or '' for m in list(sys.modules.values())})))\n"
    )
    try:
        proc = subprocess.run(["/usr/bin/python3", "-I", "-c", probe], capture_output=True, timeout=60, check=False)
        files = json.loads(proc.stdout or b"[]")
    except (OSError, ValueError, subprocess.TimeoutExpired):
        return ()
    prefix = DIST_PACKAGES + "/"
    tops = {f[len(prefix) :].split("/", 1)[0] for f in files if f.startswith(prefix)}
    tops.discard("__pycache__")
    names = {t.split(".", 1)[0].lower().replace("-", "_") for t in tops}
    try:
        listing = os.listdir(DIST_PACKAGES)
    except OSError:
        return tuple(sorted(tops))
    for entry in listing:
        if entry.endswith((".dist-info", ".egg-info")) and entry.split("-", 1)[0].lower().replace("-", "_") in names:
            tops.add(entry)
    return tuple(sorted(tops))


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _mount_tmpfs(target: Path, size_mb: int, inodes: int) -> bool:
    """Mount a tmpfs of ``size_mb`` MiB and ``inodes`` entries at ``target`` (root only)."""
    options = f"size={size_mb}m,nr_inodes={inodes},mode=0711".encode()
    return _libc().mount(b"tmpfs", str(target).encode(), b"tmpfs", 0, options) == 0


def _unmount(target: Path) -> None:
    with contextlib.suppress(OSError, AttributeError):
        _libc().umount2(str(target).encode(), MNT_DETACH)


def _mounted_below(folder: Path) -> list[Path]:
    """Mount points at or below ``folder`` (deepest first), from /proc/self/mountinfo."""
    found: list[Path] = []
    prefix = str(folder)
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            point = line.split()[4].replace("\\040", " ")
            if point == prefix or point.startswith(prefix + "/"):
                found.append(Path(point))
    return sorted(found, key=lambda p: len(p.parts), reverse=True)


def _remove_root(root: str) -> None:
    for point in _mounted_below(Path(root)):
        _unmount(point)
    with contextlib.suppress(OSError):
        remove_tree(root)


def _reap_stale(parent: Path) -> int:
    """Delete sandbox folders (and cgroups) whose owning process is gone (a crash skipped their cleanup)."""
    removed = 0
    for folder in parent.glob(PREFIX + "*"):
        try:
            owner = int((folder / "owner").read_text())
        except (OSError, ValueError):
            continue
        if not pid_alive(owner):
            _remove_root(str(folder))
            removed += 1
    _cgroup.reap_stale()
    return removed


class _Namespace:
    """The init of one command's PID namespace, from bwrap's ``--info-fd`` report."""

    def __init__(self) -> None:
        self.pid: int | None = None
        self.started: str | None = None
        self.buffer = b""

    def feed(self, data: bytes) -> None:
        self.buffer += data
        if self.pid is None:
            with contextlib.suppress(ValueError, KeyError, TypeError):
                self.pid = int(json.loads(self.buffer)["child-pid"])
                self.started = _start_time(self.pid)

    def alive(self) -> bool:
        if self.pid is None:
            return False
        return self.started is not None and _start_time(self.pid) == self.started

    def kill(self) -> None:
        """SIGKILL the init (the kernel then kills the whole namespace), if it is still that process."""
        if self.alive():
            assert self.pid is not None
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(self.pid, signal.SIGKILL)

    def wait_gone(self, limit: float = 10.0) -> None:
        """Wait until the init has exited: the kernel kills and reaps every other process of the
        namespace before that init can exit."""
        deadline = time.monotonic() + limit
        while self.pid is not None and time.monotonic() < deadline:
            state = _state(self.pid)
            if state is None or state in ("Z", "X") or not self.alive():
                return
            time.sleep(0.001)


def _stat_fields(pid: int) -> list[str] | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()
    except (OSError, IndexError):
        return None


def _state(pid: int) -> str | None:
    fields = _stat_fields(pid)
    return fields[0] if fields else None


def _start_time(pid: int) -> str | None:
    fields = _stat_fields(pid)
    return fields[19] if fields and len(fields) > 19 else None


def _cleanup(root: str, procs: set[subprocess.Popen[bytes]], groups: _cgroup.CgroupSet | None) -> None:
    for proc in list(procs):
        _kill(proc)
    if groups is not None:
        groups.remove()
    _remove_root(root)


def _kill(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the outer bwrap's process group (its child, the namespace's init, has
    die-with-parent: with ptrace refused nothing can turn that off)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:  # pragma: no cover - SIGKILL is not ignorable
        pass


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
        # the workspace's tmpfs is RAM charged to the same group: it gets its own disk_mb on top, so a
        # full disk never leaves the processes without memory (nor a memory hog without disk)
        memory = (limits.memory_mb + limits.disk_mb) << 20
        self._groups = _cgroup.create(memory, limits.processes + 8) if self._as_root else None
        self._seccomp = _seccomp.filter_program() if "--seccomp" in _bwrap_options() else None
        rootfs = sandbox_rootfs()
        self._system = str(rootfs) if rootfs is not None else ""
        root = Path(tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-", dir=parent))
        self._root = root
        self._finalizer = weakref.finalize(self, _cleanup, str(root), self._procs, self._groups)
        try:
            (root / "owner").write_text(str(os.getpid()))
            os.chmod(root, 0o711)
            box = root / "box"
            box.mkdir(mode=0o711)
            self._quota = self._as_root and _mount_tmpfs(box, limits.disk_mb, limits.inodes)
            self._workspace = box / "workspace"
            self._tmp = box / "tmp"
            shutil.copytree(source, self._workspace, symlinks=True)
            for rel, data in overlay.items():
                write_regular(str(self._workspace), rel, data)
            self._tmp.mkdir(mode=0o700)
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
                os.chown(self._tmp, *self._owner)
        except BaseException:
            self.close()
            raise
        self._env = {**BASE_ENV, **extra_env}
        self._base_args = self._system_args()

    def isolation(self) -> dict[str, object]:
        """What holds this sandbox, in words and flags (for logs, ``envgym info`` and tests)."""
        return {
            "seccomp": self._seccomp is not None,
            "nested_userns": "--disable-userns" not in _bwrap_options(),
            "cgroup": _cgroup.available() if self._groups is not None else None,
            "memory_limit": "cgroup" if self._groups is not None and self._groups.memory_limited else "per process",
            "disk_quota": bool(self._quota),
            "system": self._system or "host /usr (its Python packages hidden but pytest's)",
        }

    # ------------------------------------------------------------------ host side
    def _chown_tree(self, top: Path) -> None:
        assert self._owner is not None
        os.chown(top, *self._owner, follow_symlinks=False)
        for folder, dirs, files in os.walk(top):
            for name in dirs + files:
                os.chown(os.path.join(folder, name), *self._owner, follow_symlinks=False)

    def read_file(self, relpath: str) -> bytes:
        """A workspace file, read through directory descriptors (no link followed, a FIFO or device
        refused, never a blocking open) and at most ``Limits.file_size_mb``."""
        self._check_open()
        rel = str(check_relpath(relpath))
        return read_regular(str(self._workspace), rel, self.limits.file_size_mb << 20)

    def write_file(self, relpath: str, data: bytes) -> None:
        self._check_open()
        if not isinstance(data, (bytes, bytearray)):
            raise ConfigError(f"write_file needs bytes, got {type(data).__name__}.")
        rel = str(check_relpath(relpath))
        write_regular(str(self._workspace), rel, bytes(data), self._owner)

    # ------------------------------------------------------------------ commands
    def _system_args(self) -> list[str]:
        """bwrap and the mounts every command of this sandbox shares (built once, at the start)."""
        options = _bwrap_options()
        system = self._system
        args = [self._bwrap, "--unshare-all"]
        if "--unshare-user" in options:
            args.append("--unshare-user")
            if "--disable-userns" in options:
                args.append("--disable-userns")
        args += [
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
            f"{system}/usr",
            "/usr",
            "--tmpfs",
            "/usr/local",
            "--remount-ro",
            "/usr/local",
        ]
        if system == "" and os.path.isdir(DIST_PACKAGES):  # the host's /usr: hide its Python packages
            args += ["--tmpfs", DIST_PACKAGES]
            for entry in _pytest_entries():
                args += ["--ro-bind", f"{DIST_PACKAGES}/{entry}", f"{DIST_PACKAGES}/{entry}"]
            args += ["--remount-ro", DIST_PACKAGES]
            for folder in HIDDEN_FOLDERS:
                if os.path.isdir(folder):
                    args += ["--tmpfs", folder, "--remount-ro", folder]
        for name in ("bin", "lib", "lib64", "sbin", "lib32", "libx32"):
            host = Path(f"{system}/{name}")
            if host.is_symlink():
                args += ["--symlink", os.readlink(host), f"/{name}"]
            elif host.is_dir():
                args += ["--ro-bind", str(host), f"/{name}"]
        for name in ETC_FILES:
            if os.path.lexists(f"{system}/etc/{name}"):
                args += ["--ro-bind-try", f"{system}/etc/{name}", f"/etc/{name}"]
        for name in ("passwd", "group", "hostname", "hosts"):
            args += ["--ro-bind", str(self._root / "etc" / name), f"/etc/{name}"]
        return [*args, "--proc", "/proc", "--dev", "/dev", "--chdir", self.workdir, "--clearenv"]

    def _launcher(self, cpu_seconds: int) -> list[str]:
        limits = self.limits
        script = (
            f"ulimit -c 0 && ulimit -f {limits.file_size_mb * 1024} && ulimit -v {limits.memory_mb * 1024} "
            f"&& ulimit -u {limits.processes} && ulimit -S -t {cpu_seconds} && ulimit -H -t {cpu_seconds + 1} "
            '&& exec /bin/bash -c "$1"'
        )
        return ["/bin/bash", "-c", script, "envgym-sandbox"]

    def _kill_everything(self) -> None:
        """Kill every process this sandbox has: any command still running and the whole cgroup."""
        for proc in list(self._procs):
            _kill(proc)
        if self._groups is not None:
            self._groups.kill()

    def _spawn(
        self,
        command: str,
        timeout: float,
        env: Mapping[str, str],
        *,
        workspace: Path | None = None,
        tmp: Path | None = None,
        binds: Sequence[str] = (),
        cpu_seconds: int = 0,
    ) -> tuple[int | None, bool, OutputSink, float, str]:
        started = time.perf_counter()
        args = [*self._base_args, "--bind", str(tmp or self._tmp), "/tmp", "--bind", str(workspace or self._workspace)]
        args.append(self.workdir)
        for key, value in env.items():
            args += ["--setenv", key, value]
        args += list(binds)
        args += ["--remount-ro", "/"]  # the root (bwrap's tmpfs with the mount points) is read-only too
        sink = OutputSink(self.limits.max_output_bytes)
        # bwrap reports the host pid of the namespace's init on --info-fd: the namespace is gone
        # (every process in it dead) once that init has exited, which the outer bwrap does not wait for.
        info_read, info_write = os.pipe()
        fds = [info_write]
        head = [args[0], "--info-fd", str(info_write)]
        if self._seccomp is not None:
            seccomp_fd = _seccomp.memfd_with(self._seccomp)
            fds.append(seccomp_fd)
            head += ["--seccomp", str(seccomp_fd)]
        argv = [*head, *args[1:], "--", *self._launcher(cpu_seconds or self.limits.cpu_seconds), command]
        owner = self._owner
        if self._groups is not None:
            argv = self._groups.launcher(argv, uid=owner[0] if owner else None, gid=owner[1] if owner else None)
            owner = None  # setpriv switches user after the shell joined the cgroups
        namespace = _Namespace()
        try:
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                close_fds=True,
                pass_fds=tuple(fds),
                user=owner[0] if owner else None,
                group=owner[1] if owner else None,
                extra_groups=[] if owner else None,
                env={"PATH": os.defpath},
            )
        except BaseException:
            os.close(info_read)
            raise
        finally:
            for fd in fds:
                os.close(fd)
        self._procs.add(proc)
        timed_out = False
        try:
            assert proc.stdout is not None
            fd = proc.stdout.fileno()
            deadline = started + timeout
            with selectors.DefaultSelector() as selector:
                selector.register(fd, selectors.EVENT_READ)
                selector.register(info_read, selectors.EVENT_READ)
                while True:
                    left = deadline - time.perf_counter()
                    if left <= 0:
                        timed_out = True
                        _kill(proc)
                        namespace.kill()
                        break
                    ready = selector.select(left)
                    done = False
                    for key, _ in ready:
                        chunk = os.read(key.fd, READ_CHUNK)
                        if key.fd == info_read:
                            if chunk:
                                namespace.feed(chunk)
                            else:
                                selector.unregister(info_read)
                        elif chunk:
                            sink.write(chunk)
                        else:
                            done = True
                    if done:
                        break
            # After a kill the namespace is gone: the pipe reaches end of file at once.
            while chunk := os.read(fd, READ_CHUNK):
                sink.write(chunk)
            proc.stdout.close()
            code = proc.wait()
        finally:
            if proc.poll() is None:
                _kill(proc)
            self._procs.discard(proc)
            with contextlib.suppress(OSError):
                while chunk := os.read(info_read, READ_CHUNK):
                    namespace.feed(chunk)
            os.close(info_read)
            # Nothing outlives the command: its namespace's init, then anything left in the cgroup.
            namespace.kill()
            namespace.wait_gone()
            if self._groups is not None:
                self._groups.kill()
        extra = ""
        if self._groups is not None and self._groups.oom_kills():
            limits = self.limits
            extra = (
                f"memory limit ({limits.memory_mb} MiB for the whole sandbox, plus the {limits.disk_mb} MiB its "
                "files may use) reached: a process was killed"
            )
        return (None if timed_out else code), timed_out, sink, elapsed(started), extra

    def run(self, command: str, *, timeout: float | None = None) -> CommandResult:
        self._check_open()
        seconds = command_timeout(self.limits, timeout)
        why = check_command(command)
        if why is not None:
            return refused(why)
        code, timed_out, sink, took, extra = self._spawn(command, seconds, self._env)
        note = describe_end(code, timed_out, seconds, sink, self.limits, self.limits.cpu_seconds)
        note = "; ".join(n for n in (note, extra) if n)
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
        self._kill_everything()  # nothing of the agent's runs while its files are copied
        canary_rel, canary_id, canary_source = canary(ids)
        private = Path(tempfile.mkdtemp(prefix="grade-", dir=self._root))
        os.chmod(private, 0o711)  # bwrap (as nobody) must reach the folders it binds
        inside = f"/.grading-{secrets.token_hex(8)}"
        try:
            copy, tmp, report_dir = private / "workspace", private / "tmp", private / "report"
            try:
                grading_copy(str(self._workspace), str(copy), {**restore, canary_rel: canary_source}, owner=self._owner)
            except CopyLimitError as err:
                return PytestRun(None, {}, False, elapsed(started), "", untrusted=f"not gradable: {err}")
            tmp.mkdir(mode=0o700)
            report_dir.mkdir(mode=0o700)
            if self._owner is not None:
                os.chown(tmp, *self._owner)
                os.chown(report_dir, *self._owner)
            spec = {
                "argv": pytest_argv([*ids, canary_id], f"{inside}/report.xml", self.workdir, per_test_timeout),
                "path": entries,
            }
            (report_dir / "spec.json").write_text(json.dumps(spec))
            (report_dir / "wrapper.py").write_text(PYTEST_WRAPPER)
            env = {**self._env, **GRADING_ENV}
            env.pop("PYTHONPATH", None)
            command = f"exec /usr/bin/python3 -I {inside}/wrapper.py {inside}/spec.json"
            code, timed_out, sink, _, _ = self._spawn(
                command,
                seconds,
                env,
                workspace=copy,
                tmp=tmp,
                binds=["--bind", str(report_dir), inside],
                cpu_seconds=max(self.limits.cpu_seconds, int(seconds) + 1),
            )
            outcomes: dict[str, str] = {}
            report_ok = False
            with contextlib.suppress(OSError):
                data = read_regular(str(report_dir), "report.xml", 64 << 20)
                try:
                    outcomes = parse_junit(data, [*ids, canary_id])
                    report_ok = True
                except Exception:  # noqa: BLE001 - any unreadable report is "no report"
                    report_ok = False
        finally:
            remove_tree(str(private))
        return grading_run(code, timed_out, report_ok, outcomes, canary_id, sink, seconds, started)

    def __repr__(self) -> str:
        state = "closed" if self.closed else str(self._root)
        return f"BwrapSandbox({state})"
