"""The leaderboard web app (FastAPI; ``envgym leaderboard serve`` runs it under uvicorn).

Pages (HTML, rendered by :mod:`envgym.leaderboard.pages`):

* ``/``: the suites; ``/suites/{suite_id}``: the ranked, sortable table, the CI plot and the
  success rate per environment;
* ``/entries/{id}``: one submission; ``/entries/{id}/episodes/{n}``: the turn-by-turn viewer.

The lists (``/``, ``/suites/{suite_id}``, an entry's episodes) take ``?q=`` (at most
``MAX_QUERY`` characters): only the rows holding every word of it, ignoring case, are shown; each
page's filter box narrows its rows as one types and sends ``?q=`` on Enter.

JSON API:

* ``GET /api/suites``; ``GET /api/suites/{suite_id}/entries`` (ranked; without the agent metadata,
  which only ``/api/entries/{id}`` carries);
* ``GET /api/entries/{id}``; ``GET /api/entries/{id}/episodes``; ``GET /api/entries/{id}/episodes/{n}``;
  ids and episode numbers are integers from 0 to 2^63 - 1 (``422`` otherwise);
* ``POST /api/submissions``: a bundle as the raw body (``Content-Type: application/gzip``) or as
  the ``bundle`` field of a ``multipart/form-data`` form. Answers ``201`` with the stored
  submission, ``200`` with the existing one when the same bundle (same content hash) was stored
  before, ``409 duplicate`` naming the entry when another bundle of the same run (same suite,
  agent spec and episodes: e.g. bundled again under another name) was (checked before the
  replay), ``409 withdrawn``, without its id, when that one was hidden by a moderator, ``413`` when
  the body exceeds ``max_upload_bytes`` (checked while the body streams in, before the rest is read)
  or a field exceeds its cap, ``400`` when it is not a readable bundle, ``422`` when verification
  rejects it or it exceeds its time budget, ``503`` with ``Retry-After`` when the verification
  queue is full or the verifier itself cannot run; the error body is ``{"error": ..., "reason": ...}``.
  Nothing is stored on failure.

Verification never runs in the threads that serve pages: uploads go to a bounded pool of child
processes with a queue, a deadline and a memory limit each (:mod:`envgym.leaderboard.intake`).
The list pages (``/``, ``/suites/{id}`` and their JSON) are rendered once and kept until this
server stores, hides or deletes an entry, or for ``LIST_TTL_S`` seconds at most (another process
writing to the same database shows within that time), so a crowd of readers costs little.

Tokens (made with ``envgym leaderboard token create``; the store keeps only their sha256) are sent
as ``Authorization: Bearer <token>``:

* uploads: with ``require_token=True`` an upload needs a token (``401`` without one, ``403`` for
  an unknown or revoked one); without it uploads are open, and a token given still names the
  submitter. The token's name is stored with the submission (``submitter``) and shown on the board.
  Uploads with a token are limited to ``uploads_per_minute`` per token, anonymous ones to
  ``anonymous_uploads_per_minute`` per client address (``429`` with ``Retry-After`` beyond); the
  windows are kept in memory, so each server process counts its own. Anonymous uploads of a suite
  whose replay runs agent commands in a sandbox are refused unless ``allow_anonymous_sandboxed``.
* moderation, admin tokens only (``403`` for a submitter token): ``POST /api/submissions/{id}/hide``
  with ``{"reason": "..."}`` (required) takes an entry off the board, the listings and its pages
  (they answer ``404``) but keeps it in the database; ``POST /api/submissions/{id}/unhide`` (reason
  optional) shows it again; ``POST /api/submissions/{id}/rename`` with ``{"name": "...",
  "reason": "..."}`` (reason optional) gives it a new agent name (a run is ranked once, so this is
  how its name changes); ``DELETE /api/submissions/{id}`` with ``{"reason": "..."}`` (required)
  removes it with its scores and episodes. Each writes an audit row, listed by ``GET /api/audit``.

Browsers and other origins: requests must name an allowed host (``Host``: loopback names plus
``allowed_hosts``; ``400`` otherwise, which defeats DNS rebinding); a state-changing request
(``POST``, ``DELETE``...) from another origin (``Origin`` or ``Sec-Fetch-Site`` says so) is
refused with ``403``, and one with a form or ``text/plain`` body (what a cross-site form can send)
with ``415``. The OpenAPI schema is off unless ``openapi=True`` (then ``/api/openapi.json``, with
no Swagger page: it would load its assets from a CDN). An unexpected error answers ``500`` and
keeps the connection open.

Tokens are never logged, stored or shown: logs and pages name the token's name only.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import logging
import math
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import asynccontextmanager
from typing import Annotated, Any
from urllib.parse import urlsplit

from envgym.errors import ConfigError, MissingDependencyError

try:
    from fastapi import FastAPI, HTTPException, Query, Request
    from fastapi import Path as PathParam
    from fastapi.concurrency import run_in_threadpool
    from fastapi.responses import HTMLResponse, JSONResponse, Response
except ImportError as err:  # pragma: no cover - exercised only without the extra
    raise MissingDependencyError("fastapi", "leaderboard", "The leaderboard web app") from err

from envgym.leaderboard import pages
from envgym.leaderboard.bundle import DEFAULT_MAX_UNCOMPRESSED, BundleError
from envgym.leaderboard.intake import Answer, PoolConfig, Upload, VerifyPool, process_upload, server_context
from envgym.leaderboard.store import Store
from envgym.leaderboard.verify import VerifyConfig

__all__ = [
    "DEFAULT_ANONYMOUS_UPLOADS_PER_MINUTE",
    "DEFAULT_MAX_UPLOAD",
    "DEFAULT_UPLOADS_PER_MINUTE",
    "LOOPBACK_HOSTS",
    "PoolConfig",
    "UploadLimiter",
    "beyond_loopback",
    "create_app",
]

log = logging.getLogger(__name__)

#: Largest upload accepted by default (the compressed bundle).
DEFAULT_MAX_UPLOAD = 32 * 1024 * 1024
#: Uploads accepted per token in any 60 seconds by default.
DEFAULT_UPLOADS_PER_MINUTE = 30
#: Anonymous uploads accepted per client address in any 60 seconds by default.
DEFAULT_ANONYMOUS_UPLOADS_PER_MINUTE = 20
#: Longest hide, unhide or delete reason kept in the audit.
MAX_REASON = 1000
#: Largest submission id or episode number a path may name (SQL's BIGINT).
MAX_ID = 2**63 - 1
#: Host names every board answers to (besides ``allowed_hosts``).
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})
#: Request bodies a browser may send cross-site without asking first (a form or text/plain).
_SIMPLE_BODIES = ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data")
_UNSAFE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
#: Seconds a rendered list page is kept at most (writes by this server drop it at once).
LIST_TTL_S = 2.0

SubmissionId = Annotated[int, PathParam(ge=0, le=MAX_ID, description="A submission id.")]
Ordinal = Annotated[int, PathParam(ge=0, le=MAX_ID, description="An episode's number in its submission.")]
#: Longest ``?q=`` filter a page takes.
MAX_QUERY = 200
Filter = Annotated[
    str | None, Query(max_length=MAX_QUERY, description="Show the rows holding every word of this text (any case).")
]


def _error(status: int, error: str, reason: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"error": error, "reason": reason}, status_code=status, headers=headers)


def _same(href: str) -> str:
    return href


class _TooLarge(Exception):
    pass


class _Refused(Exception):
    """A request turned away before any work: becomes the ``{"error", "reason"}`` answer."""

    def __init__(self, status: int, error: str, reason: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(reason)
        self.status, self.error, self.reason, self.headers = status, error, reason, headers

    def response(self) -> JSONResponse:
        return _error(self.status, self.error, self.reason, self.headers)


class UploadLimiter:
    """At most ``per_minute`` uploads per key (a token's name, or a client address) in any 60
    seconds: a sliding window kept in memory, so it counts the uploads of this process only (run
    one server process per database, or put a shared limit in front of several)."""

    window = 60.0
    #: Keys kept before the idle ones are dropped (many addresses must not grow memory for ever).
    max_keys = 10_000

    def __init__(self, per_minute: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.per_minute = per_minute
        self._clock = clock
        self._seen: dict[str, deque[float]] = {}
        self._lock = threading.Lock()

    def admit(self, key: str) -> int | None:
        """Count an upload by ``key``: ``None`` when admitted, else the seconds until one would be."""
        now = self._clock()
        with self._lock:
            if len(self._seen) >= self.max_keys and key not in self._seen:
                self._seen = {k: t for k, t in self._seen.items() if t and t[-1] > now - self.window}
            times = self._seen.setdefault(key, deque())
            while times and times[0] <= now - self.window:
                times.popleft()
            if len(times) >= self.per_minute:
                return max(1, math.ceil(times[0] + self.window - now))
            times.append(now)
            return None


def beyond_loopback(host: str) -> bool:
    """Whether listening on ``host`` (an interface address or name) reaches beyond this machine."""
    name = host.strip().strip("[]").lower()
    if name == "localhost":
        return False
    try:
        return not ipaddress.ip_address(name).is_loopback
    except ValueError:
        return True  # a name: it may resolve to anything


def _host_name(value: str) -> str:
    """The host of a ``Host`` header or an origin's netloc, without the port, lowercased."""
    value = value.strip().lower()
    if value.startswith("["):
        return value[1 : value.find("]")] if "]" in value else value
    if value.count(":") == 1:
        value = value.split(":", 1)[0]
    return value.rstrip(".")


class _Guard:
    """ASGI middleware in front of every route: the Host allow-list, cross-origin protection of
    state-changing requests, and a ``500`` that keeps the connection for any unexpected error."""

    def __init__(self, app: Any, *, hosts: frozenset[str] | None) -> None:
        self.app = app
        self.hosts = hosts  # None: any host

    def _check(self, scope: dict[str, Any]) -> JSONResponse | None:
        headers: dict[str, str] = {}
        for key, value in scope.get("headers", ()):
            headers.setdefault(key.decode("latin-1").lower(), value.decode("latin-1"))
        host = headers.get("host")
        if self.hosts is not None and host is not None and _host_name(host) not in self.hosts:
            allowed = ", ".join(sorted(self.hosts))
            return _error(
                400,
                "bad_host",
                f"this board answers to the host names {allowed}, got {host[:100]!r}; an admin adds a name with "
                "`envgym leaderboard serve --allowed-host NAME`.",
            )
        if scope.get("method", "GET").upper() not in _UNSAFE_METHODS:
            return None
        fetch_site = headers.get("sec-fetch-site")
        origin = headers.get("origin")
        cross = fetch_site is not None and fetch_site.lower() not in ("same-origin", "none")
        if origin is not None and not cross:
            netloc = urlsplit(origin).netloc if origin.lower() != "null" else ""
            cross = not netloc or host is None or netloc.lower() != host.strip().lower()
        if cross:
            return _error(
                403,
                "cross_origin",
                f"state-changing requests are taken from this board's own pages and from programs only, got one "
                f"from origin {origin or fetch_site!r}; upload with `envgym leaderboard submit --url` or curl.",
            )
        content_type = headers.get("content-type", "").split(";", 1)[0].strip().lower()
        simple = content_type in _SIMPLE_BODIES
        if simple and not (content_type == "multipart/form-data" and scope.get("path") == "/api/submissions"):
            return _error(
                415,
                "unsupported_media_type",
                f"this route does not take {content_type!r} bodies (a browser form could send them from any site): "
                "send application/json, or a bundle as application/gzip.",
            )
        return None

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        refused = self._check(scope)
        if refused is not None:
            await refused(scope, receive, send)
            return
        started = False

        async def watch(message: dict[str, Any]) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, receive, watch)
        except Exception:
            # Answer here instead of letting the server see the exception: uvicorn closes the
            # connection of a request whose app raised, and one request must not cost a client
            # its keep-alive connection.
            log.exception("%s %s failed", scope.get("method"), scope.get("path"))
            if not started:
                await _error(500, "internal", "the server failed on this request; it is logged.")(scope, receive, send)


