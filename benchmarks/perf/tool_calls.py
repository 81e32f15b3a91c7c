"""Tool-call round trip per backend: one ``execute_sql`` call end to end, model time excluded.

Every way envgym carries a tool call between a model and a tool env, timed on
``envgym/Tools-SQL-Easy-v0`` (``size="small"``, seed 0), with the same call every turn
(``SELECT count(*) FROM <the first table>``) and the model's reply *scripted*: no generation,
so what is measured is the plumbing. Rows (p50 and p99 of ``--calls`` calls each, after a
warm-up, backends interleaved in chunks so a load change on a shared machine hits them all):

* **direct**: ``env.step(json_call)``, the floor.
* **openai native**: envgym's ``openai`` agent (``agents/openai_api.py``) against a small
  OpenAI-compatible server on 127.0.0.1 (in its own process, as a model server runs) that
  answers with ``message.tool_calls``; one turn as the harness plays it:
  ``AgentInput.for_turn`` (the chat messages), ``agent.act`` (the request with ``tools=``, HTTP,
  the reply's ``tool_calls`` written back as ``<tool_call>`` markup), ``Conversation.parse``,
  ``env.step``, ``Conversation.record``.
* **openai text fallback**: the same, against a server that refuses ``tools=`` (HTTP 400, as
  vLLM without a tool parser): the agent asks without tools from then on and the reply is
  ``<action>{json}</action>``, read as text.
* **hf template (no generation)**: the ``hf`` agent's work around the model: the prompt ids
  through the chat template with the tools rendered (``envgym.rollout.lm.chat_prompt_ids``,
  SmolLM2's tokenizer with TRL's Qwen3 tool template), the scripted reply's ids decoded,
  ``Conversation.parse`` of its ``<tool_call>`` block, ``env.step``, ``Conversation.record``.
  The model's forward passes and the per-token stop checks are not included.

Overhead is each row's p50 minus the direct p50. Episodes end at the env's turn limit (12; the
scripted model never submits); the reset and the new ``Conversation`` of the next episode are
not timed. The server counts its replies (``tool_calls``, ``text``, ``rejected``) and every row
counts the steps the env took as a valid call with a result. MCP and ``envgym serve`` have their
own scripts: ``mcp_overhead.py`` and ``serve.py``.

Usage::

    python benchmarks/perf/tool_calls.py                 # 300 calls per row
    python benchmarks/perf/tool_calls.py --quick --json  # 30 calls per row (the test suite's smoke run)
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import envgym
from envgym.rollout import AgentInput
from envgym.rollout.prompting import Conversation, PromptConfig
from envgym.rollout.toolcalls import render_tool_calls

ENV_ID = "envgym/Tools-SQL-Easy-v0"
SIZE = "small"
SEED = 0
WARMUP = 10
#: Calls of one backend in a row before the next backend's turn.
CHUNK = 10
BACKENDS = ("direct", "openai native", "openai text fallback", "hf template (no generation)")
SEE_ALSO = {
    "mcp": "benchmarks/perf/mcp_overhead.py (a tool over MCP, stdio and HTTP)",
    "serve": "benchmarks/perf/serve.py (envgym serve: a step through envgym.remote)",
}


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def load() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except (AttributeError, OSError):  # platforms without a load average
        return None


# -- the scripted chat server --------------------------------------------------------------------


class ScriptedServer:
    """An OpenAI-compatible ``/v1/chat/completions`` on 127.0.0.1 that always makes ``call``.

    A request with ``tools`` gets the call as ``message.tool_calls``, or HTTP 400 when
    ``reject_tools``; a request without gets ``<action>{call}</action>`` as text. ``replies``
    counts each kind (``GET /stats``; ``POST /reset`` clears them). The test suite's
    ``tests/support/openai_server.py`` does more; a benchmark does not import test code.
    """

    def __init__(self, call: dict[str, Any], *, reject_tools: bool) -> None:
        self.call = call
        self.reject_tools = reject_tools
        self.replies: Counter[str] = Counter()
        self._lock = threading.Lock()
        owner = self

        class Handler(_Handler):
            server_owner = owner

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def answer(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        if body.get("tools"):
            kind = "rejected" if self.reject_tools else "tool_calls"
        else:
            kind = "text"
        with self._lock:
            self.replies[kind] += 1
        if kind == "rejected":
            return 400, {"error": {"message": '"auto" tool choice requires --enable-auto-tool-choice'}}
        if kind == "tool_calls":
            function = {"name": self.call["name"], "arguments": json.dumps(self.call["arguments"])}
            message = {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": "call_x", "type": "function", "function": function}],
            }
            finish = "tool_calls"
        else:
            message = {"role": "assistant", "content": f"<action>{json.dumps(self.call)}</action>"}
            finish = "stop"
        reply = {
            "id": "chatcmpl-bench",
            "object": "chat.completion",
            "model": body.get("model", "scripted"),
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        }
        return 200, reply


class _Handler(BaseHTTPRequestHandler):
    server_owner: ScriptedServer
    protocol_version = "HTTP/1.1"  # keep-alive, as real servers
    # TCP_NODELAY, as uvicorn (vLLM) sets it: the headers and the body go out in two writes, and
    # with Nagle's algorithm the body waits for the client's delayed ACK (about 40 ms on Linux).
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _send(self, status: int, payload: Any) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        owner = self.server_owner
        if self.path.rstrip("/") == "/stats":
            with owner._lock:
                self._send(200, dict(owner.replies))
        else:
            self._send(404, {"error": {"message": "not found"}})

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        owner = self.server_owner
        path = self.path.rstrip("/")
        if path == "/v1/chat/completions":
            self._send(*owner.answer(json.loads(raw)))
        elif path == "/reset":
            with owner._lock:
                owner.replies.clear()
            self._send(200, {})
        else:
            self._send(404, {"error": {"message": "not found"}})


def serve(call: str, reject_tools: bool) -> None:
    """Run a :class:`ScriptedServer` in this process (``--serve``): print its URL, serve until killed."""
    server = ScriptedServer(json.loads(call), reject_tools=reject_tools)
    print(server.url, flush=True)
    # Gone with the benchmark: its end of our stdin closes when it exits, however it exits.
    threading.Thread(target=lambda: (sys.stdin.read(), os._exit(0)), daemon=True).start()
    server.httpd.serve_forever(poll_interval=0.05)


def start_server(call: dict[str, Any], *, reject_tools: bool) -> tuple[subprocess.Popen[str], str]:
    """A :class:`ScriptedServer` in its own process, as a model server runs: ``(process, url)``."""
    mode = "no-tools" if reject_tools else "tools"
    process = subprocess.Popen(
        [sys.executable, __file__, "--serve", mode, "--serve-call", json.dumps(call)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        bufsize=1,
    )
    assert process.stdout is not None
    url = process.stdout.readline().strip()
    if not url.startswith("http"):
        process.kill()
        raise RuntimeError(f"the scripted chat server did not start (said {url!r})")
    return process, url


# -- backends: start_episode() untimed, turn() timed ------------------------------------------------


def _valid(observation: str, info: dict[str, Any]) -> bool:
    return info.get("action_valid") is True and observation.startswith("Tool result (execute_sql)")


class Direct:
    """``env.step`` of the JSON call."""

    def __init__(self, call: dict[str, Any]) -> None:
        self.env = envgym.make(ENV_ID, size=SIZE)
        self.action = json.dumps(call)
        self.episodes = 0

    def start_episode(self) -> None:
        self.env.reset(seed=SEED)
        self.episodes += 1

    def turn(self) -> tuple[bool, bool]:
        obs, _, terminated, truncated, info = self.env.step(self.action)
        return _valid(obs, info), terminated or truncated

    def details(self) -> dict[str, Any]:
        return {}

    def close(self) -> None:
        self.env.close()


class Chat(Direct):
    """One harness turn of a chat agent: input, reply, parse, step, record."""

    def __init__(self, call: dict[str, Any]) -> None:
        super().__init__(call)
        self.config = PromptConfig()
        self.obs, self.info = "", {}
        self.conv: Conversation | None = None

    def start_episode(self) -> None:
        self.obs, self.info = self.env.reset(seed=SEED)
        self.episodes += 1
        self.conv = Conversation(self.config, ENV_ID, self.obs, self.info)

    def reply(self, item: AgentInput) -> tuple[str, int | None]:
        raise NotImplementedError

    def turn(self) -> tuple[bool, bool]:
        conv = self.conv
        assert conv is not None
        item = AgentInput.for_turn(f"ep{self.episodes}", ENV_ID, self.obs, self.info, conv.turns, conv, None)
        text, tokens = self.reply(item)
        parsed = conv.parse(text)
        obs, _, terminated, truncated, info = self.env.step(parsed.action)
        conv.record(text, parsed, obs, info, completion_tokens=tokens)
        self.obs, self.info = obs, info
        return _valid(obs, info), terminated or truncated


class OpenAI(Chat):
    """The ``openai`` agent against a :class:`ScriptedServer` in its own process."""

    def __init__(self, call: dict[str, Any], *, reject_tools: bool) -> None:
        super().__init__(call)
        import httpx
        from envgym.agents.openai_api import OpenAIAgent

        self.process, url = start_server(call, reject_tools=reject_tools)
        self.root = url.removesuffix("/v1")
        self.stats = httpx.Client(timeout=60)
        self.agent = OpenAIAgent("scripted", url, concurrency=1, max_retries=0, timeout_s=60)
        self.modes: Counter[str] = Counter()

    def start_episode(self) -> None:
        super().start_episode()
        self.agent.start_episode(f"ep{self.episodes}", ENV_ID, SEED)

    def reply(self, item: AgentInput) -> tuple[str, int | None]:
        output = self.agent.act([item])[0]
        self.modes[str(output.extra.get("tool_mode"))] += 1
        return output.text, None

    def reset_counts(self) -> None:
        self.stats.post(f"{self.root}/reset").raise_for_status()
        self.modes.clear()

    def details(self) -> dict[str, Any]:
        replies = self.stats.get(f"{self.root}/stats").raise_for_status().json()
        return {"server_replies": replies, "agent_tool_mode": dict(self.modes)}

    def close(self) -> None:
        self.agent.close()
        self.stats.close()
        self.process.terminate()
        self.process.wait(timeout=30)
        for pipe in (self.process.stdin, self.process.stdout):
            if pipe is not None:
                pipe.close()
        super().close()


class HFTemplate(Chat):
    """The ``hf`` agent's prompt and reply work for a tool env, the model left out."""

    def __init__(self, call: dict[str, Any]) -> None:
        super().__init__(call)
        from envgym.models import load_tokenizer
        from envgym.rollout.lm import chat_prompt_ids
        from envgym.rollout.toolcalls import tool_chat_template

        self.tokenizer = load_tokenizer("smollm2")  # the tiny test model's and the bundled model's
        self.prompt_ids = chat_prompt_ids
        self.tools_rendered = tool_chat_template(self.tokenizer) is not None
        self.reply_ids = self.tokenizer(render_tool_calls([call]), add_special_tokens=False)["input_ids"]
        self.prompt_tokens: list[int] = []

    def reply(self, item: AgentInput) -> tuple[str, int | None]:
        self.prompt_tokens.append(len(self.prompt_ids(self.tokenizer, item)))
        return self.tokenizer.decode(self.reply_ids, skip_special_tokens=True), len(self.reply_ids)

    def details(self) -> dict[str, Any]:
        return {
            "model_time": "excluded (no generation)",
            "tools_rendered": self.tools_rendered,
            "prompt_tokens_mean": sum(self.prompt_tokens) / max(1, len(self.prompt_tokens)),
            "prompt_tokens_max": max(self.prompt_tokens, default=0),
        }


