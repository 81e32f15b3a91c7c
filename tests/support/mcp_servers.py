"""Real MCP servers, built with the official SDK, for the tests of envgym.mcp.

Run as a script for stdio (``python tests/support/mcp_servers.py calc``), or started over
streamable HTTP on 127.0.0.1 in a background thread by :func:`start_http`.

* ``calc``: a calculator and a notebook (``add``, ``multiply``, ``write_note``, ``read_note``);
* ``hostile``: a hand-written stdio server that misbehaves: a huge result and description
  (``flood``), schemas that are not object schemas, an overlong name, a tool that kills the
  server (``crash``), one that never answers (``hang``), one that answers non-MCP (``garbage``)
  and one that reports its own failure (``fail``).

Also the tasks and the verifier the MCP-v0 tests use (``verify_answer``).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from mcp.server.mcpserver import MCPServer

HERE = Path(__file__).resolve()

#: Tasks of the calculator server: the answer is a number the agent must compute with tools.
CALC_TASKS = [
    {"id": "sum", "goal": "What is 1234 + 4321? Use the add tool, then submit the result.", "answer": "5555"},
    {"id": "product", "goal": "What is 37 * 91? Use the multiply tool, then submit.", "answer": "3367"},
    {"id": "note", "goal": "Store 'blue' under the key 'color', read it back and submit it.", "answer": "blue"},
]


def verify_answer(task: dict[str, Any], transcript: list[dict[str, Any]], answer: str) -> float:
    """1 when the submitted answer is the task's (the ``success_reward``), else 0."""
    return 1.0 if answer.strip() == task["answer"] else 0.0


def verify_with_cost(task: dict[str, Any], transcript: list[dict[str, Any]], answer: str) -> dict[str, float]:
    """The answer's check plus a cost per tool call the server answered (``tool_calls_reward``)."""
    return {"success_reward": verify_answer(task, transcript, answer), "tool_calls_reward": -0.01 * len(transcript)}


def calc_server() -> MCPServer:
    server = MCPServer("envgym-test-calc")
    notes: dict[str, str] = {}

    @server.tool()
    def add(a: float, b: float) -> str:
        """Add two numbers."""
        return _number(a + b)

    @server.tool()
    def multiply(a: float, b: float) -> str:
        """Multiply two numbers."""
        return _number(a * b)

    @server.tool()
    def write_note(key: str, text: str) -> str:
        """Store a note under a key."""
        notes[key] = text
        return f"stored {key!r}"

    @server.tool()
    def read_note(key: str) -> str:
        """Read the note stored under a key."""
        if key not in notes:
            raise ValueError(f"no note {key!r}")
        return notes[key]

    @server.tool()
    def echo(text: str = "") -> str:
        """Return the text as it came (the overhead benchmark's trivial tool)."""
        return text

    return server


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def hostile_server(*, bad_schemas: bool = False) -> None:
    """A hand-written JSON-RPC server on stdio (no SDK, so nothing stops its bad replies);
    ``bad_schemas``: its listing also has input schemas that are not JSON object schemas."""
    tools = [
        {"name": "flood", "description": "x" * 50_000, "inputSchema": {"type": "object", "properties": {}}},
        {"name": "n" * 500, "inputSchema": {"type": "object"}},
        {"name": "flood", "description": "a second tool of the same name", "inputSchema": {"type": "object"}},
        {"name": "crash", "description": "kills the server", "inputSchema": {"type": "object"}},
        {"name": "hang", "description": "never answers", "inputSchema": {"type": "object"}},
        {"name": "fail", "description": "reports a failure", "inputSchema": {"type": "object"}},
        {"name": "garbage", "description": "answers something that is not MCP", "inputSchema": {"type": "object"}},
    ]
    if bad_schemas:
        tools += [
            {"name": "odd_schema", "description": "not an object schema", "inputSchema": {"type": "array"}},
            {"name": "bad_properties", "inputSchema": {"type": "object", "properties": [1, 2], "required": "a"}},
        ]

    def reply(request_id: Any, result: Any = None, error: Any = None) -> None:
        message = {"jsonrpc": "2.0", "id": request_id}
        message.update({"error": error} if error is not None else {"result": result})
        sys.stdout.write(json.dumps(message) + "\n")
        sys.stdout.flush()

    for line in sys.stdin:
        request = json.loads(line)
        method, request_id = request.get("method"), request.get("id")
        if request_id is None:
            continue  # a notification
        if method == "initialize":
            reply(
                request_id,
                {
                    "protocolVersion": request["params"]["protocolVersion"],
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": "envgym-test-hostile", "version": "0"},
                },
            )
        elif method == "tools/list":
            reply(request_id, {"tools": tools})
        elif method == "tools/call":
            name = request["params"]["name"]
            if name == "crash":
                os._exit(3)
            if name == "hang":
                continue
            if name == "garbage":
                sys.stdout.write("this is not JSON-RPC\n")
                sys.stdout.flush()
                reply(request_id, {"content": "not a list"})
                continue
            text = "A" * 1_000_000 if name == "flood" else "disk on fire" if name == "fail" else "ok"
            reply(request_id, {"content": [{"type": "text", "text": text}], "isError": name == "fail"})
        else:
            reply(request_id, error={"code": -32601, "message": f"method not found: {method}"})


SERVERS = {"calc": calc_server, "hostile": hostile_server, "bad_schemas": lambda: hostile_server(bad_schemas=True)}


def stdio_command(name: str) -> list[str]:
    """The command line that runs server ``name`` over stdio."""
    return [sys.executable, str(HERE), name]


def main(name: str) -> None:
    server = SERVERS[name]()
    if server is not None:
        server.run("stdio")


if __name__ == "__main__":
    main(sys.argv[1])
