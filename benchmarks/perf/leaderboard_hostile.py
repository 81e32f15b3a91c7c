"""The leaderboard server under hostile uploads: what they cost it, and whether its pages stay up.

Starts ``envgym leaderboard serve`` (a real uvicorn, loopback only, a fresh SQLite file in a
temporary folder, the default verify pool) and measures:

* **trials = 1e99**: a small bundle whose manifest claims 1e99 trials per task (and one claiming
  the integer 10^99): the answer, its time, and the server's RSS before and after;
* **a 100 MiB field**: a bundle whose agent metadata holds 100 MiB (about 100 KB on the wire):
  the answer, its time, and the database's size (file + WAL) before and after;
* **readers during heavy verifications**: ``--readers`` threads reading the board's pages and JSON
  (``/``, ``/suites/core-v1``, ``/api/suites``, ``/api/suites/core-v1/entries``) while ``--heavy``
  distinct copies of a heavy published bundle are uploaded at once: read p50 / p99 / max and the
  error count (target: p99 < 1 s, 0 errors), and how the uploads were answered (201 verified, 503
  queue full with Retry-After);
* the board's read latency alone, before any of it, for comparison.

Every loop is bounded (``--max-seconds`` for the readers). Results go to stdout and to
``benchmarks/perf/results/leaderboard_hostile.json``.

Usage::

    python benchmarks/perf/leaderboard_hostile.py
    python benchmarks/perf/leaderboard_hostile.py --readers 50 --heavy 8 --json
"""

from __future__ import annotations

import argparse
import copy
import http.client
import json
import os
import platform
import socket
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from envgym.leaderboard.bundle import Bundle, bundle_bytes, read_bundle

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "perf" / "results" / "leaderboard_hostile.json"
BOARD = ROOT / "leaderboards" / "core-v1"
SMALL = BOARD / "20261124_random.envgym.jsonl.gz"
SEED = [BOARD / "20261124_oracle.envgym.jsonl.gz", SMALL]
#: 300 customer-service episodes: about 6 s of CPU to replay on one core.
HEAVY = ROOT / "leaderboards" / "service-v1" / "20261126_random.envgym.jsonl.gz"
READ_PATHS = ("/", "/suites/core-v1", "/api/suites", "/api/suites/core-v1/entries")


class Board:
    """``envgym leaderboard serve`` on a free loopback port over a fresh database."""

    def __init__(self, folder: Path, *extra: str) -> None:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = sock.getsockname()[1]
        self.db = folder / "board.db"
        self.log = (folder / "server.log").open("wb")
        command = [sys.executable, "-m", "envgym.cli", "leaderboard", "serve", "--port", str(self.port),
                   "--db", str(self.db), *extra]  # fmt: skip
        self.proc = subprocess.Popen(command, stdout=self.log, stderr=subprocess.STDOUT, cwd=ROOT)
        deadline = time.monotonic() + 120
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the server exited with {self.proc.returncode}; see {folder / 'server.log'}")
            try:
                if self.get("/api/suites")[0] == 200:
                    return
            except OSError:
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("the server did not answer within 120 s")
            time.sleep(0.2)

    def request(self, method: str, path: str, body: bytes | None = None, timeout: float = 600) -> tuple[int, Any, dict]:
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            headers = {"Content-Type": "application/gzip"} if body is not None else {}
            connection.request(method, path, body=body, headers=headers)
            response = connection.getresponse()
            data = response.read()
            try:
                document = json.loads(data)
            except ValueError:
                document = data[:200].decode(errors="replace")
            return response.status, document, dict(response.getheaders())
        finally:
            connection.close()

    def get(self, path: str) -> tuple[int, Any, dict]:
        return self.request("GET", path, timeout=30)

    def upload(self, data: bytes) -> tuple[int, Any, dict, float]:
        start = time.perf_counter()
        status, document, headers = self.request("POST", "/api/submissions", data)
        return status, document, headers, time.perf_counter() - start

    def rss_mb(self) -> float:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return float("nan")

    def db_bytes(self) -> int:
        return sum(p.stat().st_size for p in self.db.parent.glob(self.db.name + "*") if p.is_file())

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(30)
        self.log.close()


