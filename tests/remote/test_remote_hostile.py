"""A client faces whatever answers at its URL: frames that are no message, hostile nesting, the wrong
message type, a frame over the size limit, silence. Each is a typed error, never a crash or a hang.

The "server" here is a bare ``websockets`` server that answers each message with the frame the
message names (the real server never sends these): a fake, because no real server misbehaves.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator

import pytest
from websockets.sync.server import ServerConnection, serve

from envgym import remote
from envgym.remote.session import Session

REPLIES = {
    "garbage": "this is not json",
    "deep": "[" * 20_000 + "]" * 20_000,  # deeper than Python's recursion limit, under the size limit
    "no_type": json.dumps({"data": {}}),
    "wrong_type": json.dumps({"type": "state", "data": {}}),
    "error": json.dumps({"type": "error", "data": {"code": "ENV_CRASHED", "message": "boom", "retryable": True}}),
    "bad_error": json.dumps({"type": "error", "data": "nope"}),
    "huge": json.dumps({"type": "observation", "data": {"observation": {"obs": "x" * 300_000}}}),
    "ok": json.dumps({"type": "observation", "data": {"observation": {"obs": "fine", "info": {}}, "reward": 1.0}}),
}


def _handler(connection: ServerConnection) -> None:
    for frame in connection:
        kind = json.loads(frame).get("type")
        if kind == "silence":
            continue
        connection.send(REPLIES[kind])


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with serve(_handler, "127.0.0.1", 0) as server:
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        yield f"ws://127.0.0.1:{server.socket.getsockname()[1]}"
        server.shutdown()
    thread.join(10)


def _ask(url: str, kind: str, **options: float) -> object:
    session = Session(url, "envgym/Anything-v0", max_message_bytes=100_000, **options)
    try:
        return session.request({"type": kind}, "observation", kind)
    finally:
        session.close()


@pytest.mark.parametrize("kind", ["garbage", "deep", "no_type", "wrong_type"])
def test_a_frame_that_is_no_answer_is_a_retryable_protocol_error(url: str, kind: str) -> None:
    with pytest.raises(remote.RemoteError) as caught:
        _ask(url, kind)
    assert caught.value.code == "PROTOCOL_ERROR" and caught.value.retryable


def test_the_servers_errors_keep_their_code(url: str) -> None:
    with pytest.raises(remote.RemoteError, match="ENV_CRASHED: boom") as caught:
        _ask(url, "error")
    assert caught.value.retryable and caught.value.code == "ENV_CRASHED"
    with pytest.raises(remote.RemoteError) as malformed:
        _ask(url, "bad_error")
    assert malformed.value.code == "PROTOCOL_ERROR"


def test_a_frame_over_the_limit_and_silence_lose_the_session(url: str) -> None:
    with pytest.raises(remote.ServerLostError):
        _ask(url, "huge")  # 300 kB against a 100 kB limit: the connection is closed (1009), nothing read whole
    with pytest.raises(remote.ServerLostError, match="no answer") as silent:
        _ask(url, "silence", message_timeout_s=0.2)
    assert silent.value.code == "TIMEOUT"
    assert _ask(url, "ok") == {"observation": {"obs": "fine", "info": {}}, "reward": 1.0}
