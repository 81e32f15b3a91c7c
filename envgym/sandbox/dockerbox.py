"""The Docker sandbox: one container per episode, through the docker SDK (extra ``swe``).

The container runs from a locally built image (:mod:`envgym.environments.swe.images`): with
``--network none``, ``--memory`` (swap off), ``--pids-limit``, ``no-new-privileges`` and
``--init``; its main process is ``cat`` on the attached standard input, so when the Python process
that owns it dies (even by SIGKILL) the engine closes that input, the container stops and
``AutoRemove`` deletes it. Containers carry the label ``envgym.sandbox`` and their owner (host,
boot, pid, process start time); the first sandbox a process makes removes labelled containers whose
owner is gone. :meth:`DockerSandbox.close` (also run at garbage collection and exit) removes the
container at once.

Commands run with ``docker exec`` as a user id chosen at random per sandbox (so ``RLIMIT_NPROC``,
which counts a user's processes host-wide, is this sandbox's alone), through the same bash
launcher as bwrap (``ulimit`` for CPU, address space, processes, file size), which kills every
process of that user when the command returns; at the timeout another exec does it.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import secrets
import select
import socket as socketlib
import struct
import tarfile
import tempfile
import time
import weakref
from collections.abc import Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import Any

from envgym._imports import optional
from envgym.errors import ConfigError, NotAvailableError
from envgym.sandbox import _prepare
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
    pytest_argv,
    refused,
)

__all__ = ["BASE_IMAGE", "DockerSandbox"]

#: The image built by ``python -m envgym.environments.swe.images build`` (debootstrap + import).
BASE_IMAGE = "envgym-swe-base:bookworm"
LABEL = "envgym.sandbox"
OWNER_LABEL = "envgym.sandbox.owner"
SETUP_HINT = "bash scripts/setup.sh (as root: installs docker.io, starts dockerd, builds the images)"
#: Range of the per-sandbox user ids.
UID_RANGE = (20_000, 60_000)
#: Processes the container may hold beyond the command's own limit (init, cat, our execs).
PID_HEADROOM = 16
#: SIGKILL every process of the calling user but itself, again while any was found: a process
#: forking while kill(-1) walks the process list can leave a child the first pass missed.
KILL_ALL = "n=0; while kill -9 -1 2>/dev/null && [ $n -lt 200 ]; do n=$((n + 1)); done"
_client: Any = None
_reaped = False


def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return "unknown"


def _start_time(pid: int) -> str | None:
    """The start time of process ``pid`` (field 22 of /proc/PID/stat), or None when it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[-1].split()[19]


def _owner_token() -> str:
    return f"{socketlib.gethostname()}:{_boot_id()}:{os.getpid()}:{_start_time(os.getpid())}"


def _owner_gone(token: str) -> bool:
    try:
        host, boot, pid, started = token.rsplit(":", 3)
    except ValueError:
        return False
    if host != socketlib.gethostname():
        return False  # another machine's engine client: not ours to judge
    if boot != _boot_id():
        return True
    return _start_time(int(pid)) != started


def _remove(api: Any, container_id: str, attach: Any) -> None:
    """Finalizer: remove the container (kills its processes) and drop the attached input."""
    with contextlib.suppress(Exception):  # already gone, or the engine went away: AutoRemove finishes it
        api.remove_container(container_id, force=True)
    for closer in (getattr(attach, "_sock", None), attach):
        if closer is not None:
            with contextlib.suppress(Exception):
                closer.close()


