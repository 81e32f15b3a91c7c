"""An agent backed by any OpenAI-compatible chat-completions server (vLLM, llama.cpp, OpenAI, ...).

One ``POST {base_url}/chat/completions`` per live episode, sent concurrently (at most
``concurrency`` in flight) from a private thread pool, so ``act`` works the same from a plain
thread, a worker thread, or code that runs inside an event loop. Only ``httpx`` is needed, not the
``openai`` package.

Failures are split in two: connection errors, timeouts, HTTP 429, HTTP 5xx and unreadable replies
(malformed JSON, no ``choices``) are transient and retried with exponential backoff (jittered,
honouring ``Retry-After``); any other 4xx is a mistake in the request and fails at once. When the
retries are spent :class:`AgentRequestError` is raised; the runners record it as an agent error
and retry the episode, so a flaky server never turns into a silent zero score.

**Tools.** When an input's ``info["tools"]`` lists the env's tools (docs/tools.md), the request
carries them (``tools=``, ``tool_choice: "auto"``) and the history goes as tool messages (an
assistant turn that called tools has ``tool_calls``; the env's answer is a ``role: "tool"``
message with the ``tool_call_id``; :func:`envgym.rollout.toolcalls.tool_messages`). The reply's
``message.tool_calls`` are written into the reply text as ``<tool_call>`` blocks, which the
prompting layer turns into the env's action; ``extra["tool_calls"]`` keeps them. Calls get the
ids ``call_<turn>_<k>``, not the server's (random ones would make reruns differ), and the tool
messages sent back refer to those. A server that refuses ``tools=`` (HTTP 400/404/422 to a request with
tools) is asked again without them, and so is every later request of the agent
(``tool_mode == "text"``, logged once and noted in every turn's ``extra["tool_mode"]``): the
reply is then parsed as text, as for any env (``<tool_call>`` or ``<action>`` blocks).

Example::

    agent = OpenAIAgent("Qwen/Qwen2.5-7B-Instruct", "http://127.0.0.1:8000/v1", concurrency=16)
"""

from __future__ import annotations

import email.utils
import hashlib
import json
import logging
import os
import random
import re
import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from envgym.errors import ConfigError, EnvgymError, MissingDependencyError
from envgym.rollout import Agent, AgentInput, AgentOutput
from envgym.rollout.lm import stop_strings
from envgym.rollout.toolcalls import render_tool_calls, tool_messages, tools_of

__all__ = ["AgentRequestError", "OpenAIAgent", "parse_openai_spec"]

logger = logging.getLogger(__name__)

#: Longest wait a server's ``Retry-After`` may impose (a misconfigured server could ask for hours).
MAX_RETRY_AFTER_S = 120.0
#: How much of an error body goes into an error message.
_BODY_EXCERPT = 300
_SPEC_EXAMPLE = "openai:Qwen/Qwen2.5-7B-Instruct@http://127.0.0.1:8000/v1"


class AgentRequestError(EnvgymError):
    """A chat-completions request failed for good (retries spent, or a non-retryable 4xx).

    Attributes:
        status: the HTTP status of the last attempt, or ``None`` when no response came
            (connection error, timeout) or the response was unreadable with a 2xx status.
        attempts: how many requests were sent.
    """

    def __init__(self, message: str, *, status: int | None = None, attempts: int = 1) -> None:
        super().__init__(message)
        self.status = status
        self.attempts = attempts


