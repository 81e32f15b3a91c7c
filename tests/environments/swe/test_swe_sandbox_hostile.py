"""Attacks on the SWE sandboxes, one test per attack class, each tried for real (issue 33).

Every test here failed on the sandbox as it was before the hardening: an agent command that
outlived its command by ptracing the namespace's init, grading that deleted files by path name
on the host, a 3,000-level tree that crashed grading and cleanup, pytest plugins declared by
a planted ``*.dist-info``, test-folder ``__init__.py`` files and library patches that rewrite
outcomes in memory, a FIFO that blocked the host, the host's ``six.py`` readable inside, no
memory limit for the sandbox as a whole, no disk or inode quota.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sandbox_helpers import host_processes, tiny_project

from envgym import sandbox as envgym_sandbox
from envgym.sandbox import BwrapSandbox, Limits, Sandbox, _cgroup, _prepare, sandbox_class
from envgym.testing.grader_cheats import CHEATS, PATCH, PLANT, PLUGIN

MODULE = "def add(a, b):\n    return a - b\n"  # the bug, never fixed by the attacks below
TESTS = "from pkg.mod import add\n\ndef test_add():\n    assert add(1, 2) == 3\n\ndef test_keep():\n    assert True\n"
IDS = ["tests/test_mod.py::test_add", "tests/test_mod.py::test_keep"]
RESTORE = {"tests/test_mod.py": TESTS.encode()}


def _available(kind: str) -> None:
    reason = sandbox_class(kind).unavailable_reason()
    if reason is not None:
        pytest.skip(f"{kind} sandbox unavailable here: {reason}")


@pytest.fixture(params=["bwrap", "docker"])
def kind(request: pytest.FixtureRequest) -> str:
    _available(request.param)
    return request.param


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return tiny_project(tmp_path, MODULE, TESTS)


@pytest.fixture
def bwrap(project: Path) -> Iterator[BwrapSandbox]:
    _available("bwrap")
    with BwrapSandbox(project, limits=Limits(timeout=20, memory_mb=512)) as box:
        yield box


def _grade(box: Sandbox) -> bool:
    """Whether the (still buggy) workspace would be resolved."""
    run = box.run_pytest(IDS, restore=RESTORE, pythonpath=[""], timeout=60)
    return run.report_ok and run.exit_code == 0 and all(run.outcomes.get(t) == "passed" for t in IDS)


def _marker() -> str:
    return f"{3000 + os.getpid() % 1000}.{time.time_ns() % 100000}"


# ----------------------------------------------------------------------------- processes
PTRACE = (
    'python3 -c "import ctypes, os; libc = ctypes.CDLL(None, use_errno=True); '
    "print('ptrace', libc.ptrace(16, 1, 0, 0), ctypes.get_errno()); "
    "print('vm_read', libc.process_vm_readv(1, 0, 0, 0, 0, 0), ctypes.get_errno())\""
)


def test_no_command_can_trace_the_namespace_init_or_make_a_namespace(bwrap: BwrapSandbox) -> None:
    # Tracing the namespace's init is how a process turned off its die-with-parent and outlived
    # its command, its episode and its owner: the seccomp filter refuses it (EPERM = 1).
    result = bwrap.run(PTRACE)
    assert "ptrace -1 1" in result.output and "vm_read -1 1" in result.output, result.output
    nested = bwrap.run("unshare --user --map-root-user true; echo status=$?")
    assert "status=1" in nested.output and "Operation not permitted" in nested.output
    assert bwrap.isolation()["seccomp"] is True


def test_without_cgroups_the_namespace_kill_still_ends_everything(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The fallback where no cgroup can be made: killing the PID namespace's init ends every
    # process in it (the kernel's rule), at the end of the command and at a timeout.
    _available("bwrap")
    monkeypatch.setenv(_cgroup.SWITCH, "off")
    _cgroup._layout.cache_clear()
    try:
        marker = _marker()
        with BwrapSandbox(project, limits=Limits(timeout=3)) as box:
            assert box.isolation()["cgroup"] is None
            box.run(f"(setsid nohup sleep {marker} >/dev/null 2>&1 &); trap '' HUP TERM; echo started")
            assert host_processes(f"sleep {marker}") == []
            timed = box.run(f"(setsid sleep {marker} &); sleep {marker}", timeout=1)
            assert timed.timed_out
            assert host_processes(f"sleep {marker}") == []
    finally:
        _cgroup._layout.cache_clear()


def test_every_process_of_a_sandbox_is_in_its_cgroup_and_dies_with_it(bwrap: BwrapSandbox) -> None:
    groups = bwrap._groups
    if groups is None:
        pytest.skip("no writable cgroup hierarchy here (not root?): the namespace fallback is tested above")
    marker = _marker()
    seen: list[set[int]] = []

    def watch() -> None:
        time.sleep(1.0)
        seen.append(groups.pids())

    watcher = threading.Thread(target=watch)
    watcher.start()
    bwrap.run(f"sleep {marker} & sleep {marker} & sleep 2", timeout=10)
    watcher.join()
    assert len(seen[0]) >= 3  # the launcher's bwrap, its init, bash and the sleeps: all in the group
    assert groups.pids() == set()  # killed as a whole at the command's end
    folders = list(groups.folders)
    bwrap.close()
    assert not any(folder.exists() for folder in folders)


def test_memory_is_limited_for_the_whole_sandbox_shm_included(project: Path) -> None:
    _available("bwrap")
    with BwrapSandbox(project, limits=Limits(timeout=30, memory_mb=256, disk_mb=64)) as box:
        if box._groups is None or not box._groups.memory_limited:
            pytest.skip("no memory cgroup can be made here: only the per-process RLIMIT_AS holds")
        hog = "python3 -c \"import time; b = bytearray(150 << 20); b[::4096] = b'x' * len(b[::4096]); time.sleep(3)\""
        result = box.run(f"for i in 1 2 3 4; do {hog} & done; wait; echo done")
        # four 150 MiB processes do not fit 256 (+ 64 for files) MiB together: the kernel kills some
        assert "memory limit (256 MiB for the whole sandbox" in result.note, result
        shm = box.run("for i in $(seq 8); do head -c 60M /dev/zero > /dev/shm/f$i || break; done; echo done")
        assert "memory limit" in shm.note, shm
        assert box.run("echo next").output == "next\n"  # /dev/shm died with its command: memory is back


def test_disk_and_inode_quotas_stop_a_flood(project: Path) -> None:
    _available("bwrap")
    with BwrapSandbox(project, limits=Limits(timeout=30, disk_mb=32, inodes=2000, file_size_mb=512)) as box:
        if not box.isolation()["disk_quota"]:
            pytest.skip("the workspace quota needs root (a tmpfs mount per sandbox)")
        big = box.run("head -c 100M /dev/zero > big; echo status=$?; rm -f big")
        assert "No space left on device" in big.output and "disk quota reached" in big.note, big
        many = box.run("mkdir many && cd many && for i in $(seq 3000); do : > f$i || break; done; ls | wc -l")
        assert int(many.output.split()[-1]) < 2000 and "disk quota reached" in many.note, many
        assert box.run("rm -rf many; echo ok").output == "ok\n"


# ----------------------------------------------------------------------------- grading
def test_a_survivor_cannot_rewrite_conftest_while_grading(kind: str, project: Path) -> None:
    with sandbox_class(kind)(project, limits=Limits(timeout=10)) as box:
        box.write_file(".attack/plugin.py", PLUGIN.encode())
        box.write_file(".attack/patch.py", PATCH.encode())
        box.run(PLANT)
        box.run(CHEATS["conftest rewritten by a survivor"].format(pkg="pkg", tests="tests/test_mod.py"))
        assert not _grade(box)


def test_grading_never_touches_the_agents_folders_on_the_host(bwrap: BwrapSandbox, tmp_path: Path) -> None:
    # The host used to delete conftest.py, configs, *.pth, *.pyc and symlinks by path name as
    # root in the agent's workspace: a folder swapped for a symlink then aimed it at any folder.
    victim = tmp_path / "victim"
    victim.mkdir()
    for name in ("conftest.py", "pyproject.toml", "setup.cfg", "x.pth", "y.pyc"):
        (victim / name).write_text("precious\n")
    bwrap.run(f"ln -s {victim} tests/sub && echo 'x' > conftest.py && ln -s /etc/passwd evil.pth")
    assert not _grade(bwrap)
    assert sorted(p.name for p in victim.iterdir()) == ["conftest.py", "pyproject.toml", "setup.cfg", "x.pth", "y.pyc"]
    # grading works on a copy: the agent's own files are as it left them
    assert bwrap.run("cat conftest.py; readlink evil.pth").output == "x\n/etc/passwd\n"


def test_a_deep_tree_neither_breaks_grading_nor_cleanup(project: Path) -> None:
    _available("bwrap")
    box = BwrapSandbox(project, limits=Limits(timeout=60))
    root = box._root
    made = box.run(
        "python3 -c \"import os\nos.mkdir('deep'); os.chdir('deep')\nfor i in range(3000):\n"
        "    os.mkdir('d'); os.chdir('d')\nprint('depth=%d' % (i + 1))\""
    )
    assert "depth=3000" in made.output, made
    run = box.run_pytest(IDS, restore=RESTORE, pythonpath=[""], timeout=60)
    assert run.report_ok and run.outcomes == {IDS[0]: "failed", IDS[1]: "passed"}
    box.close()
    assert not root.exists()
    with BwrapSandbox(project) as fresh:  # the next sandbox of a new process starts cleanly too
        assert fresh.run("echo ok").output == "ok\n"


def test_remove_tree_handles_any_depth_without_recursion(tmp_path: Path) -> None:
    top = tmp_path / "top"
    os.mkdir(top)
    fd = os.open(top, os.O_RDONLY)
    try:
        for _ in range(2500):  # deeper than PATH_MAX allows a path name to reach
            os.mkdir("d", dir_fd=fd)
            os.close(os.open("f", os.O_CREAT | os.O_WRONLY, dir_fd=fd))
            nxt = os.open("d", os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = nxt
    finally:
        os.close(fd)
    os.symlink("/etc", top / "link")
    _prepare.remove_tree(str(top))
    assert not top.exists() and Path("/etc/passwd").exists()


@pytest.mark.parametrize("cheat", sorted(CHEATS))
def test_grader_cheats_do_not_resolve(kind: str, project: Path, cheat: str) -> None:
    with sandbox_class(kind)(project, limits=Limits(timeout=20)) as box:
        box.write_file(".attack/plugin.py", PLUGIN.encode())
        box.write_file(".attack/patch.py", PATCH.encode())
        assert box.run(PLANT).exit_code == 0
        made = box.run(CHEATS[cheat].format(pkg="pkg", tests="tests/test_mod.py"))
        assert made.exit_code == 0, made
        run = box.run_pytest(IDS, restore=RESTORE, pythonpath=[""], timeout=60)
        resolved = run.report_ok and run.exit_code == 0 and all(run.outcomes.get(t) == "passed" for t in IDS)
        assert not resolved, (cheat, run)


def test_an_in_memory_patch_of_pytest_is_caught(kind: str, project: Path) -> None:
    # The documented limit (code under test runs inside pytest) narrowed: replacing pytest's own
    # functions is detected, and the grader's canary test would be reported passed.
    with sandbox_class(kind)(project, limits=Limits(timeout=20)) as box:
        box.write_file("patch.py", PATCH.encode())
        box.run("cat patch.py >> pkg/mod.py")
        run = box.run_pytest(IDS, restore=RESTORE, pythonpath=[""], timeout=60)
        assert not run.report_ok and run.untrusted, run
        assert "replaced" in run.untrusted or "canary" in run.untrusted


def test_an_honest_fix_still_resolves(kind: str, project: Path) -> None:
    with sandbox_class(kind)(project, limits=Limits(timeout=20)) as box:
        box.run("sed -i 's/a - b/a + b/' pkg/mod.py && mkdir -p build/lib && touch build/lib/x.pyc")
        run = box.run_pytest(IDS, restore=RESTORE, pythonpath=[""], timeout=60)
        assert run.report_ok and run.exit_code == 0 and run.untrusted == "", run
        assert run.outcomes == {IDS[0]: "passed", IDS[1]: "passed"}  # the canary is not reported


# ----------------------------------------------------------------------------- host file operations
def test_reading_a_fifo_or_a_link_never_blocks_the_host(kind: str, project: Path) -> None:
    with sandbox_class(kind)(project, limits=Limits(timeout=10)) as box:
        box.run("mkfifo pipe && ln -s /etc/shadow shadow && ln -s ../../../../etc tests/up")
        outcome: list[BaseException | bytes] = []

        def read() -> None:
            try:
                outcome.append(box.read_file("pipe"))
            except BaseException as err:  # noqa: BLE001 - the result is checked below
                outcome.append(err)

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        reader.join(10)
        assert not reader.is_alive(), "read_file blocked on a FIFO"
        assert isinstance(outcome[0], OSError)
        if kind == "bwrap":  # host-side reads: no link is followed (docker reads inside the container)
            for path in ("shadow", "tests/up/passwd"):
                with pytest.raises(OSError):
                    box.read_file(path)


def test_the_host_python_packages_are_not_visible(bwrap: BwrapSandbox) -> None:
    # Debian's six.py in /usr/lib/python3/dist-packages is the gold patch of every six task (and
    # the host's /usr holds more copies, vendored by other programs): the sandbox's system is the
    # minimal Debian the Docker images are made of.
    if bwrap.isolation()["system"] != envgym_sandbox.DEFAULT_ROOTFS:
        pytest.skip(
            f"the sandbox root file system is not unpacked: {envgym_sandbox.sandbox_rootfs()}; "
            "python -m envgym.environments.swe.images build (scripts/setup.sh) makes it"
        )
    found = bwrap.run(
        "python3 -c 'import six' 2>&1; find / -name 'six.py' -not -path '/proc/*' 2>/dev/null; "
        "ls /usr/lib/python3/dist-packages"
    )
    assert "No module named 'six'" in found.output
    assert "/six.py" not in found.output
    assert "pytest" in found.output  # what grading needs is still there
    assert bwrap.run("python3 -m pytest --version 2>&1").exit_code == 0


def test_without_a_root_file_system_the_host_packages_are_hidden(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _available("bwrap")
    monkeypatch.setenv(envgym_sandbox.ROOTFS_ENV, "host")
    with BwrapSandbox(project) as box:
        assert box.isolation()["system"].startswith("host")
        found = box.run("python3 -c 'import six' 2>&1; ls /usr/lib/python3/dist-packages; python3 -m pytest --version")
        assert "No module named 'six'" in found.output and "six.py" not in found.output, found
        assert found.exit_code == 0


# ----------------------------------------------------------------------------- the real env
def test_a_real_swe_task_is_not_resolved_by_a_plugin_cheat() -> None:
    _available("bwrap")
    gym = pytest.importorskip("gymnasium")
    try:
        env = gym.make("envgym/SWE-v0", split="test", max_turns=6)
        env.reset(seed=0)
    except Exception as err:  # noqa: BLE001 - the library sources are fetched by scripts/setup.sh
        pytest.skip(f"SWE tasks unavailable here: {err}")
    try:
        plugin = PLUGIN.replace("\n", "\\n").replace('"', '\\"')
        actions = [
            f'printf "{plugin}" > evil_plugin.py',
            "mkdir -p evil-1.0.dist-info && printf '[pytest11]\\nevil = evil_plugin\\n' > evil-1.0.dist-info/entry_points.txt",
            "printf 'Metadata-Version: 2.1\\nName: evil\\nVersion: 1.0\\n' > evil-1.0.dist-info/METADATA",
            "(setsid nohup sh -c 'while :; do cp evil_plugin.py conftest.py; sleep 0.01; done' >/dev/null 2>&1 &)",
            "submit",
        ]
        for action in actions:
            _, reward, terminated, truncated, info = env.step(action)
            if terminated or truncated:
                break
        assert terminated and reward == 0.0 and info["success"] is False, info.get("termination_reason")
    finally:
        env.close()


def test_a_killed_owner_leaves_no_process_even_after_a_ptrace_attempt(project: Path) -> None:
    _available("bwrap")
    marker = _marker()
    script = textwrap.dedent(
        f"""
        import os, threading, time
        from envgym.sandbox import BwrapSandbox
        box = BwrapSandbox({str(project)!r})
        command = {PTRACE!r} + "; (setsid nohup sleep {marker} >/dev/null 2>&1 &); sleep {marker}"
        threading.Thread(target=box.run, args=(command,), daemon=True).start()
        time.sleep(2)
        os.kill(os.getpid(), 9)
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=120, check=False)
    assert done.returncode == -9, done.stderr
    deadline = time.monotonic() + 15
    while host_processes(f"sleep {marker}") and time.monotonic() < deadline:
        time.sleep(0.2)
    assert host_processes(f"sleep {marker}") == []
    BwrapSandbox.reap()