def _tar(entries: Sequence[tuple[str, bytes | None, int]], uid: int, gid: int) -> bytes:
    """A tar of (path, bytes or None for a folder, mode) owned by uid:gid."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        for name, data, mode in entries:
            info = tarfile.TarInfo(name)
            info.uid, info.gid, info.mode, info.mtime = uid, gid, mode, int(time.time())
            if data is None:
                info.type = tarfile.DIRTYPE
                archive.addfile(info)
            else:
                info.size = len(data)
                archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


class DockerSandbox(Sandbox):
    """A Docker container per episode (see the module docstring)."""

    kind = "docker"

    @classmethod
    def client(cls) -> Any:
        """The docker SDK client of this process (made once); raises when no engine answers."""
        global _client
        if _client is not None:
            return _client
        docker = optional("docker", purpose="The Docker sandbox", extra="swe")
        try:
            client = docker.from_env(timeout=120)
            client.ping()
        except Exception as err:
            raise NotAvailableError(
                f"no Docker engine answers ({type(err).__name__}: {err}); start one with {SETUP_HINT}."
            ) from err
        _client = client
        return client

    @classmethod
    def unavailable_reason(cls, image: str | None = None) -> str | None:
        try:
            client = cls.client()
        except NotAvailableError as err:
            return str(err)
        name = image or BASE_IMAGE
        try:
            client.api.inspect_image(name)
        except Exception:  # noqa: BLE001 - ImageNotFound or an engine error
            return f"the image {name!r} is not built; build it with: python -m envgym.environments.swe.images build"
        return None

    @classmethod
    def reap(cls) -> int:
        """Remove labelled containers whose owning process is gone; returns how many."""
        api = cls.client().api
        removed = 0
        for info in api.containers(all=True, filters={"label": LABEL}):
            token = (info.get("Labels") or {}).get(OWNER_LABEL, "")
            if _owner_gone(token):
                with contextlib.suppress(Exception):  # removed meanwhile (AutoRemove)
                    api.remove_container(info["Id"], force=True)
                    removed += 1
        return removed

    def __init__(
        self,
        source: Path | str,
        *,
        overlay: Mapping[str, bytes] = {},
        image: str | None = None,
        limits: Limits = Limits(),  # noqa: B008 - frozen
        env: Mapping[str, str] = {},
    ) -> None:
        global _reaped
        if not isinstance(limits, Limits):
            raise ConfigError(f"limits must be an envgym.sandbox.Limits, got {type(limits).__name__}.")
        if image is not None and not isinstance(image, str):
            raise ConfigError(f"image must be an image name or None, got {image!r}.")
        source = Path(source)
        if image is None and not source.is_dir():
            raise ConfigError(f"the sandbox source must be an existing folder, got {str(source)!r}.")
        for key, value in env.items():
            if not isinstance(key, str) or not isinstance(value, str) or not key or "=" in key or "\x00" in key + value:
                raise ConfigError(f"env must map variable names to strings, got {key!r}: {value!r}.")
        overlay = {str(check_relpath(rel)): bytes(data) for rel, data in overlay.items()}
        client = self.client()
        if not _reaped:
            _reaped = True
            self.reap()
        name = image or BASE_IMAGE
        reason = self.unavailable_reason(name)
        if reason is not None:
            raise NotAvailableError(reason)
        self.limits = limits
        self._api = client.api
        self._uid = secrets.randbelow(UID_RANGE[1] - UID_RANGE[0]) + UID_RANGE[0]
        self._env = {**BASE_ENV, **env}
        host_config = self._api.create_host_config(
            init=True,
            network_mode="none",
            auto_remove=True,
            mem_limit=f"{limits.memory_mb}m",
            memswap_limit=f"{limits.memory_mb}m",
            pids_limit=limits.processes + PID_HEADROOM,
            security_opt=["no-new-privileges"],
            cap_drop=["NET_RAW", "MKNOD", "AUDIT_WRITE", "SYS_CHROOT", "SETFCAP", "NET_BIND_SERVICE"],
        )
        created = self._api.create_container(
            name,
            command=["/bin/sh", "-c", "exec cat >/dev/null"],
            stdin_open=True,
            detach=False,  # with stdin_open: StdinOnce, the input closes when this process lets go
            network_disabled=True,
            working_dir=self.workdir,
            labels={LABEL: "1", OWNER_LABEL: _owner_token()},
            host_config=host_config,
        )
        self._id: str = created["Id"]
        self._attach: Any = None
        self._finalizer = weakref.finalize(self, _remove, self._api, self._id, None)
        try:
            self._attach = self._api.attach_socket(self._id, params={"stdin": 1, "stream": 1})
            self._finalizer.detach()
            self._finalizer = weakref.finalize(self, _remove, self._api, self._id, self._attach)
            self._api.start(self._id)
            uid = self._uid
            setup = (
                f"echo 'agent:x:{uid}:{uid}::/tmp:/bin/bash' >> /etc/passwd && echo 'agent:x:{uid}:' >> /etc/group "
                f"&& sed -i '/^agent:x:1000:/d' /etc/passwd /etc/group && mkdir -p {self.workdir} "
                f"&& chown -R {uid}:{uid} {self.workdir} && chmod 1777 /tmp"
            )
            code, _, sink = self._exec(["/bin/sh", "-c", setup], user="0:0", timeout=60)
            if code != 0:
                raise NotAvailableError(f"the container's setup failed ({code}): {sink.text()[-500:]}")
            files: list[tuple[str, bytes | None, int]] = []
            if image is None:
                files += self._tree_entries(source)
            for rel, data in overlay.items():
                files += [
                    (str(parent), None, 0o755) for parent in reversed(PurePosixPath(rel).parents) if str(parent) != "."
                ]
                files.append((rel, data, 0o644))
            if files:
                self._api.put_archive(self._id, self.workdir, _tar(files, uid, uid))
        except BaseException:
            self.close()
            raise

    @staticmethod
    def _tree_entries(source: Path) -> list[tuple[str, bytes | None, int]]:
        entries: list[tuple[str, bytes | None, int]] = []
        for folder, dirs, names in os.walk(source):
            rel_folder = os.path.relpath(folder, source)
            dirs.sort()
            for name in sorted(dirs):
                path = os.path.join(folder, name)
                if not os.path.islink(path):
                    entries.append((os.path.normpath(os.path.join(rel_folder, name)), None, 0o755))
            for name in sorted(names):
                path = os.path.join(folder, name)
                if os.path.islink(path) or not os.path.isfile(path):
                    continue  # sdists carry plain files; links and devices are not copied
                mode = 0o755 if os.access(path, os.X_OK) else 0o644
                entries.append((os.path.normpath(os.path.join(rel_folder, name)), Path(path).read_bytes(), mode))
        return entries

    # ------------------------------------------------------------------ exec
    def _launcher(self, cpu_seconds: int) -> list[str]:
        limits = self.limits
        script = (
            f"ulimit -c 0 && ulimit -f {limits.file_size_mb * 1024} && ulimit -v {limits.memory_mb * 1024} "
            f"&& ulimit -u {limits.processes} && ulimit -S -t {cpu_seconds} && ulimit -H -t {cpu_seconds + 1} "
            '|| exit 125; /bin/bash -c "$1"; status=$?; ' + KILL_ALL + "; exit $status"
        )
        return ["/bin/bash", "-c", script, "envgym-sandbox"]

    def _kill_all(self) -> None:
        """SIGKILL every process of the sandbox user (``kill -1`` as that user spares only itself)."""
        with contextlib.suppress(Exception):  # the engine or container is gone: nothing left to kill
            self._exec(["/bin/bash", "-c", KILL_ALL + "; true"], user=f"{self._uid}:{self._uid}", timeout=10)

    def _exec(
        self,
        argv: list[str],
        *,
        user: str,
        timeout: float,
        env: Mapping[str, str] | None = None,
        sink: OutputSink | None = None,
        workdir: str | None = None,
    ) -> tuple[int | None, bool, OutputSink]:
        sink = sink or OutputSink(self.limits.max_output_bytes)
        created = self._api.exec_create(
            self._id, argv, user=user, workdir=workdir or self.workdir, environment=dict(env or self._env), stdin=False
        )
        exec_id = created["Id"]
        stream = self._api.exec_start(exec_id, socket=True)
        raw = getattr(stream, "_sock", stream)
        timed_out = False
        pending = b""
        deadline = time.perf_counter() + timeout
        try:
            while True:
                left = deadline - time.perf_counter()
                if left <= 0:
                    if timed_out:
                        break  # the kill did not end the stream within its grace: give up on it
                    timed_out = True
                    self._kill_all()
                    deadline = time.perf_counter() + 5.0
                    continue
                ready, _, _ = select.select([raw], [], [], left)
                if not ready:
                    continue
                chunk = raw.recv(READ_CHUNK)
                if not chunk:
                    break
                pending += chunk
                # Multiplexed stream: 8-byte headers (stream, 0, 0, 0, big-endian size) then payload.
                while len(pending) >= 8:
                    size = struct.unpack(">I", pending[4:8])[0]
                    if len(pending) < 8 + size:
                        break
                    sink.write(pending[8 : 8 + size])
                    pending = pending[8 + size :]
        finally:
            for closer in (raw, stream):
                with contextlib.suppress(Exception):
                    closer.close()
        code: int | None = None
        for _ in range(50):
            info = self._api.exec_inspect(exec_id)
            if not info.get("Running"):
                code = info.get("ExitCode")
                break
            time.sleep(0.02)
        return (None if timed_out else code), timed_out, sink

    def run(self, command: str, *, timeout: float | None = None) -> CommandResult:
        self._check_open()
        seconds = command_timeout(self.limits, timeout)
        why = check_command(command)
        if why is not None:
            return refused(why)
        started = time.perf_counter()
        code, timed_out, sink = self._exec(
            [*self._launcher(self.limits.cpu_seconds), command], user=f"{self._uid}:{self._uid}", timeout=seconds
        )
        note = describe_end(code, timed_out, seconds, sink, self.limits, self.limits.cpu_seconds)
        return CommandResult(sink.text(), code, timed_out, sink.total, sink.truncated, elapsed(started), note)

    # ------------------------------------------------------------------ files
    def read_file(self, relpath: str) -> bytes:
        self._check_open()
        rel = check_relpath(relpath)
        from docker.errors import NotFound

        try:
            stream, _ = self._api.get_archive(self._id, f"{self.workdir}/{rel}")
        except NotFound as err:
            raise FileNotFoundError(f"no file {relpath!r} in the sandbox workspace") from err
        with tempfile.SpooledTemporaryFile(max_size=16 << 20) as buffer:
            for chunk in stream:
                buffer.write(chunk)
            buffer.seek(0)
            with tarfile.open(fileobj=buffer, mode="r|") as archive:
                for member in archive:
                    if member.isfile():
                        cap = self.limits.file_size_mb << 20
                        if member.size > cap:
                            raise OSError(
                                27, f"{relpath!r} is {member.size} bytes, more than the {cap} bytes read at most"
                            )
                        extracted = archive.extractfile(member)
                        assert extracted is not None
                        return extracted.read()
                    raise IsADirectoryError(f"{relpath!r} in the sandbox workspace is not a regular file")
        raise FileNotFoundError(f"no file {relpath!r} in the sandbox workspace")

    def write_file(self, relpath: str, data: bytes) -> None:
        self._check_open()
        rel = check_relpath(relpath)
        if not isinstance(data, (bytes, bytearray)):
            raise ConfigError(f"write_file needs bytes, got {type(data).__name__}.")
        entries: list[tuple[str, bytes | None, int]] = [
            (str(parent), None, 0o755) for parent in reversed(rel.parents) if str(parent) != "."
        ]
        entries.append((str(rel), bytes(data), 0o644))
        self._api.put_archive(self._id, self.workdir, _tar(entries, self._uid, self._uid))

    # ------------------------------------------------------------------ grading
    def run_pytest(
        self,
        test_ids: Sequence[str],
        *,
        restore: Mapping[str, bytes],
        pythonpath: Sequence[str] = (),
        timeout: float = 300.0,
        per_test_timeout: float | None = None,
    ) -> PytestRun:
        """Grading as the bwrap sandbox grades: every process of the sandbox user killed, then the
        workspace copied (as root inside the container, through directory descriptors, without
        following links, :func:`envgym.sandbox._prepare.grading_copy`) into a fresh root-owned
        folder the agent never saw, and pytest run over that copy with a fresh ``/tmp``."""
        self._check_open()
        ids = check_test_ids(test_ids)
        restore = check_restore(restore)
        seconds = command_timeout(self.limits, timeout)
        started = time.perf_counter()
        self._kill_all()
        canary_rel, canary_id, canary_source = canary(ids)
        restore = {**restore, canary_rel: canary_source}
        private = f"/.grading-{secrets.token_hex(8)}"
        copy, report_dir, tmp = f"{private}/workspace", f"{private}/report", f"{private}/tmp"
        uid = self._uid
        restore_names = {rel: f"{private}/restore/{i}" for i, rel in enumerate(sorted(restore))}
        prepare_spec = {"src": self.workdir, "dst": copy, "restore": restore_names, "owner": [uid, uid]}
        grading_spec = {
            "argv": pytest_argv([*ids, canary_id], f"{report_dir}/report.xml", copy, per_test_timeout),
            "path": grading_path(copy, pythonpath),
        }
        # Root-owned except report/ and tmp/, which only the grading run (as the sandbox user) writes.
        files: list[tuple[str, bytes | None, int]] = [
            (private[1:], None, 0o711),
            (f"{private[1:]}/restore", None, 0o700),
            (f"{private[1:]}/prepare.py", Path(_prepare.__file__).read_bytes(), 0o600),
            (f"{private[1:]}/prepare.json", json.dumps(prepare_spec).encode(), 0o600),
        ]
        files += [(path[1:], restore[rel], 0o600) for rel, path in restore_names.items()]
        self._api.put_archive(self._id, "/", _tar(files, 0, 0))
        report_files = [
            (report_dir[1:], None, 0o700),
            (tmp[1:], None, 0o700),
            (f"{report_dir[1:]}/wrapper.py", PYTEST_WRAPPER.encode(), 0o600),
            (f"{report_dir[1:]}/spec.json", json.dumps(grading_spec).encode(), 0o600),
        ]
        self._api.put_archive(self._id, "/", _tar(report_files, uid, uid))
        outcomes: dict[str, str] = {}
        report_ok = False
        code: int | None = None
        timed_out = False
        sink = OutputSink(self.limits.max_output_bytes)
        try:
            prep_code, _, prep_sink = self._exec(
                ["/usr/bin/python3", "-I", f"{private}/prepare.py", "copy", f"{private}/prepare.json"],
                user="0:0",
                timeout=150,
            )
            if prep_code == 3:
                why = prep_sink.text().strip()[-500:]
                return PytestRun(None, {}, False, elapsed(started), "", untrusted=f"not gradable: {why}")
            if prep_code != 0:
                raise NotAvailableError(f"copying the workspace for grading failed: {prep_sink.text()[-1000:]}")
            env = {**self._env, **GRADING_ENV, "TMPDIR": tmp}
            env.pop("PYTHONPATH", None)
            command = f"exec /usr/bin/python3 -I {report_dir}/wrapper.py {report_dir}/spec.json"
            cpu = max(self.limits.cpu_seconds, int(seconds) + 1)
            code, timed_out, sink = self._exec(
                [*self._launcher(cpu), command], user=f"{uid}:{uid}", timeout=seconds, env=env, workdir=copy
            )
            from docker.errors import NotFound

            try:
                stream, _ = self._api.get_archive(self._id, f"{report_dir}/report.xml")
                data = b"".join(stream)
                with tarfile.open(fileobj=io.BytesIO(data)) as archive:
                    member = archive.next()
                    if member is not None and member.isfile():
                        extracted = archive.extractfile(member)
                        assert extracted is not None
                        parsed = _parse(extracted.read(), [*ids, canary_id])
                        report_ok = parsed is not None
                        outcomes = parsed or {}
            except NotFound:
                report_ok = False
        finally:
            self._kill_all()
            self._exec(["/bin/rm", "-rf", private], user="0:0", timeout=60)
        return grading_run(code, timed_out, report_ok, outcomes, canary_id, sink, seconds, started)

    def __repr__(self) -> str:
        return f"DockerSandbox({'closed' if self.closed else self._id[:12]})"


def _parse(xml: bytes, ids: list[str]) -> dict[str, str] | None:
    try:
        return parse_junit(xml, ids)
    except Exception:  # noqa: BLE001 - an unreadable report is "no report"
        return None
