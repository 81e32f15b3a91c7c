"""The SWE sandboxes (envgym.sandbox), each security property tested on both backends for real:
bubblewrap and Docker (Docker cases skip, with the reason, only where no engine can be started or
the base image is not built; scripts/setup.sh does both)."""

from __future__ import annotations

import os
import resource
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sandbox_helpers import host_processes, tiny_project

from envgym.errors import ConfigError, InvalidKwargsError, MissingDependencyError
from envgym.sandbox import BwrapSandbox, DockerSandbox, Limits, Sandbox, default_kind, sandbox_class
from envgym.testing.grader_cheats import PLUGIN

BACKENDS = ["bwrap", "docker"]

MODULE = "def add(a, b):\n    return a - b\n"  # the bug
FIXED = "def add(a, b):\n    return a + b\n"
TESTS = textwrap.dedent(
    """\
    import pytest
    from pkg.mod import add

    def test_add():
        assert add(1, 2) == 3

    class TestAdd:
        def test_zero(self):
            assert add(0, 0) == 0

        @pytest.mark.parametrize("a,b", [(1, 2), (2, 2)])
        def test_param(self, a, b):
            assert add(a, b) == a + b
    """
)
FAIL_TO_PASS = ["tests/test_mod.py::test_add", "tests/test_mod.py::TestAdd::test_param[1-2]"]
PASS_TO_PASS = ["tests/test_mod.py::TestAdd::test_zero"]
ALL_IDS = FAIL_TO_PASS + PASS_TO_PASS


def _reason(kind: str) -> str | None:
    return sandbox_class(kind).unavailable_reason()