class _Rendered:
    """Rendered list pages, kept until :meth:`drop` (this server wrote) or ``ttl`` seconds pass.

    A render that began before a :meth:`drop` is not kept (its data may predate the write), and at
    most ``max_keys`` pages are kept (any suite id may be asked for).
    """

    def __init__(self, ttl: float = LIST_TTL_S, max_keys: int = 256) -> None:
        self.ttl, self.max_keys = ttl, max_keys
        self._pages: dict[str, tuple[int, float, Response]] = {}
        self._generation = 0
        self._lock = threading.Lock()

    def get(self, key: str, render: Callable[[], Response]) -> Response:
        now = time.monotonic()
        with self._lock:
            generation = self._generation
            kept = self._pages.get(key)
        if kept is not None and kept[0] == generation and now - kept[1] < self.ttl:
            return kept[2]
        page = render()
        with self._lock:
            if self._generation == generation and page.status_code == 200:
                if len(self._pages) >= self.max_keys:
                    self._pages.clear()
                self._pages[key] = (generation, now, page)
        return page

    def drop(self) -> None:
        with self._lock:
            self._generation += 1
            self._pages.clear()


def _bearer(request: Request) -> str | None:
    """The token of the ``Authorization: Bearer`` header; ``None`` when there is no header."""
    header = request.headers.get("authorization")
    if header is None:
        return None
    scheme, _, token = header.strip().partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise _Refused(
            401,
            "unauthorized",
            "the Authorization header must be 'Bearer <token>' (a token from `envgym leaderboard token create`).",
            {"WWW-Authenticate": "Bearer"},
        )
    return token.strip()