def variant(bundle: Bundle, name: str, edit: Any = None) -> bytes:
    changed = Bundle(copy.deepcopy(bundle.manifest), bundle.episodes)
    changed.manifest["agent"]["name"] = name
    if edit is not None:
        edit(changed.manifest)
    return bundle_bytes(changed.rehash())


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def summary(latencies: list[float]) -> dict[str, Any]:
    return {
        "reads": len(latencies),
        "p50_ms": round(percentile(latencies, 0.50) * 1000, 1),
        "p99_ms": round(percentile(latencies, 0.99) * 1000, 1),
        "max_ms": round(max(latencies, default=float("nan")) * 1000, 1),
    }


def reads_alone(board: Board, count: int) -> dict[str, Any]:
    latencies = []
    for i in range(count):
        start = time.perf_counter()
        board.get(READ_PATHS[i % len(READ_PATHS)])
        latencies.append(time.perf_counter() - start)
    return summary(latencies)


def absurd_trials(board: Board, small: Bundle) -> list[dict[str, Any]]:
    rows = []
    for label, value in (("1e99", 1e99), ("10**99", 10**99)):
        data = variant(small, f"trials {label}", lambda m, v=value: m.__setitem__("trials", v))
        before = board.rss_mb()
        status, document, _, took = board.upload(data)
        time.sleep(0.5)
        rows.append({
            "trials": label,
            "upload_bytes": len(data),
            "status": status,
            "reason": str(document.get("reason", ""))[:200] if isinstance(document, dict) else str(document),
            "answer_ms": round(took * 1000, 1),
            "server_rss_mb_before": round(before, 1),
            "server_rss_mb_after": round(board.rss_mb(), 1),
        })  # fmt: skip
    return rows


def huge_field(board: Board, small: Bundle, mib: int) -> dict[str, Any]:
    def stuff(manifest: dict[str, Any]) -> None:
        manifest["agent"]["metadata"] = {"notes": "a" * (mib * 1024 * 1024)}

    data = variant(small, f"{mib} MiB of metadata", stuff)
    before_db, before_rss = board.db_bytes(), board.rss_mb()
    status, document, _, took = board.upload(data)
    time.sleep(0.5)
    return {
        "field_mib": mib,
        "upload_bytes": len(data),
        "status": status,
        "reason": str(document.get("reason", ""))[:200] if isinstance(document, dict) else str(document),
        "answer_ms": round(took * 1000, 1),
        "db_bytes_before": before_db,
        "db_bytes_after": board.db_bytes(),
        "server_rss_mb_before": round(before_rss, 1),
        "server_rss_mb_after": round(board.rss_mb(), 1),
    }


