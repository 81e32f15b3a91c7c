"""MCP call overhead: a trivial tool called directly and through MCP (stdio and streamable HTTP).

The tool is ``echo(text) -> text`` of an MCP server built with the official SDK (``MCPServer``),
run in its own process, as a user runs one. Rows (p50 and p99 of ``--calls`` calls, after 20
warm-up calls):

* **direct**: the tool's Python function called in process (the floor);
* **sdk stdio / sdk http**: the SDK's own async ``Client`` awaiting ``call_tool`` in a loop;
* **envgym stdio / envgym http**: :class:`envgym.mcp.MCPConnection`, the blocking client
  ``envgym/MCP-v0`` steps through (the SDK's client on a private event loop thread).

Overhead is each row's p50 minus the direct p50. (Not named ``mcp.py``: run as a script, that
name would shadow the ``mcp`` package.)

Usage::

    python benchmarks/perf/mcp_overhead.py                 # 500 calls per row
    python benchmarks/perf/mcp_overhead.py --quick --json  # 100 calls per row (the test suite's smoke run)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

WARMUP = 20


def echo(text: str = "") -> str:
    """Return the text as it came."""
    return text


def server() -> Any:
    from mcp.server.mcpserver import MCPServer

    mcp = MCPServer("envgym-bench-echo")
    mcp.add_tool(echo)
    return mcp


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def timed(call: Callable[[], Any], calls: int) -> list[float]:
    for _ in range(WARMUP):
        call()
    out = []
    for _ in range(calls):
        start = time.perf_counter()
        call()
        out.append(time.perf_counter() - start)
    return out


async def timed_async(client: Any, calls: int) -> list[float]:
    for _ in range(WARMUP):
        await client.call_tool("echo", {"text": "hi"})
    out = []
    for _ in range(calls):
        start = time.perf_counter()
        await client.call_tool("echo", {"text": "hi"})
        out.append(time.perf_counter() - start)
    return out


def sdk_row(transport: Any, calls: int) -> list[float]:
    from mcp.client.client import Client

    async def run() -> list[float]:
        async with Client(transport) as client:
            return await timed_async(client, calls)

    return asyncio.run(run())


def stdio_command() -> list[str]:
    return [sys.executable, __file__, "--serve", "stdio"]


def start_http() -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen(
        [sys.executable, __file__, "--serve", "http"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        bufsize=1,
    )
    assert process.stdout is not None
    url = process.stdout.readline().strip()
    if not url.startswith("http"):
        process.kill()
        raise RuntimeError(f"the HTTP server did not start (said {url!r})")
    return process, url


def measure(calls: int) -> dict[str, Any]:
    from mcp.client.stdio import StdioServerParameters, stdio_client

    from envgym.mcp import MCPConnection

    rows: dict[str, list[float]] = {"direct": timed(lambda: echo("hi"), calls)}
    command = stdio_command()
    print("sdk stdio ...", file=sys.stderr)
    rows["sdk stdio"] = sdk_row(stdio_client(StdioServerParameters(command=command[0], args=command[1:])), calls)
    print("envgym stdio ...", file=sys.stderr)
    with MCPConnection(command, timeout=60, connect_timeout=120) as connection:
        rows["envgym stdio"] = timed(lambda: connection.call_tool("echo", {"text": "hi"}), calls)
    process, url = start_http()
    try:
        print("sdk http ...", file=sys.stderr)
        rows["sdk http"] = sdk_row(url, calls)
        print("envgym http ...", file=sys.stderr)
        with MCPConnection(url, timeout=60, connect_timeout=120) as connection:
            rows["envgym http"] = timed(lambda: connection.call_tool("echo", {"text": "hi"}), calls)
    finally:
        process.terminate()
        process.wait(timeout=30)
    direct = percentile(rows["direct"], 50)
    return {
        "calls": calls,
        "machine": f"{platform.machine()} {platform.python_implementation()} {platform.python_version()}",
        "rows": {
            name: {
                "p50_ms": percentile(values, 50) * 1e3,
                "p99_ms": percentile(values, 99) * 1e3,
                "overhead_p50_ms": (percentile(values, 50) - direct) * 1e3,
            }
            for name, values in rows.items()
        },
    }


def serve(transport: str) -> None:
    mcp = server()
    if transport == "stdio":
        mcp.run("stdio")
        return
    from envgym.mcp.server import HTTPServer

    http = HTTPServer(mcp)
    print(http.url, flush=True)
    http.run()


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=500, help="timed calls per row")
    parser.add_argument("--quick", action="store_true", help="100 calls per row")
    parser.add_argument("--json", action="store_true", help="one JSON document on stdout")
    parser.add_argument("--serve", choices=("stdio", "http"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        serve(args.serve)
        return
    report = measure(100 if args.quick else args.calls)
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print(f"MCP call overhead, echo tool, {report['calls']} calls per row ({report['machine']})")
    print(f"{'row':<14} {'p50 ms':>9} {'p99 ms':>9} {'overhead p50 ms':>16}")
    for name, row in report["rows"].items():
        print(f"{name:<14} {row['p50_ms']:>9.3f} {row['p99_ms']:>9.3f} {row['overhead_p50_ms']:>16.3f}")


if __name__ == "__main__":
    main()