async def _read_limited(request: Request, limit: int) -> bytes:
    """The request body, refusing it as soon as more than ``limit`` bytes came in."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise _TooLarge
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise _TooLarge
    return bytes(body)


async def _multipart_bundle(request: Request, body: bytes) -> bytes:
    """The ``bundle`` file (or the only file) of a multipart form whose raw body is ``body``."""
    sent = False

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if sent:
            return {"type": "http.disconnect"}
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    replay = Request(request.scope, receive)
    try:
        form = await replay.form()
    except Exception as err:  # the multipart parser's errors vary by version
        raise BundleError(f"the multipart form could not be parsed ({err}).") from err
    try:
        item = form.get("bundle")
        if item is None:
            files = [v for _, v in form.multi_items() if hasattr(v, "read")]
            if len(files) != 1:
                raise BundleError("send the bundle as the form field 'bundle' (a file), or as the raw request body.")
            item = files[0]
        if isinstance(item, str):
            raise BundleError("the form field 'bundle' must be a file upload, got a text field.")
        return await item.read()
    finally:
        await form.close()


def _shared_database(url: str) -> bool:
    """Whether another process can open the database at ``url`` (not an in-memory SQLite one)."""
    from sqlalchemy.engine import make_url

    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite":
        return True
    database = parsed.database or ""
    return database not in ("", ":memory:") and "mode=memory" not in url


def _check_rate(name: str, value: Any) -> None:
    if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
        raise ConfigError(f"{name} must be an integer >= 1 or None, got {value!r}.")


def create_app(
    store: Store | str | None = None,
    *,
    max_upload_bytes: int = DEFAULT_MAX_UPLOAD,
    max_unpacked_bytes: int = DEFAULT_MAX_UNCOMPRESSED,
    verify_config: VerifyConfig | None = None,
    require_token: bool = False,
    uploads_per_minute: int | None = DEFAULT_UPLOADS_PER_MINUTE,
    anonymous_uploads_per_minute: int | None = DEFAULT_ANONYMOUS_UPLOADS_PER_MINUTE,
    pool: PoolConfig | None = None,
    allowed_hosts: Iterable[str] = (),
    allow_anonymous_sandboxed: bool = False,
    openapi: bool = False,
) -> FastAPI:
    """The leaderboard as a FastAPI app.

    Args:
        store: a :class:`Store`, a database URL or path, or ``None`` for the default database.
        max_upload_bytes: largest request body of ``POST /api/submissions`` (``413`` above).
        max_unpacked_bytes: largest bundle once decompressed (``400`` above).
        verify_config: how bundles are verified.
        require_token: uploads need a submitter or admin token (``401``/``403`` otherwise); when
            ``False`` (a local board) uploads are open and a token, if given, names the submitter.
        uploads_per_minute: uploads accepted per token in any 60 seconds (``429`` beyond), counted
            in this process's memory; ``None``: no limit.
        anonymous_uploads_per_minute: uploads without a token accepted per client address in any
            60 seconds (``429`` beyond); ``None``: no limit.
        pool: how many uploads are verified at once, how many may wait (``503`` beyond), and the
            time and memory one may take; default :class:`PoolConfig` with the timeout of
            ``verify_config.budget_s`` (plus a minute for reading and storing) when it has one.
        allowed_hosts: host names (``Host`` header, no port) served besides ``127.0.0.1``,
            ``localhost`` and ``::1``; ``"*"`` serves any (behind a proxy that checks it).
        allow_anonymous_sandboxed: take anonymous uploads of suites whose replay runs agent
            commands in a sandbox (SWE); off by default, since each costs the board minutes.
        openapi: serve the OpenAPI schema at ``/api/openapi.json`` (no Swagger page either way).
    """
    _check_rate("uploads_per_minute", uploads_per_minute)
    _check_rate("anonymous_uploads_per_minute", anonymous_uploads_per_minute)
    hosts = [h.strip().lower() for h in ([allowed_hosts] if isinstance(allowed_hosts, str) else allowed_hosts)]
    if any(not h for h in hosts):
        raise ConfigError(f"allowed_hosts must be host names like 'board.example.org', got {list(allowed_hosts)!r}.")
    allowed = None if "*" in hosts else frozenset(LOOPBACK_HOSTS | {_host_name(h) for h in hosts})
    if not isinstance(store, Store):
        store = Store(store)
    db: Store = store
    config = verify_config or VerifyConfig()
    if pool is None:
        budget = getattr(config, "budget_s", None)
        pool = PoolConfig(timeout_s=float(budget) + 60.0) if budget else PoolConfig()
    limiter = UploadLimiter(uploads_per_minute) if uploads_per_minute is not None else None
    anonymous_limiter = (
        UploadLimiter(anonymous_uploads_per_minute) if anonymous_uploads_per_minute is not None else None
    )

    def in_process(upload: Upload) -> Answer:
        try:
            return process_upload(upload, db)
        except MemoryError:
            return Answer(413, {"error": "too_large", "reason": "verifying this bundle ran out of memory."})

    isolated = pool.processes and _shared_database(db.url)
    verifier = VerifyPool(pool, in_process=None if isolated else in_process)

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        await asyncio.get_running_loop().run_in_executor(None, verifier.warm_up)
        try:
            yield
        finally:
            verifier.close()

    app = FastAPI(
        title="envgym leaderboard",
        summary="Replay-verified results of agents on envgym benchmark suites.",
        docs_url=None,
        redoc_url=None,
        openapi_url="/api/openapi.json" if openapi else None,
        lifespan=lifespan,
    )
    app.add_middleware(_Guard, hosts=allowed)
    app.state.store = db
    app.state.upload_limiter = limiter
    app.state.anonymous_upload_limiter = anonymous_limiter
    app.state.verify_pool = verifier
    rendered = _Rendered()
    app.state.rendered = rendered

    async def identify(request: Request) -> dict[str, Any] | None:
        """``{"name", "role"}`` of the request's token; ``None`` without one; 403 for a bad one."""
        token = _bearer(request)
        if token is None:
            return None
        who = await run_in_threadpool(db.resolve_token, token)
        if who is None:
            raise _Refused(403, "forbidden", "the token is unknown or revoked; ask the board's admin for a new one.")
        return who

    async def admin(request: Request) -> dict[str, Any]:
        who = await identify(request)
        if who is None:
            raise _Refused(
                401,
                "unauthorized",
                "this needs an admin token: send 'Authorization: Bearer <token>'.",
                {"WWW-Authenticate": "Bearer"},
            )
        if who["role"] != "admin":
            raise _Refused(
                403, "forbidden", f"this needs an admin token; token {who['name']!r} is a {who['role']} token."
            )
        return who

    def submission_or_404(submission_id: int, *, metadata: bool = True) -> dict[str, Any]:
        sub = db.submission(submission_id, metadata=metadata)
        if sub is None:
            raise HTTPException(404, f"no submission {submission_id}")
        return sub

    # -- pages -------------------------------------------------------------------------------------
    def html(text: str) -> Response:
        return HTMLResponse(text)

    @app.get("/", response_class=HTMLResponse)
    def index(q: Filter = None) -> Response:
        key = "/" if not q else f"/?q={q}"
        return rendered.get(key, lambda: html(pages.index_page(db.suites(), _same, q)))

    @app.get("/suites/{suite_id}", response_class=HTMLResponse)
    def suite(suite_id: str, q: Filter = None) -> Response:
        def render() -> Response:
            board = db.leaderboard(suite_id)
            if not board:
                return _error(404, "not_found", f"no submissions for suite {suite_id[:200]!r}")
            return html(pages.suite_page(suite_id, board, _same, q))

        return rendered.get(f"/suites/{suite_id}" + (f"?q={q}" if q else ""), render)

    @app.get("/entries/{submission_id}", response_class=HTMLResponse)
    def entry(submission_id: SubmissionId, q: Filter = None) -> str:
        sub = submission_or_404(submission_id)
        return pages.submission_page(sub, db.episodes(submission_id), _same, q)

    @app.get("/entries/{submission_id}/episodes/{ordinal}", response_class=HTMLResponse)
    def episode_view(submission_id: SubmissionId, ordinal: Ordinal) -> str:
        sub = submission_or_404(submission_id, metadata=False)
        found = db.episode(submission_id, ordinal)
        if found is None:
            raise HTTPException(404, f"submission {submission_id} has no episode {ordinal}")
        return pages.episode_page(sub, found, db.episodes(submission_id), _same)

    # -- JSON API ----------------------------------------------------------------------------------
    @app.get("/api/suites")
    def api_suites() -> Response:
        return rendered.get("/api/suites", lambda: JSONResponse(db.suites()))

    @app.get("/api/suites/{suite_id}/entries")
    def api_suite_entries(suite_id: str) -> Response:
        return rendered.get(f"/api/suites/{suite_id}/entries", lambda: JSONResponse(db.leaderboard(suite_id)))

    @app.get("/api/entries/{submission_id}")
    def api_entry(submission_id: SubmissionId) -> dict[str, Any]:
        return submission_or_404(submission_id)

    @app.get("/api/entries/{submission_id}/episodes")
    def api_episodes(submission_id: SubmissionId) -> list[dict[str, Any]]:
        submission_or_404(submission_id, metadata=False)
        return db.episodes(submission_id)

    @app.get("/api/entries/{submission_id}/episodes/{ordinal}")
    def api_episode(submission_id: SubmissionId, ordinal: Ordinal) -> dict[str, Any]:
        submission_or_404(submission_id, metadata=False)
        found = db.episode(submission_id, ordinal)
        if found is None:
            raise HTTPException(404, f"submission {submission_id} has no episode {ordinal}")
        return found

    def admit(request: Request, who: dict[str, Any] | None) -> None:
        """Count an upload against its token's window, or its address's when anonymous."""
        if who is not None:
            wait = limiter.admit(who["name"]) if limiter is not None else None
            if wait is not None:
                raise _Refused(
                    429,
                    "rate_limited",
                    f"token {who['name']!r} sent more than {uploads_per_minute} uploads in a minute; "
                    f"retry in {wait} s.",
                    {"Retry-After": str(wait)},
                )
            return
        address = request.client.host if request.client is not None else "unknown"
        wait = anonymous_limiter.admit(f"address:{address}") if anonymous_limiter is not None else None
        if wait is not None:
            raise _Refused(
                429,
                "rate_limited",
                f"address {address} sent more than {anonymous_uploads_per_minute} uploads without a token in a "
                f"minute; retry in {wait} s, or upload with a token (ask the board's admin for one).",
                {"Retry-After": str(wait)},
            )

    @app.post("/api/submissions")
    async def api_submit(request: Request) -> JSONResponse:
        # Who, how often, and whether there is room, before reading a byte of the body.
        try:
            who = await identify(request)
            if who is None and require_token:
                raise _Refused(
                    401,
                    "unauthorized",
                    "this board takes uploads with a token only: send 'Authorization: Bearer <token>' "
                    "(ask the board's admin for one).",
                    {"WWW-Authenticate": "Bearer"},
                )
            admit(request, who)
        except _Refused as refused:
            return refused.response()
        if not verifier.reserve():
            wait = verifier.retry_after()
            return _error(
                503,
                "busy",
                f"{verifier.capacity} uploads are being verified or waiting, the most this server takes; "
                f"retry in {wait} s.",
                {"Retry-After": str(wait)},
            )
        submitted = False
        try:
            try:
                body = await _read_limited(request, max_upload_bytes)
            except _TooLarge:
                return _error(
                    413, "too_large", f"the upload is larger than the {max_upload_bytes} bytes this server accepts."
                )
            if request.headers.get("content-type", "").startswith("multipart/form-data"):
                try:
                    body = await _multipart_bundle(request, body)
                except BundleError as err:
                    return _error(400, "malformed", str(err))
            if not body:
                return _error(400, "malformed", "the request body is empty: send a bundle file.")
            context = await run_in_threadpool(server_context) if isolated else {}
            upload = Upload(
                data=body,
                submitter=who["name"] if who is not None else None,
                store_url=db.url,
                max_unpacked_bytes=max_unpacked_bytes,
                verify_config=config,
                allow_anonymous_sandboxed=allow_anonymous_sandboxed,
                **context,
            )
            future = verifier.submit(upload)
            submitted = True
        finally:
            if not submitted:
                verifier.release()
        answer = await asyncio.wrap_future(future)
        if answer.status == 201:
            rendered.drop()
        if answer.note:
            log.info("%s", answer.note)
        return JSONResponse(answer.body, status_code=answer.status, headers=answer.headers)

    # -- moderation (admin tokens) -----------------------------------------------------------------
    async def body_of(request: Request, action: str, example: str) -> dict[str, Any]:
        """The JSON object a moderation request sends (an empty body is ``{}``)."""
        raw = await request.body()
        if raw.strip() and request.headers.get("content-type", "").split(";")[0].strip().lower() != "application/json":
            raise _Refused(
                415, "unsupported_media_type", f"the body of {action} must be JSON (Content-Type: application/json)."
            )
        try:
            document = json.loads(raw) if raw.strip() else {}
        except (ValueError, RecursionError):
            document = None
        if not isinstance(document, dict):
            raise _Refused(400, "bad_request", f"the body of {action} must be a JSON object like {example}.")
        return document

    async def reason_of(request: Request, action: str, *, required: bool) -> str:
        document = await body_of(request, action, '{"reason": "..."}')
        reason = document.get("reason", "")
        if not isinstance(reason, str) or (required and not reason.strip()) or len(reason) > MAX_REASON:
            need = "a reason (the audit keeps it)" if required else "an optional reason"
            raise _Refused(
                400,
                "bad_request",
                f'{action} takes {need}: {{"reason": "..."}}, text of 1 to {MAX_REASON} characters; '
                f"got {reason!r:.80}.",
            )
        return reason.strip()

    async def moderate(submission_id: int, request: Request, *, hide: bool) -> JSONResponse:
        action = "hide" if hide else "unhide"
        try:
            who = await admin(request)
            reason = await reason_of(request, f"/{action}", required=hide)
        except _Refused as refused:
            return refused.response()
        entry = await run_in_threadpool(db.set_hidden, submission_id, hide, reason=reason, by=who["name"])
        rendered.drop()
        if entry is None:
            return _error(404, "not_found", f"no submission {submission_id}.")
        log.info("submission %s: %s by %s (%s)", submission_id, action, who["name"], entry["reason"] or "no reason")
        return JSONResponse({"submission_id": submission_id, "hidden": hide, "audit": entry})

    @app.post("/api/submissions/{submission_id}/hide")
    async def api_hide(submission_id: SubmissionId, request: Request) -> JSONResponse:
        return await moderate(submission_id, request, hide=True)

    @app.post("/api/submissions/{submission_id}/unhide")
    async def api_unhide(submission_id: SubmissionId, request: Request) -> JSONResponse:
        return await moderate(submission_id, request, hide=False)

    @app.post("/api/submissions/{submission_id}/rename")
    async def api_rename(submission_id: SubmissionId, request: Request) -> JSONResponse:
        try:
            who = await admin(request)
            document = await body_of(request, "/rename", '{"name": "...", "reason": "..."}')
        except _Refused as refused:
            return refused.response()
        reason = document.get("reason", "")
        if not isinstance(reason, str) or len(reason) > MAX_REASON:
            return _error(400, "bad_request", f"/rename takes an optional reason of at most {MAX_REASON} characters.")
        try:
            entry = await run_in_threadpool(
                db.rename, submission_id, document.get("name"), reason=reason.strip(), by=who["name"]
            )
        except BundleError as err:
            return _error(400, "bad_request", f'/rename takes {{"name": "..."}}: {err}')
        rendered.drop()
        if entry is None:
            return _error(404, "not_found", f"no submission {submission_id}.")
        log.info("submission %s: %s by %s", submission_id, entry["reason"], who["name"])
        return JSONResponse({"submission_id": submission_id, "renamed": True, "audit": entry})

    @app.delete("/api/submissions/{submission_id}")
    async def api_delete(submission_id: SubmissionId, request: Request) -> JSONResponse:
        try:
            who = await admin(request)
            reason = await reason_of(request, "DELETE", required=True)
        except _Refused as refused:
            return refused.response()
        entry = await run_in_threadpool(db.delete, submission_id, reason=reason, by=who["name"])
        rendered.drop()
        if entry is None:
            return _error(404, "not_found", f"no submission {submission_id}.")
        log.info("submission %s: deleted by %s (%s)", submission_id, who["name"], reason)
        return JSONResponse({"submission_id": submission_id, "deleted": True, "audit": entry})

    @app.get("/api/audit")
    async def api_audit(request: Request) -> JSONResponse:
        try:
            await admin(request)
        except _Refused as refused:
            return refused.response()
        return JSONResponse(await run_in_threadpool(db.audit))

    return app