@pytest.fixture(params=BACKENDS)
def kind(request: pytest.FixtureRequest) -> str:
    reason = _reason(request.param)
    if reason is not None:
        pytest.skip(f"{request.param} sandbox unavailable here: {reason}")
    return request.param


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A tiny library and its test suite (the pristine tree of a task; the bug comes as an overlay)."""
    return tiny_project(tmp_path, FIXED, TESTS)


@pytest.fixture
def box(kind: str, project: Path) -> Iterator[Sandbox]:
    sandbox = sandbox_class(kind)(
        project, overlay={"pkg/mod.py": MODULE.encode()}, limits=Limits(timeout=20, processes=64, memory_mb=512)
    )
    with sandbox:
        yield sandbox


def _resolved(run, ids=ALL_IDS) -> bool:
    return run.report_ok and all(run.outcomes.get(t) == "passed" for t in ids)


# ----------------------------------------------------------------------------- basics
def test_commands_run_in_a_fresh_workspace_as_an_unprivileged_user(box: Sandbox) -> None:
    os.environ["ENVGYM_HOST_ONLY_VARIABLE"] = "leak"
    try:
        result = box.run("pwd; id -u; cat pkg/mod.py; echo HOME=$HOME; env | grep -c ENVGYM_HOST_ONLY || true")
    finally:
        del os.environ["ENVGYM_HOST_ONLY_VARIABLE"]
    lines = result.output.splitlines()
    assert result.exit_code == 0 and not result.timed_out and result.note == ""
    assert lines[0] == "/workspace"
    assert int(lines[1]) != 0
    assert "return a - b" in result.output  # the overlay is written over the source
    assert "HOME=/tmp" in lines and lines[-1] == "0"
    assert result.output_bytes == len(result.output.encode()) and not result.truncated
    # Files persist across commands of one episode; the host helpers see the agent's edits.
    assert box.run("echo hello > note.txt && mkdir -p a/b && echo x > a/b/c.txt").exit_code == 0
    assert box.read_file("note.txt") == b"hello\n"
    box.write_file("new/dir/file.py", b"print('from host')\n")
    assert box.run("python3 new/dir/file.py").output == "from host\n"
    assert box.run("exit 3").exit_code == 3


def test_the_source_tree_on_the_host_is_never_modified(kind: str, project: Path) -> None:
    before = {p: p.read_bytes() for p in project.rglob("*") if p.is_file()}
    with sandbox_class(kind)(project, overlay={"pkg/mod.py": MODULE.encode()}) as sandbox:
        sandbox.run("echo junk >> tests/test_mod.py; rm pkg/__init__.py; touch extra.py")
    assert {p: p.read_bytes() for p in project.rglob("*") if p.is_file()} == before


def test_hostile_input_is_refused_without_raising(box: Sandbox) -> None:
    for command, words in [("echo a\x00b", "NUL"), ("echo " + "x" * 200_000, "longer"), (42, "string")]:
        result = box.run(command)  # type: ignore[arg-type]
        assert result.exit_code is None and result.note.startswith("not run") and words in result.note
    for bad in ("../escape", "/etc/passwd", "", "a/../../b"):
        with pytest.raises(ConfigError):
            box.read_file(bad)
        with pytest.raises(ConfigError):
            box.write_file(bad, b"x")
    with pytest.raises(ConfigError):
        box.run("true", timeout=-1)
    assert box.run("echo fine").output == "fine\n"


def test_close_is_idempotent_and_final(kind: str, project: Path) -> None:
    sandbox = sandbox_class(kind)(project)
    sandbox.close()
    sandbox.close()
    assert sandbox.closed
    with pytest.raises(ConfigError, match="closed"):
        sandbox.run("true")


# ----------------------------------------------------------------------------- network
def test_no_network_to_the_host_or_outside(box: Sandbox) -> None:
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    server.settimeout(0.2)
    port = server.getsockname()[1]
    accepted: list[object] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                accepted.append(server.accept())
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    # The host listener answers a host client (the test is able to fail).
    with socket.create_connection(("127.0.0.1", port), timeout=2):
        pass
    time.sleep(0.3)
    assert len(accepted) == 1
    probe = textwrap.dedent(
        f"""
        import socket
        for host, port in [("127.0.0.1", {port}), ("1.1.1.1", 53), ("8.8.8.8", 443)]:
            try:
                socket.create_connection((host, port), timeout=2).close()
                print("CONNECTED", host)
            except OSError as err:
                print("refused", host, type(err).__name__)
        try:
            socket.getaddrinfo("deb.debian.org", 80)
            print("CONNECTED dns")
        except OSError:
            print("refused dns")
        """
    )
    box.write_file("probe.py", probe.encode())
    result = box.run("python3 probe.py; cat /sys/class/net/*/operstate 2>/dev/null | sort | uniq -c")
    stop.set()
    thread.join()
    server.close()
    assert result.exit_code == 0, result.output
    assert "CONNECTED" not in result.output
    assert result.output.count("refused") == 4
    assert len(accepted) == 1  # nothing from inside the sandbox reached the host's loopback


# ----------------------------------------------------------------------------- file system
def test_writes_outside_the_workspace_are_impossible_or_invisible(box: Sandbox, tmp_path: Path) -> None:
    canary = tmp_path / "canary.txt"
    canary.write_text("untouched")
    marker = f"envgym-escape-{os.getpid()}"
    targets = [f"/usr/{marker}", f"/etc/{marker}", f"/{marker}", f"/var/{marker}", f"/tmp/{marker}", str(canary)]
    script = "; ".join(f"(echo pwned > {t}) 2>/dev/null && echo wrote {t} || echo denied {t}" for t in targets)
    result = box.run(script)
    assert result.exit_code == 0
    assert canary.read_text() == "untouched"
    for target in targets[:-1]:
        assert not Path(target).exists(), f"{target} appeared on the host"
    # System folders are read-only inside as well.
    assert f"denied /usr/{marker}" in result.output and f"denied /etc/{marker}" in result.output
    # The host's private folders are not there at all.
    listing = box.run("ls -d /root/* /home/* /work /work/* 2>&1 | head -5; ls /proc | grep -c '^[0-9]'")
    assert "No such file" in listing.output or "Permission denied" in listing.output
    assert "/work/main" not in listing.output
    assert int(listing.output.splitlines()[-1]) < 10  # its own PID namespace: a handful of processes


def test_the_agent_cannot_read_the_grading_copy(box: Sandbox, tmp_path: Path) -> None:
    secret = f"GRADING-SECRET-{os.getpid()}-{time.time_ns()}"
    grading = tmp_path / "grading" / "tests"
    grading.mkdir(parents=True)
    (grading / "test_mod.py").write_text(f"# {secret}\n" + TESTS)
    result = box.run(
        f"cat {grading}/test_mod.py 2>&1; grep -rs {secret} /workspace /tmp /etc /var /root /home /opt /srv / "
        "--exclude-dir=proc --exclude-dir=sys --exclude-dir=usr --exclude-dir=dev 2>/dev/null | head -3; echo done"
    )
    assert secret not in result.output
    assert result.output.rstrip().endswith("done")
    # Even a symlink the agent plants cannot make a host-side helper read it.
    box.run(f"ln -s {grading}/test_mod.py leak.py")
    try:
        leaked = box.read_file("leak.py")
    except (OSError, PermissionError):
        leaked = b""
    assert secret.encode() not in leaked


# ----------------------------------------------------------------------------- limits
def test_an_infinite_loop_is_killed_at_the_timeout(box: Sandbox) -> None:
    started = time.perf_counter()
    result = box.run("echo start; while :; do :; done", timeout=2)
    took = time.perf_counter() - started
    assert result.timed_out and result.exit_code is None
    assert "killed at the 2 s timeout" in result.note
    assert result.output.startswith("start")
    assert 1.9 <= took < 12  # the kill is prompt (the upper bound allows a loaded 2-core machine)
    assert box.run("echo next").output == "next\n"


def test_a_fork_bomb_is_contained(box: Sandbox) -> None:
    result = box.run(":(){ :|:& };: ; sleep 1; echo survived-the-bomb", timeout=6)
    assert result.timed_out or result.exit_code is not None
    assert "process limit" in result.note or result.timed_out
    after = box.run("echo next; ps -e 2>/dev/null | wc -l || ls /proc | grep -c '^[0-9]'", timeout=20)
    assert after.exit_code == 0 and after.output.startswith("next"), after
    assert host_processes(":|:") == []


def test_a_memory_hog_is_stopped_and_reported(box: Sandbox) -> None:
    result = box.run("python3 -c 'b = bytearray(2 * 1024 ** 3); print(len(b))'")
    assert result.exit_code not in (0, None)
    assert "2147483648" not in result.output
    assert "memory" in result.note, result
    assert box.run("python3 -c 'print(len(bytearray(50 * 1024 ** 2)))'").output == "52428800\n"


def test_a_huge_file_is_stopped_by_the_file_size_limit(kind: str, project: Path) -> None:
    with sandbox_class(kind)(project, limits=Limits(file_size_mb=2)) as sandbox:
        result = sandbox.run("head -c 10000000 /dev/zero > big.bin; echo $?; stat -c %s big.bin")
    sizes = result.output.split()
    assert int(sizes[-1]) == 2 * 1024 * 1024


@pytest.mark.slow
def test_a_gigabyte_of_output_is_counted_not_buffered(kind: str, project: Path) -> None:
    limits = Limits(timeout=120, max_output_bytes=64 * 1024)
    with sandbox_class(kind)(project, limits=limits) as sandbox:
        rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        result = sandbox.run("echo first-line; head -c 1000000000 /dev/zero | tr '\\0' x; echo; echo last-line")
        rss_after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        assert result.exit_code == 0, result.note
        assert result.output_bytes == len("first-line\n") + 1_000_000_000 + 1 + len("last-line\n")
        assert result.truncated and "output truncated" in result.note
        assert len(result.output.encode()) <= limits.max_output_bytes
        assert result.output.startswith("first-line\nxxx") and result.output.endswith("xxx\nlast-line\n")
        assert "bytes of output omitted" in result.output
        assert (rss_after - rss_before) * 1024 < 100 * 1024 * 1024  # ru_maxrss is in KiB on Linux
        assert sandbox.run("echo next").output == "next\n"


# ----------------------------------------------------------------------------- processes
def test_no_process_survives_a_command_or_the_episode(kind: str, project: Path) -> None:
    marker = f"{4000 + os.getpid() % 1000}.{time.time_ns() % 1000}"
    sandbox = sandbox_class(kind)(project, limits=Limits(timeout=3))
    try:
        sandbox.run(f"sleep {marker} & (setsid nohup sleep {marker} >/dev/null 2>&1 &) ; echo started")
        assert host_processes(f"sleep {marker}") == []
        sandbox.run(f"sleep {marker}; echo never", timeout=1)
        assert host_processes(f"sleep {marker}") == []
        # The next command of the episode runs normally and sees no leftovers.
        after = sandbox.run(f"ps -eo args 2>/dev/null | grep -c 'sleep {marker}' || true")
        assert after.exit_code == 0
        sandbox.run(f"sleep {marker} &", timeout=1)
    finally:
        sandbox.close()
    assert host_processes(f"sleep {marker}") == []
    if kind == "bwrap":
        assert not sandbox._root.exists()  # type: ignore[attr-defined]
    else:
        api = DockerSandbox.client().api
        assert api.containers(all=True, filters={"id": sandbox._id}) == []  # type: ignore[attr-defined]


CRASHER = """
import os, sys, threading, time
from envgym.sandbox import sandbox_class
box = sandbox_class(sys.argv[1])(sys.argv[2])
print(getattr(box, "_id", None) or box._root, flush=True)
threading.Thread(target=box.run, args=("sleep " + sys.argv[3],), daemon=True).start()
time.sleep(1.5)
os.kill(os.getpid(), 9)
"""


def test_a_crashed_owner_leaves_nothing_behind(kind: str, project: Path) -> None:
    marker = f"{5000 + os.getpid() % 1000}.{time.time_ns() % 1000}"
    done = subprocess.run(
        [sys.executable, "-c", CRASHER, kind, str(project), marker],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == -9, done.stderr
    handle = done.stdout.strip()
    deadline = time.monotonic() + 15
    while host_processes(f"sleep {marker}") and time.monotonic() < deadline:
        time.sleep(0.2)
    assert host_processes(f"sleep {marker}") == []
    if kind == "bwrap":
        assert Path(handle).exists()  # a SIGKILL skips every finalizer ...
        assert BwrapSandbox.reap() >= 1  # ... so the next start reaps the folder
        assert not Path(handle).exists()
    else:
        api = DockerSandbox.client().api
        while api.containers(all=True, filters={"id": handle}) and time.monotonic() < deadline:
            time.sleep(0.2)  # the engine closes cat's input, the container stops, AutoRemove deletes it
        DockerSandbox.reap()
        assert api.containers(all=True, filters={"id": handle}) == []


# ----------------------------------------------------------------------------- grading
def test_grading_decides_from_junit_xml(box: Sandbox, project: Path) -> None:
    restore = {"tests/test_mod.py": TESTS.encode()}
    buggy = box.run_pytest(ALL_IDS, restore=restore, pythonpath=[""])
    assert buggy.report_ok and buggy.exit_code == 1
    assert buggy.outcomes == {
        "tests/test_mod.py::test_add": "failed",
        "tests/test_mod.py::TestAdd::test_param[1-2]": "failed",
        "tests/test_mod.py::TestAdd::test_zero": "passed",
    }
    box.run("sed -i 's/a - b/a + b/' pkg/mod.py")
    fixed = box.run_pytest(ALL_IDS, restore=restore, pythonpath=[""])
    assert _resolved(fixed) and fixed.exit_code == 0
    # A whole file as the id: every test case comes back under its node id.
    whole = box.run_pytest(["tests/test_mod.py"], restore=restore)
    assert whole.outcomes == {t: "passed" for t in ALL_IDS + ["tests/test_mod.py::TestAdd::test_param[2-2]"]}


CHEATS = {
    "fake PASSED lines": (
        "pkg/mod.py",
        'import sys\nprint("tests/test_mod.py::test_add PASSED\\n3 passed in 0.01s")\n'
        'sys.stderr.write("PASSED PASSED\\n")\n' + MODULE,
    ),
    "edited test file": ("tests/test_mod.py", "def test_add():\n    pass\n"),
    "conftest forcing passes": ("tests/conftest.py", PLUGIN),
    "root conftest": ("conftest.py", "import pkg.mod\npkg.mod.add = lambda a, b: a + b\n"),
    "pytest.ini addopts": ("pytest.ini", "[pytest]\naddopts = -p no:junitxml --deselect tests/test_mod.py::test_add\n"),
    "shadow pytest module": (
        "pytest.py",
        "import sys\nfor a in sys.argv:\n    pass\nraise SystemExit(0)\n",
    ),
    "sitecustomize": ("sitecustomize.py", "import pkg.mod\npkg.mod.add = lambda a, b: a + b\n"),
    "pth file": ("evil.pth", "import pkg.mod; pkg.mod.add = lambda a, b: a + b\n"),
}


@pytest.mark.parametrize("cheat", sorted(CHEATS))
def test_cheating_patches_are_not_resolved(box: Sandbox, cheat: str) -> None:
    path, content = CHEATS[cheat]
    box.write_file(path, content.encode())
    if cheat == "pth file":  # a .pth inside the package folder and byte-code planted beside it
        box.run("cp evil.pth pkg/evil.pth")
    run = box.run_pytest(ALL_IDS, restore={"tests/test_mod.py": TESTS.encode()}, pythonpath=[""])
    assert run.report_ok, run.output_tail
    assert not _resolved(run), (cheat, run.outcomes)
    assert run.outcomes["tests/test_mod.py::test_add"] == "failed"


def test_grading_restores_through_planted_symlinks(box: Sandbox, tmp_path: Path) -> None:
    box.run(
        "rm -rf tests && mkdir /tmp/fake && ln -s /tmp/fake tests && echo 'def test_add(): pass' > /tmp/fake/test_mod.py"
    )
    run = box.run_pytest(ALL_IDS, restore={"tests/test_mod.py": TESTS.encode()}, pythonpath=[""])
    assert run.report_ok and run.outcomes["tests/test_mod.py::test_add"] == "failed"


def test_grading_survives_a_hanging_test_and_a_killed_run(box: Sandbox) -> None:
    box.write_file("pkg/mod.py", b"def add(a, b):\n    while True:\n        pass\n")
    restore = {"tests/test_mod.py": TESTS.encode()}
    per_test = box.run_pytest(ALL_IDS, restore=restore, pythonpath=[""], per_test_timeout=1.0, timeout=60)
    assert per_test.report_ok
    assert per_test.outcomes["tests/test_mod.py::test_add"] == "failed"  # pytest-timeout failed it
    killed = box.run_pytest(ALL_IDS, restore=restore, pythonpath=[""], timeout=2)
    assert not killed.report_ok and killed.exit_code is None and killed.outcomes == {}
    assert "timeout" in killed.output_tail
    assert box.run("echo next").output == "next\n"


# ----------------------------------------------------------------------------- setup errors
def test_missing_bwrap_names_the_install_command(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty folder: no bwrap on PATH
    reason = BwrapSandbox.unavailable_reason()
    assert reason is not None and "apt-get install bubblewrap" in reason
    with pytest.raises(MissingDependencyError, match="apt-get install bubblewrap"):
        BwrapSandbox(tmp_path)


def test_sandbox_class_names_the_backends() -> None:
    assert default_kind() == "bwrap"
    assert sandbox_class("bwrap") is BwrapSandbox and sandbox_class("docker") is DockerSandbox
    with pytest.raises(InvalidKwargsError, match="'bwrap'"):
        sandbox_class("bwarp")


@pytest.mark.parametrize(
    "field,value",
    [("timeout", 0), ("memory_mb", 1), ("processes", True), ("max_output_bytes", 10), ("cpu_seconds", 1.5)],
)
def test_limits_are_validated(field: str, value: object) -> None:
    with pytest.raises(ConfigError, match=field):
        Limits(**{field: value})  # type: ignore[arg-type]