class _Retryable(Exception):
    """Internal: one attempt failed in a way worth retrying."""

    def __init__(self, message: str, status: int | None = None, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after


def parse_openai_spec(arg: str) -> dict[str, str]:
    """Split the CLI argument of ``--agent openai:MODEL@URL`` into ``{"model", "base_url"}``.

    The model is everything before the *last* ``@`` (model names may hold ``/`` and ``:``), the
    URL everything after it. A leading ``openai:`` is accepted and dropped.

    Args:
        arg: ``"MODEL@URL"`` or ``"openai:MODEL@URL"``, e.g. ``"Qwen/Qwen2.5-7B@http://127.0.0.1:8000/v1"``.

    Returns:
        ``{"model": ..., "base_url": ...}``, ready for ``OpenAIAgent(**result)``.

    Raises:
        ConfigError: no ``@``, an empty model, or a URL that does not start with http:// or https://.
    """
    if not isinstance(arg, str):
        raise ConfigError(f"an openai agent spec must be a string like {_SPEC_EXAMPLE!r}, got {arg!r}.")
    text = arg.strip()
    if text.lower().startswith("openai:"):
        text = text[len("openai:") :]
    model, sep, url = text.rpartition("@")
    model, url = model.strip(), url.strip()
    if not sep:
        raise ConfigError(f"an openai agent spec is MODEL@URL, got {arg!r} (no '@'). Example: {_SPEC_EXAMPLE!r}.")
    if not model:
        raise ConfigError(f"the openai agent spec {arg!r} names no model before '@'. Example: {_SPEC_EXAMPLE!r}.")
    if not url.lower().startswith(("http://", "https://")):
        raise ConfigError(
            f"the server URL of an openai agent spec must start with http:// or https://, got {url!r} "
            f"in {arg!r}. Example: {_SPEC_EXAMPLE!r}."
        )
    return {"model": model, "base_url": url}


def _import_httpx() -> Any:
    try:
        import httpx  # optional: imported only when an agent is built
    except ImportError as err:
        missing = MissingDependencyError("httpx", "openai", "OpenAIAgent")
        # The extra may be absent from older installs; the bare package always works.
        message = f"{missing} (or install the client alone: pip install httpx)"
        missing.args = (message,)
        missing.msg = message  # ImportError.__str__ reads msg, not args
        raise missing from err
    return httpx


def _retry_after_seconds(value: str | None) -> float | None:
    """``Retry-After`` as seconds: either a number of seconds or an HTTP date; ``None`` if absent/bad."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - time.time())


def _excerpt(text: str, limit: int = _BODY_EXCERPT) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


_CLOSING_TAG = re.compile(r"</\s*([A-Za-z_][A-Za-z0-9_-]*)\s*>\Z")


def _closing_tag_to_restore(text: str, stop: Sequence[str], choice: Mapping[str, Any]) -> str | None:
    """The stop string to put back at the end of ``text`` (a reply with ``finish_reason`` "stop"), or ``None``.

    A reply that ended at a stop string comes back without it. When a stop string is a closing
    tag ``</name>`` and ``text`` has an opening ``<name>`` after its last ``</name>``, the reply
    stopped right after its action: that closing tag is returned. vLLM's ``stop_reason`` names
    what ended the reply: the stop string decides between several candidates, and ``None`` or a
    token id (the end-of-text token) means no stop string was hit, so nothing is put back. Without
    it (OpenAI's API), the tag opened last wins.
    """
    stop_reason = choice.get("stop_reason")
    if "stop_reason" in choice and not isinstance(stop_reason, str):
        return None  # vLLM: the model ended the reply itself, not at a stop string
    best: tuple[int, str] | None = None
    for candidate in stop:
        match = _CLOSING_TAG.match(candidate)
        if match is None:
            continue
        name = re.escape(match[1])
        opened = [m.end() for m in re.finditer(rf"<\s*{name}\s*>", text, re.IGNORECASE)]
        closed = [m.end() for m in re.finditer(rf"<\s*/\s*{name}\s*>", text, re.IGNORECASE)]
        if not opened or (closed and closed[-1] > opened[-1]):
            continue  # no open tag of this name: the reply did not stop inside its action
        if isinstance(stop_reason, str) and stop_reason == candidate:
            return candidate
        if best is None or opened[-1] > best[0]:
            best = (opened[-1], candidate)
    if isinstance(stop_reason, str) and stop_reason in stop:
        return None  # the server names the stop string it matched, and it closes no open tag
    return None if best is None else best[1]


#: Statuses of a server that does not take ``tools=`` (vLLM without a tool parser answers 400).
_NO_TOOLS_STATUS = frozenset({400, 404, 422})


def _tool_calls(value: Any) -> list[dict[str, Any]]:
    """``message.tool_calls`` of a reply as ``{"id", "name", "arguments"}`` each (arguments decoded
    from their JSON string; a call whose arguments are not a JSON object keeps them as written,
    under ``arguments["_raw"]``, so the env reports the error). Entries that are not function
    calls are skipped. The ids are ``call_<k>`` here (:func:`_number_calls` makes them the turn's):
    a server's own ids are random, and the agent's ids are what its tool messages refer to."""
    if not isinstance(value, list):
        return []
    calls = []
    for k, entry in enumerate(value):
        function = entry.get("function") if isinstance(entry, dict) else None
        name = function.get("name") if isinstance(function, dict) else None
        if not isinstance(name, str) or not name:
            continue
        raw = function.get("arguments", "{}")
        arguments: Any = raw
        if isinstance(raw, str):
            try:
                arguments = json.loads(raw) if raw.strip() else {}
            except ValueError:
                arguments = None
        if not isinstance(arguments, dict):
            arguments = {"_raw": raw if isinstance(raw, str) else json.dumps(raw)}
        calls.append({"id": f"call_{k}", "name": name, "arguments": arguments})
    return calls


def _number_calls(output: AgentOutput, turn: int) -> None:
    """Give the tool calls of ``output`` the ids ``call_<turn>_<k>`` (in its text and extra): the
    same ids on every rerun, as the prompting layer gives the calls it reads from text."""
    calls = output.extra.get("tool_calls")
    if not calls:
        return
    markup = render_tool_calls(calls)
    head = output.text[: len(output.text) - len(markup)] if output.text.endswith(markup) else ""
    for k, call in enumerate(calls):
        call["id"] = f"call_{turn}_{k}"
    output.text = head + render_tool_calls(calls)


def _int_list(value: Any) -> list[int] | None:
    if isinstance(value, list) and all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        return list(value)
    return None


class OpenAIAgent(Agent):
    """Chat agent talking to an OpenAI-compatible ``/chat/completions`` endpoint.

    Args:
        model: model name as the server knows it.
        base_url: the API root, e.g. ``http://127.0.0.1:8000/v1`` (``/chat/completions`` is appended).
        api_key: bearer token; defaults to ``$OPENAI_API_KEY``, else ``"EMPTY"`` (what vLLM accepts).
        concurrency: most requests in flight at once (over all ``act`` calls of this agent).
        max_retries: retries after the first attempt for transient failures (so ``max_retries + 1``
            requests at most per input).
        backoff_s: base of the exponential backoff: attempt ``k`` waits about ``backoff_s * 2**k``
            (times a random factor in [0.5, 1.5)), or the server's ``Retry-After`` when longer.
        timeout_s: per-request timeout (connect, read, write and pool), in seconds.
        temperature: sampling temperature.
        top_p: nucleus sampling mass.
        max_tokens: most completion tokens per reply; lowered per turn to ``AgentInput.max_new_tokens``.
            ``AgentInput.stop`` goes out as the request's ``stop`` list. The API drops the stop
            string from the reply, so when a reply ended at a stop string that closes an action tag
            left open in it (``<action>up`` for the stop ``</action>``), the closing tag is put
            back (``extra["stop_appended"]`` names it) and the action still parses. (OpenAI's own
            API takes at most 4 stop strings; vLLM takes any number.)
        seed: when set, every request carries a seed derived from (this seed, episode seed, group
            member, turn), so reruns sample the same replies on servers that honour ``seed`` and
            the members of a group sample differently.
        logprobs: ask for per-token log-probabilities (filled into ``AgentOutput.logprobs``).
        extra_body: extra JSON fields merged into every request body (they win over the agent's
            own), e.g. ``{"return_token_ids": True}`` for vLLM token ids or ``{"top_k": 20}``.

    Raises:
        ConfigError: a bad argument (non-positive concurrency, URL without http(s)://, ...).
        MissingDependencyError: ``httpx`` is not installed.
    """

    chat = True

    def __init__(
        self,
        model: str,
        base_url: str,
        *,
        api_key: str | None = None,
        concurrency: int = 8,
        max_retries: int = 4,
        backoff_s: float = 0.5,
        timeout_s: float = 60.0,
        temperature: float = 1.0,
        top_p: float = 1.0,
        max_tokens: int = 256,
        seed: int | None = None,
        logprobs: bool = False,
        extra_body: Mapping[str, Any] | None = None,
    ) -> None:
        if not isinstance(model, str) or not model.strip():
            raise ConfigError(f"model must be a non-empty string (the server's model name), got {model!r}.")
        if not isinstance(base_url, str) or not base_url.strip().lower().startswith(("http://", "https://")):
            raise ConfigError(
                f"base_url must start with http:// or https://, got {base_url!r}; e.g. 'http://127.0.0.1:8000/v1'."
            )
        for name, value, low in (
            ("concurrency", concurrency, 1),
            ("max_retries", max_retries, 0),
            ("max_tokens", max_tokens, 1),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ConfigError(f"{name} must be an integer >= {low}, got {value!r}.")
        for name, value, positive in (("backoff_s", backoff_s, False), ("timeout_s", timeout_s, True)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0 or (positive and value == 0):
                raise ConfigError(f"{name} must be a number {'> 0' if positive else '>= 0'}, got {value!r}.")
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
            raise ConfigError(f"seed must be an integer or None, got {seed!r}.")
        if extra_body is not None and not isinstance(extra_body, Mapping):
            raise ConfigError(f"extra_body must be a mapping of JSON fields or None, got {extra_body!r}.")
        self._httpx = _import_httpx()  # fail at construction, before any episode starts

        self.model = model.strip()
        self.base_url = base_url.strip().rstrip("/")
        self.api_key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY") or "EMPTY"
        self.concurrency = concurrency
        self.max_retries = max_retries
        self.backoff_s = float(backoff_s)
        self.timeout_s = float(timeout_s)
        self.temperature = temperature
        self.top_p = top_p
        self.max_tokens = max_tokens
        self.seed = seed
        self.logprobs = logprobs
        self.extra_body = dict(extra_body or {})
        self.name = f"openai:{self.model}"

        #: How tool calls go: ``None`` until a request with tools was answered, then ``"native"``
        #: (``tools=`` sent, ``tool_calls`` read) or ``"text"`` (the server refused ``tools=``).
        self.tool_mode: str | None = None
        self._episodes: dict[str, tuple[int | None, int]] = {}  # episode id -> (env seed, member)
        self._lock = threading.Lock()
        self._client: Any = None
        self._pool: ThreadPoolExecutor | None = None
        self._jitter = random.Random()  # jitter only spreads retries; it need not be reproducible

    # -- episode bookkeeping -------------------------------------------------------------------

    def start_episode(self, episode_id: str, env_id: str, seed: int | None, *, member: int = 0) -> None:
        with self._lock:
            self._episodes[episode_id] = (seed, member)

    def end_episode(self, episode_id: str) -> None:
        with self._lock:
            self._episodes.pop(episode_id, None)

    def reset(self) -> None:
        with self._lock:
            self._episodes.clear()

    def request_seed(self, item: AgentInput) -> int | None:
        """The ``seed`` sent for ``item``: a hash of (agent seed, episode seed, member, turn), or
        ``None`` when the agent has no seed. An episode never started is keyed by its id instead."""
        if self.seed is None:
            return None
        with self._lock:
            known = self._episodes.get(item.episode_id)
        if known is None:
            key = f"{self.seed}|id={item.episode_id}|{item.turn}"
        else:
            key = f"{self.seed}|{known[0]}|{known[1]}|{item.turn}"
        # 31 bits: llama.cpp and some proxies reject seeds outside a signed/unsigned 32-bit int.
        return int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big") % (2**31 - 1)

    # -- requests ------------------------------------------------------------------------------

    def _ensure_started(self) -> tuple[Any, ThreadPoolExecutor]:
        with self._lock:
            if self._client is None:
                httpx = self._httpx
                self._client = httpx.Client(
                    timeout=httpx.Timeout(self.timeout_s),
                    limits=httpx.Limits(max_connections=self.concurrency, max_keepalive_connections=self.concurrency),
                    headers={"Authorization": f"Bearer {self.api_key}"},
                )
            if self._pool is None:
                # The pool's size is the concurrency cap: requests beyond it queue here, not at the server.
                self._pool = ThreadPoolExecutor(max_workers=self.concurrency, thread_name_prefix="envgym-openai")
            return self._client, self._pool

    def build_request(self, item: AgentInput) -> dict[str, Any]:
        """The JSON body sent for ``item`` (public so runners and tests can inspect it)."""
        messages = [dict(m) for m in item.messages] or [{"role": "user", "content": item.observation}]
        max_tokens = self.max_tokens
        if item.max_new_tokens is not None:
            max_tokens = max(1, min(max_tokens, int(item.max_new_tokens)))
        body: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "temperature": self.temperature,
            "top_p": self.top_p,
            "max_tokens": max_tokens,
        }
        seed = self.request_seed(item)
        if seed is not None:
            body["seed"] = seed
        stop = stop_strings(item)
        if stop:
            body["stop"] = list(stop)
        if self.logprobs:
            body["logprobs"] = True
        tools = tools_of(item.info) if self.tool_mode != "text" else []
        if tools:
            body["messages"] = tool_messages(messages)
            body["tools"] = tools
            body["tool_choice"] = "auto"
            if item.info.get("parallel_tool_calls") is not None:
                body["parallel_tool_calls"] = bool(item.info["parallel_tool_calls"])
        body.update(self.extra_body)
        return body

    def act(self, batch: Sequence[AgentInput]) -> list[AgentOutput]:
        """Send one request per input concurrently; return the replies in input order.

        Raises:
            AgentRequestError: a request failed for good (the first such input, in input order).
        """
        if not batch:
            return []
        client, pool = self._ensure_started()
        bodies = [self.build_request(item) for item in batch]
        futures: list[Future[AgentOutput]] = [
            pool.submit(self._complete_with_tools, client, body, item) for body, item in zip(bodies, batch, strict=True)
        ]
        outputs: list[AgentOutput] = []
        try:
            for future in futures:
                outputs.append(future.result())
        except BaseException:
            for future in futures:
                future.cancel()  # drop requests not sent yet; those in flight finish on their own
            raise
        return outputs

    def _complete_with_tools(self, client: Any, body: dict[str, Any], item: AgentInput) -> AgentOutput:
        """:meth:`_complete`, falling back to a request without tools when the server refuses them.

        A 4xx to a request with ``tools`` switches the agent to ``tool_mode = "text"`` and asks again
        without them; when that request is refused too, the fault was not the tools: the mode goes
        back and the first error is raised.
        """
        if "tools" not in body:
            output = self._complete(client, body)
            if self.tool_mode == "text" and tools_of(item.info):
                output.extra["tool_mode"] = "text"
            return output
        try:
            output = self._complete(client, body)
        except AgentRequestError as err:
            if err.status not in _NO_TOOLS_STATUS:
                raise
            with self._lock:
                before, self.tool_mode = self.tool_mode, "text"
            try:
                output = self._complete(client, self.build_request(item))
            except AgentRequestError:
                with self._lock:
                    if self.tool_mode == "text":
                        self.tool_mode = before
                raise err from None
            if before != "text":
                logger.warning(
                    "%s: the server refused a request with tools (%s); tool calls are read from the reply text "
                    "from now on.",
                    self.name,
                    err,
                )
            output.extra["tool_mode"] = "text"
            return output
        with self._lock:
            if self.tool_mode is None:
                self.tool_mode = "native"
        output.extra["tool_mode"] = "native"
        _number_calls(output, item.turn)
        return output

    def _complete(self, client: Any, body: dict[str, Any]) -> AgentOutput:
        """One input: post, retrying transient failures, and parse the reply."""
        url = f"{self.base_url}/chat/completions"
        last: _Retryable | None = None
        for attempt in range(self.max_retries + 1):
            if attempt:
                delay = self.backoff_s * (2 ** (attempt - 1)) * (0.5 + self._jitter.random())
                if last is not None and last.retry_after is not None:
                    delay = max(delay, min(last.retry_after, MAX_RETRY_AFTER_S))
                logger.info(
                    "retrying %s in %.2fs (attempt %d of %d): %s", url, delay, attempt + 1, self.max_retries + 1, last
                )
                time.sleep(delay)
            try:
                output = self._attempt(client, url, body)
            except _Retryable as err:
                last = err
                continue
            output.extra["attempts"] = attempt + 1
            return output
        assert last is not None
        raise AgentRequestError(
            f"chat completion request to {url} (model {self.model!r}) failed after {self.max_retries + 1} "
            f"attempts; last error: {last}. Check that the server is up and serves this model, or raise "
            "max_retries/timeout_s.",
            status=last.status,
            attempts=self.max_retries + 1,
        )

    def _attempt(self, client: Any, url: str, body: dict[str, Any]) -> AgentOutput:
        httpx = self._httpx
        try:
            response = client.post(url, json=body)
        except httpx.TransportError as err:  # connect errors, timeouts, dropped connections
            raise _Retryable(f"{type(err).__name__}: {err}") from err
        status = response.status_code
        if status == 429 or status >= 500:
            raise _Retryable(
                f"HTTP {status}: {_excerpt(response.text)!r}",
                status=status,
                retry_after=_retry_after_seconds(response.headers.get("retry-after")),
            )
        if status >= 400:
            raise AgentRequestError(
                f"chat completion request to {url} was rejected with HTTP {status} (not retried: the request "
                f"itself is wrong): {_excerpt(response.text)!r}. Check the model name {self.model!r}, "
                "max_tokens against the context length, and extra_body.",
                status=status,
            )
        try:
            payload = response.json()
        except ValueError as err:
            # Garbage once (a proxy hiccup) is retried; garbage every time ends as AgentRequestError.
            raise _Retryable(f"unreadable JSON (HTTP {status}): {_excerpt(response.text)!r}", status=status) from err
        return self._parse(payload, status, stop=body.get("stop") or ())

    def _parse(self, payload: Any, status: int, *, stop: Sequence[str] = ()) -> AgentOutput:
        choices = payload.get("choices") if isinstance(payload, dict) else None
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise _Retryable(f"reply without choices (HTTP {status}): {_excerpt(repr(payload))!r}", status=status)
        choice = choices[0]
        message = choice.get("message")
        if not isinstance(message, dict):
            raise _Retryable(f"choice without a message (HTTP {status}): {_excerpt(repr(choice))!r}", status=status)
        content = message.get("content")
        text = content if isinstance(content, str) else ""
        calls = _tool_calls(message.get("tool_calls"))
        if calls:
            # The calls go into the reply text in the <tool_call> markup, which the prompting layer reads.
            text = (text.rstrip() + "\n" if text.strip() else "") + render_tool_calls(calls)

        logprobs = None
        if self.logprobs:
            block = choice.get("logprobs")
            entries = block.get("content") if isinstance(block, dict) else None
            if isinstance(entries, list):
                values = [e.get("logprob") if isinstance(e, dict) else None for e in entries]
                if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
                    logprobs = [float(v) for v in values]
        token_ids = _int_list(choice.get("token_ids"))
        # vLLM puts prompt_token_ids on the response; accept it on the choice too.
        prompt_token_ids = _int_list(payload.get("prompt_token_ids")) or _int_list(choice.get("prompt_token_ids"))

        extra: dict[str, Any] = {}
        usage = payload.get("usage")
        if isinstance(usage, dict):
            extra["usage"] = {
                key: usage[key] for key in ("prompt_tokens", "completion_tokens") if isinstance(usage.get(key), int)
            }
        if calls:
            extra["tool_calls"] = calls
        finish = choice.get("finish_reason")
        if finish == "stop" and stop and not calls:
            closing = _closing_tag_to_restore(text, stop, choice)
            if closing is not None:
                text += closing
                extra["stop_appended"] = closing
        return AgentOutput(
            text=text,
            token_ids=token_ids,
            logprobs=logprobs,
            prompt_token_ids=prompt_token_ids,
            finish_reason=finish if isinstance(finish, str) else None,
            extra=extra,
        )

    def close(self) -> None:
        """Shut the thread pool and the HTTP client; harmless to call twice. A later ``act`` reopens."""
        with self._lock:
            pool, self._pool = self._pool, None
            client, self._client = self._client, None
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
        if client is not None:
            client.close()
