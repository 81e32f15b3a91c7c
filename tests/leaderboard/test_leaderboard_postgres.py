"""The store on PostgreSQL, through the same SQLAlchemy code as SQLite.

Uses ``$ENVGYM_TEST_POSTGRES_URL`` when set; else starts a throwaway cluster when the PostgreSQL
server binaries (``initdb``, ``pg_ctl``) are installed, listening only on a Unix socket in a
temporary folder; else the module is skipped with the reason.
"""

from __future__ import annotations

import copy
import glob
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from test_leaderboard_support import SUITE_ID, bundles_fixture, runs_fixture, suite_dir_fixture  # noqa: F401 - fixtures

pytest.importorskip("sqlalchemy")
pytest.importorskip("psycopg", reason="PostgreSQL needs the driver: pip install 'psycopg[binary]'")


def _pg_bin(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    candidates = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    return candidates[-1] if candidates else None


@pytest.fixture(scope="module")
def pg_url() -> Iterator[str]:
    url = os.environ.get("ENVGYM_TEST_POSTGRES_URL")
    if url:
        yield url
        return
    initdb, pg_ctl = _pg_bin("initdb"), _pg_bin("pg_ctl")
    if initdb is None or pg_ctl is None:
        pytest.skip("no PostgreSQL server: set ENVGYM_TEST_POSTGRES_URL or install postgresql (initdb, pg_ctl)")
    prefix: list[str] = []
    owner = None
    if os.geteuid() == 0:  # PostgreSQL refuses to run as root: run it as the postgres user
        import pwd

        try:
            owner = pwd.getpwnam("postgres")
        except KeyError:
            pytest.skip("running as root and there is no 'postgres' user to run a throwaway PostgreSQL server")
        runuser = shutil.which("runuser")
        if runuser is None:
            pytest.skip("running as root without runuser: cannot start PostgreSQL as the postgres user")
        prefix = [runuser, "-u", "postgres", "--"]
    folder = Path(tempfile.mkdtemp(prefix="envgym-pg-"))
    if owner is not None:
        os.chown(folder, owner.pw_uid, owner.pw_gid)
    data = folder / "data"
    port = "54329"
    subprocess.run(
        [*prefix, initdb, "-D", str(data), "-A", "trust", "-U", "envgym", "--no-sync"],
        check=True,
        capture_output=True,
    )
    options = f"-k {folder} -c listen_addresses='' -p {port} -F"
    started = subprocess.run(
        [*prefix, pg_ctl, "-D", str(data), "-o", options, "-l", str(folder / "log"), "-w", "-t", "30", "start"],
        capture_output=True,
        text=True,
        check=False,
    )
    if started.returncode != 0:
        shutil.rmtree(folder, ignore_errors=True)
        pytest.skip(f"could not start a throwaway PostgreSQL server: {started.stderr or started.stdout}")
    try:
        yield f"postgresql+psycopg://envgym@/postgres?host={folder}&port={port}"
    finally:
        subprocess.run([*prefix, pg_ctl, "-D", str(data), "-m", "immediate", "stop"], capture_output=True, check=False)
        shutil.rmtree(folder, ignore_errors=True)


def test_store_on_postgresql(pg_url: str, bundles: dict[str, Any]) -> None:
    from envgym.leaderboard.bundle import Bundle
    from envgym.leaderboard.store import DuplicateEpisodes, Store
    from envgym.leaderboard.verify import verify_bundle

    random_v = verify_bundle(bundles["random"])
    oracle_v = verify_bundle(bundles["oracle"])
    variants = []
    for i in range(6):
        changed = Bundle(copy.deepcopy(bundles["random"].manifest), bundles["random"].episodes)
        changed.manifest["agent"]["name"] = f"pg variant {i}"
        changed.manifest["agent"]["spec"] = f"variant:{i}"  # another agent: the same run is ranked once
        variants.append(verify_bundle(changed.rehash()))
    with Store(pg_url) as store:
        for sub in store.leaderboard(SUITE_ID):  # a reused server: start from a clean suite
            store.delete(sub["id"])
        assert store.leaderboard(SUITE_ID) == []
        store.add(random_v)
        _, created = store.add(random_v)
        assert not created
        store.add(oracle_v)
        # Concurrent writers: each variant three times at once; the unique hash decides the races.
        with ThreadPoolExecutor(12) as pool:
            results = list(pool.map(store.add, variants * 3))
        assert sum(created for _, created in results) == len(variants)
        board = store.leaderboard(SUITE_ID)
        assert len(board) == 2 + len(variants)
        assert board[0]["agent_name"] == "oracle baseline" and board[0]["success_rate"] == 1.0
        random_row = next(b for b in board if b["agent_name"] == "random baseline")
        assert random_row["success_rate"] == pytest.approx(random_v.scores.success_rate)
        assert len(store.episodes(random_row["id"])) == 8
        assert (
            store.episode(random_row["id"], 0)["turns"][0]["action"]
            == bundles["random"].episodes[0]["turns"][0]["action"]
        )
        # One run under six names at once (other hashes, the same agent and episodes): one is stored,
        # the others are refused naming it, though all six pass the look-up before any is written.
        renamed = []
        for i in range(6):
            changed = Bundle(copy.deepcopy(bundles["oracle"].manifest), bundles["oracle"].episodes)
            changed.manifest["agent"]["name"] = f"oracle renamed {i}"
            renamed.append(verify_bundle(changed.rehash()))
        oracle_row = next(b for b in board if b["agent_name"] == "oracle baseline")
        store.delete(oracle_row["id"])

        def add_or_refuse(verified: Any) -> Any:
            try:
                return store.add(verified)
            except DuplicateEpisodes as err:
                return err

        with ThreadPoolExecutor(6) as pool:
            raced = list(pool.map(add_or_refuse, renamed))
        stored = [r for r in raced if isinstance(r, tuple)]
        assert len(stored) == 1 and stored[0][1]
        assert all(isinstance(r, DuplicateEpisodes) for r in raced if not isinstance(r, tuple))
        names = [b["agent_name"] for b in store.leaderboard(SUITE_ID)]
        assert sum(name.startswith("oracle renamed") for name in names) == 1
        for sub in store.leaderboard(SUITE_ID):
            store.delete(sub["id"])
        assert store.leaderboard(SUITE_ID) == []