def readers_during_heavy(
    board: Board, heavy: Bundle, uploads: int, readers: int, max_seconds: float, heavy_path: Path
) -> dict[str, Any]:
    """``readers`` threads reading while ``uploads`` copies of ``heavy`` are uploaded at once (with
    ``uploads=0``: for ``max_seconds``, the same read load without any verification)."""
    datas = [variant(heavy, f"heavy {i}") for i in range(uploads)]
    latencies: list[float] = []
    errors: list[str] = []
    lock = threading.Lock()
    done = threading.Event()
    deadline = time.monotonic() + max_seconds

    def read(index: int) -> None:
        connection = http.client.HTTPConnection("127.0.0.1", board.port, timeout=30)
        i = index
        while not done.is_set() and time.monotonic() < deadline:
            path = READ_PATHS[i % len(READ_PATHS)]
            i += 1
            start = time.perf_counter()
            try:
                connection.request("GET", path)
                response = connection.getresponse()
                response.read()
                ok = response.status == 200
            except (OSError, http.client.HTTPException) as err:
                ok = False
                connection.close()
                connection = http.client.HTTPConnection("127.0.0.1", board.port, timeout=30)
                response = err  # type: ignore[assignment]
            took = time.perf_counter() - start
            with lock:
                latencies.append(took)
                if not ok:
                    errors.append(f"{path}: {getattr(response, 'status', response)!r}")
            time.sleep(0.02)
        connection.close()

    threads = [threading.Thread(target=read, args=(i,)) for i in range(readers)]
    for thread in threads:
        thread.start()
    time.sleep(1.0)  # readers running before the uploads land
    start = time.perf_counter()
    if uploads:
        with ThreadPoolExecutor(uploads) as pool:
            answers = list(pool.map(board.upload, datas))
    else:
        answers = []
        time.sleep(max(0.0, deadline - time.monotonic()))
    verify_s = time.perf_counter() - start
    done.set()
    for thread in threads:
        thread.join()
    statuses: dict[str, int] = {}
    for status, _, _, _ in answers:
        statuses[str(status)] = statuses.get(str(status), 0) + 1
    retry_after = sorted({int(h.get("retry-after", h.get("Retry-After", 0)) or 0) for s, _, h, _ in answers if s == 503})
    return {
        "readers": readers,
        "heavy_uploads": uploads,
        "heavy_bundle": str(heavy_path.relative_to(ROOT)) if heavy_path.is_relative_to(ROOT) else str(heavy_path),
        "heavy_episodes": len(heavy.episodes),
        "uploads_answered_s": round(verify_s, 1),
        "upload_statuses": statuses,
        "upload_answer_s": [round(t, 1) for *_, t in answers],
        "retry_after_s": retry_after,
        **summary(latencies),
        "errors": len(errors),
        "error_samples": errors[:5],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--readers", type=int, default=50, help="Concurrent reader threads.")
    parser.add_argument("--heavy", type=int, default=8, help="Concurrent heavy uploads.")
    parser.add_argument("--field-mib", type=int, default=100, help="Size of the huge metadata field (MiB).")
    parser.add_argument("--heavy-bundle", type=Path, default=HEAVY, help="The bundle uploaded --heavy times.")
    parser.add_argument("--max-seconds", type=float, default=600, help="Longest the readers run.")
    parser.add_argument("--json", action="store_true", help="Print the results as JSON only.")
    parser.add_argument("--out", type=Path, default=RESULTS, help="Where the results JSON goes.")
    args = parser.parse_args()
    if args.heavy < 1 or args.readers < 1:
        parser.error(f"--heavy and --readers must be at least 1, got {args.heavy} and {args.readers}.")

    small = read_bundle(SMALL)
    heavy = read_bundle(args.heavy_bundle)
    with tempfile.TemporaryDirectory(prefix="envgym-hostile-") as folder:
        board = Board(Path(folder), "--anonymous-uploads-per-minute", "1000")
        try:
            for path in SEED:
                status, document, _, _ = board.upload(path.read_bytes())
                if status != 201:
                    raise RuntimeError(f"seeding the board with {path.name} failed: {status} {document}")
            results: dict[str, Any] = {
                "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()},
                "commit": subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                         cwd=ROOT, check=False).stdout.strip(),  # fmt: skip
                "server_rss_mb_start": round(board.rss_mb(), 1),
                "reads_alone": reads_alone(board, 200),
                "absurd_trials": absurd_trials(board, small),
                "huge_field": huge_field(board, small, args.field_mib),
                "readers_alone": readers_during_heavy(board, heavy, 0, args.readers, 20.0, args.heavy_bundle.resolve()),
                "readers_during_heavy": readers_during_heavy(
                    board, heavy, args.heavy, args.readers, args.max_seconds, args.heavy_bundle.resolve()
                ),
            }
            results["server_rss_mb_end"] = round(board.rss_mb(), 1)
        finally:
            board.stop()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    if args.json:
        print(json.dumps(results, indent=2))
        return
    alone, during, same_load = results["reads_alone"], results["readers_during_heavy"], results["readers_alone"]
    print(f"reads alone: p50 {alone['p50_ms']} ms, p99 {alone['p99_ms']} ms ({alone['reads']} reads)")
    print(f"{same_load['readers']} readers, no uploads: p50 {same_load['p50_ms']} ms, p99 {same_load['p99_ms']} ms, "
          f"{same_load['errors']} errors over {same_load['reads']} reads")  # fmt: skip
    for row in results["absurd_trials"]:
        print(f"trials={row['trials']}: {row['status']} in {row['answer_ms']} ms; server RSS "
              f"{row['server_rss_mb_before']} -> {row['server_rss_mb_after']} MB ({row['reason'][:90]})")  # fmt: skip
    field = results["huge_field"]
    print(f"{field['field_mib']} MiB field ({field['upload_bytes']} B upload): {field['status']} in {field['answer_ms']} ms;"
          f" database {field['db_bytes_before']} -> {field['db_bytes_after']} B ({field['reason'][:90]})")  # fmt: skip
    print(f"{during['readers']} readers during {during['heavy_uploads']} heavy uploads ({during['heavy_bundle']}): "
          f"p50 {during['p50_ms']} ms, p99 {during['p99_ms']} ms, max {during['max_ms']} ms, "
          f"{during['errors']} errors over {during['reads']} reads; uploads {during['upload_statuses']} "
          f"answered within {during['uploads_answered_s']} s")  # fmt: skip
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