def first_table() -> str:
    env = envgym.make(ENV_ID, size=SIZE)
    env.reset(seed=SEED)
    obs, *_ = env.step(json.dumps({"name": "list_tables", "arguments": {}}))
    env.close()
    head = obs.split("\n", 1)[0]  # "Tool result (list_tables): books, loans, members"
    return head.split(":", 1)[1].split(",")[0].strip()


def measure(calls: int, warmup: int = WARMUP) -> dict[str, Any]:
    load_before = load()
    call = {"name": "execute_sql", "arguments": {"query": f"SELECT count(*) FROM {first_table()}"}}
    print("loading the tokenizer and the tool template ...", file=sys.stderr)
    backends: dict[str, Direct] = {}
    times: dict[str, list[float]] = {name: [] for name in BACKENDS}
    valid: Counter[str] = Counter()
    try:
        backends["direct"] = Direct(call)
        backends["openai native"] = OpenAI(call, reject_tools=False)
        backends["openai text fallback"] = OpenAI(call, reject_tools=True)
        backends["hf template (no generation)"] = HFTemplate(call)
        for backend in backends.values():
            backend.start_episode()
            for _ in range(warmup):  # connections, the fallback's first refused request, caches
                if backend.turn()[1]:
                    backend.start_episode()
            if isinstance(backend, OpenAI):
                backend.reset_counts()
            if isinstance(backend, HFTemplate):
                backend.prompt_tokens.clear()
            backend.episodes = 0
            backend.start_episode()
        print(f"timing {calls} calls per backend ...", file=sys.stderr)
        while any(len(values) < calls for values in times.values()):
            for name, backend in backends.items():
                for _ in range(min(CHUNK, calls - len(times[name]))):
                    start = time.perf_counter()
                    ok, over = backend.turn()
                    times[name].append(time.perf_counter() - start)
                    valid[name] += ok
                    if over:
                        backend.start_episode()
        direct = percentile(times["direct"], 50)
        rows = {
            name: {
                "calls": len(times[name]),
                "p50_ms": percentile(times[name], 50) * 1e3,
                "p99_ms": percentile(times[name], 99) * 1e3,
                "overhead_p50_ms": (percentile(times[name], 50) - direct) * 1e3,
                "valid_steps": valid[name],
                "episodes": backend.episodes,
                **backend.details(),
            }
            for name, backend in backends.items()
        }
    finally:
        for backend in backends.values():
            backend.close()
    return {
        "env_id": ENV_ID,
        "size": SIZE,
        "seed": SEED,
        "call": call,
        "calls": calls,
        "warmup": warmup,
        "model_time": "excluded: replies are scripted",
        "machine": f"{platform.machine()} {platform.python_implementation()} {platform.python_version()}",
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "load_before": load_before,
        "load_after": load(),
        "rows": rows,
        "see_also": SEE_ALSO,
    }


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300, help="timed calls per backend")
    parser.add_argument("--quick", action="store_true", help="30 calls per backend")
    parser.add_argument("--json", action="store_true", help="one JSON document on stdout")
    parser.add_argument("--serve", choices=("tools", "no-tools"), help=argparse.SUPPRESS)
    parser.add_argument("--serve-call", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        serve(args.serve_call, reject_tools=args.serve == "no-tools")
        return
    if args.calls < 1:
        parser.error(f"--calls must be at least 1, got {args.calls}")
    report = measure(30 if args.quick else args.calls)
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print(
        f"Tool-call round trip, {report['env_id']} ({report['size']}, seed {report['seed']}), "
        f"{report['calls']} calls per backend, model time excluded (scripted replies)"
    )
    print(f"{report['machine']}, {report['cpus']} CPUs, load {report['load_before']} -> {report['load_after']}")
    print(f"{'backend':<28} {'p50 ms':>8} {'p99 ms':>8} {'overhead p50 ms':>16} {'valid':>6}")
    for name, row in report["rows"].items():
        print(
            f"{name:<28} {row['p50_ms']:>8.3f} {row['p99_ms']:>8.3f} {row['overhead_p50_ms']:>16.3f} "
            f"{row['valid_steps']:>6}"
        )
    for name in ("openai native", "openai text fallback"):
        print(f"{name}: server replies {report['rows'][name]['server_replies']}")
    hf = report["rows"]["hf template (no generation)"]
    print(
        f"hf template: tools rendered {hf['tools_rendered']}, prompt {hf['prompt_tokens_mean']:.0f} tokens on "
        f"average (max {hf['prompt_tokens_max']}); model time excluded"
    )
    for what, where in report["see_also"].items():
        print(f"{what}: see {where}")


if __name__ == "__main__":
    main()
