"""Fixtures shared by several test modules, and what the suite needs to run on parallel workers.

``scripts/test.sh`` runs the suite with pytest-xdist (``-n auto --dist loadgroup``). Tests are
independent (``tmp_path``, ports chosen free, sandboxes and browsers per process), except where
they share a fixture wider than one test: those are put in one ``xdist_group`` here, by node id,
so that the fixture is built once, in one worker. See :func:`pytest_collection_modifyitems`.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from typing import Any

import pytest

# Ray's memory monitor kills a worker whenever the whole machine's memory use passes 95%, whoever
# holds it: on a machine where other jobs held the memory it killed the actors of the Ray tests,
# which test envgym's pools, not the host's memory. The kernel's OOM killer still stops a runaway.
os.environ.setdefault("RAY_memory_monitor_refresh_ms", "0")

#: Fixture scopes wider than one test: the tests that use such a fixture of a module share a worker.
_SHARED_SCOPES = {"class", "module", "package"}
#: Session fixtures that hold a resource of the machine: every test that uses one runs in one worker.
_SESSION_GROUPS = {"ray_instance": "ray"}


#: Terminal size variables: pytest-xdist workers start with COLUMNS=80 and LINES=24 set, which the
#: command line reads as a width (its piped output is 200 columns wide only when COLUMNS is unset).
_TERMINAL_VARS = ("COLUMNS", "LINES")


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """xdist controller: hand each worker the terminal variables of the run as it was started."""
    node.workerinput["envgym_terminal"] = {name: os.environ.get(name) for name in _TERMINAL_VARS}


def pytest_configure(config: pytest.Config) -> None:
    """An xdist worker sees the terminal variables the run was started with, not its own; and
    Ctrl-C works in the processes tests start (several tests send SIGINT to a child)."""
    # A shell starts a background job (``cmd &``, nohup, some CI runners) with SIGINT ignored, and
    # an ignored signal stays ignored across exec: every child would then shrug off the SIGINT
    # those tests send. A handler, unlike SIG_IGN, is reset to the default in a child.
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    given = getattr(config, "workerinput", {}).get("envgym_terminal", {})
    for name, value in given.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


@pytest.fixture(scope="session")
def ray_instance() -> Iterator[Any]:
    """One local Ray (2 CPUs) for every Ray test of the session: starting Ray takes seconds.

    A Ray that was already running is left running. Under pytest-xdist every test that uses this
    fixture runs in the same worker (group ``ray``), so one Ray starts per run, not one per worker.
    """
    ray = pytest.importorskip("ray")
    started = not ray.is_initialized()
    if started:
        _start_ray(ray)
    yield ray
    if started:
        ray.shutdown()


@pytest.fixture(scope="module")
def no_thread_playwright() -> None:
    """Stop the browsers an earlier test of this worker left in the main thread. While a browser
    env holds Playwright's sync API in a thread, Playwright marks the thread's event loop as
    running and ``asyncio.run`` there refuses to start (a browser that only lingers does not:
    envgym.browser.pool lifts the mark); modules that call ``asyncio.run`` use this fixture."""
    from envgym.browser.pool import shutdown_browsers

    shutdown_browsers()


def _start_ray(ray: Any, tries: int = 3) -> None:
    """``ray.init``, tried again when its node does not come up: Ray gives its raylet a fixed 30 s to
    register, which a machine that other jobs keep busy can miss. Only when every try misses is the
    machine taken to lack the CPU for Ray (the Ray tests skip, saying so), never a failure of envgym."""
    for attempt in range(1, tries + 1):
        try:
            ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
            return
        except Exception as err:  # Ray raises a bare Exception for this timeout
            if "timed out during startup" not in str(err):
                raise
            ray.shutdown()
            if attempt == tries:
                pytest.skip(f"Ray's node did not start in {tries} tries of 30 s (a machine too busy for Ray): {err}")


def _group_keys(item: pytest.Item) -> set[str]:
    """What ``item`` shares with other tests: its module (a module-scoped fixture), a session resource."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return set()
    # Autouse fixtures of a module are settings (torch threads, a toy id registered): each worker
    # can apply them; a fixture a test asks for by name is shared data worth building once.
    autouse = set(info.initialnames) - set(info.argnames)
    keys = set()
    # A module that looks for leftover processes host-wide (``sandbox_helpers.host_processes``)
    # would find the sandboxes another worker's test has running: those modules share one worker.
    if getattr(getattr(item, "module", None), "host_processes", None) is not None:
        keys.add("host-processes")
    for name in info.names_closure:
        defs = info.name2fixturedefs.get(name)
        if not defs:
            continue
        if name in _SESSION_GROUPS:
            keys.add(_SESSION_GROUPS[name])
        elif defs[-1].scope in _SHARED_SCOPES and name not in autouse:
            keys.add(item.nodeid.split("::", 1)[0])
    return keys


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the xdist_group marks
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark the tests that must share a worker with one ``xdist_group`` per connected set.

    A module whose tests use a module-scoped fixture runs in one worker (the fixture is built
    once); the tests of the Ray session fixture run in one worker (one Ray per run). A module that
    does both joins the Ray group whole. Without ``--dist loadgroup`` the marks change nothing;
    without pytest-xdist (``-p no:xdist``) none is added.
    """
    if not config.pluginmanager.hasplugin("xdist"):
        return
    parent: dict[str, str] = {}

    def find(key: str) -> str:
        while parent.setdefault(key, key) != key:
            parent[key] = parent[parent[key]]
            key = parent[key]
        return key

    keyed = []
    for item in items:
        keys = sorted(_group_keys(item))
        if keys:
            keyed.append((item, keys[0]))
            for other in keys[1:]:
                parent[find(other)] = find(keys[0])
    in_worker = hasattr(config, "workerinput")
    for item, key in keyed:
        node_id = getattr(item, "_id", None)
        if in_worker and node_id is not None and config.getvalue("loadgroup"):
            # pytest >= 9.2 keeps a node's id in ``_id`` (a NodeId), so xdist 3.8's own suffix
            # (written to the old ``_nodeid``) is lost and --dist loadgroup would spread the group:
            # the worker writes the ``@group`` suffix xdist's scheduler reads itself.
            item._id = type(node_id).parse(f"{item.nodeid}@{find(key)}")
        else:
            item.add_marker(pytest.mark.xdist_group(find(key)))
    if hasattr(config, "workerinput"):  # an xdist worker: every worker sorts alike (xdist checks)
        # Workers take the groups first, then single tests in this order: the long ones (marked
        # slow) first, so that none of them starts last while the other workers run out of work.
        keyed_ids = {id(item) for item, _ in keyed}
        items.sort(key=lambda item: id(item) in keyed_ids or item.get_closest_marker("slow") is None)
