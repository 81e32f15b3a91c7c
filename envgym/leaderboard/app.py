"""The leaderboard web app (FastAPI; ``envgym leaderboard serve`` runs it under uvicorn).

Pages (HTML, rendered by :mod:`envgym.leaderboard.pages`):

* ``/``: the suites; ``/suites/{suite_id}``: the ranked, sortable table and the CI plot;
* ``/entries/{id}``: one submission; ``/entries/{id}/episodes/{n}``: the turn-by-turn viewer.

JSON API:

* ``GET /api/suites``; ``GET /api/suites/{suite_id}/entries`` (ranked);
* ``GET /api/entries/{id}``; ``GET /api/entries/{id}/episodes``; ``GET /api/entries/{id}/episodes/{n}``;
* ``POST /api/submissions``: a bundle as the raw body (``Content-Type: application/gzip``) or as
  the ``bundle`` field of a ``multipart/form-data`` form. Answers ``201`` with the stored
  submission, ``200`` with the existing one when the same bundle (same content hash) was stored
  before, ``413`` when the body exceeds ``max_upload_bytes`` (checked while the body streams in,
  before the rest is read), ``400`` when it is not a readable bundle, ``422`` when verification
  rejects it; the error body is ``{"error": ..., "reason": ...}``. Nothing is stored on failure.

Tokens (made with ``envgym leaderboard token create``; the store keeps only their sha256) are sent
as ``Authorization: Bearer <token>``:

* uploads: with ``require_token=True`` an upload needs a token (``401`` without one, ``403`` for
  an unknown or revoked one); without it uploads are open, and a token given still names the
  submitter. The token's name is stored with the submission (``submitter``) and shown on the board.
  Uploads with a token are limited to ``uploads_per_minute`` per token (``429`` with
  ``Retry-After`` beyond it); the window is kept in memory, so each server process counts its own.
* moderation, admin tokens only (``403`` for a submitter token): ``POST /api/submissions/{id}/hide``
  with ``{"reason": "..."}`` (required) takes an entry off the board, the listings and its pages
  (they answer ``404``) but keeps it in the database; ``POST /api/submissions/{id}/unhide`` (reason
  optional) shows it again. Each writes an audit row, listed by ``GET /api/audit``.

Tokens are never logged, stored or shown: logs and pages name the token's name only.
"""

from __future__ import annotations

import json
import logging
import math
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from envgym.errors import ConfigError, MissingDependencyError

try:
    from fastapi import FastAPI, HTTPException, Request
    from fastapi.concurrency import run_in_threadpool
    from fastapi.responses import HTMLResponse, JSONResponse
except ImportError as err:  # pragma: no cover - exercised only without the extra
    raise MissingDependencyError("fastapi", "leaderboard", "The leaderboard web app") from err

from envgym.leaderboard import pages
from envgym.leaderboard.bundle import DEFAULT_MAX_UNCOMPRESSED, BundleError, read_bundle
from envgym.leaderboard.store import Store
from envgym.leaderboard.verify import VerificationError, VerifyConfig, verify_bundle

__all__ = ["DEFAULT_MAX_UPLOAD", "DEFAULT_UPLOADS_PER_MINUTE", "UploadLimiter", "create_app"]

log = logging.getLogger(__name__)

#: Largest upload accepted by default (the compressed bundle).
DEFAULT_MAX_UPLOAD = 32 * 1024 * 1024
#: Uploads accepted per token in any 60 seconds by default.
DEFAULT_UPLOADS_PER_MINUTE = 30
#: Longest hide or unhide reason kept in the audit.
MAX_REASON = 1000


def _error(status: int, error: str, reason: str) -> JSONResponse:
    return JSONResponse({"error": error, "reason": reason}, status_code=status)


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
        return JSONResponse({"error": self.error, "reason": self.reason}, status_code=self.status, headers=self.headers)


class UploadLimiter:
    """At most ``per_minute`` uploads per key (a token's name) in any 60 seconds: a sliding window
    kept in memory, so it counts the uploads of this process only (run one server process per
    database, or put a shared limit in front of several)."""

    window = 60.0

    def __init__(self, per_minute: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.per_minute = per_minute
        self._clock = clock
        self._seen: dict[str, deque[float]] = {}
        self._lock = threading.Lock()

    def admit(self, key: str) -> int | None:
        """Count an upload by ``key``: ``None`` when admitted, else the seconds until one would be."""
        now = self._clock()
        with self._lock:
            times = self._seen.setdefault(key, deque())
            while times and times[0] <= now - self.window:
                times.popleft()
            if len(times) >= self.per_minute:
                return max(1, math.ceil(times[0] + self.window - now))
            times.append(now)
            return None


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


def create_app(
    store: Store | str | None = None,
    *,
    max_upload_bytes: int = DEFAULT_MAX_UPLOAD,
    max_unpacked_bytes: int = DEFAULT_MAX_UNCOMPRESSED,
    verify_config: VerifyConfig | None = None,
    require_token: bool = False,
    uploads_per_minute: int | None = DEFAULT_UPLOADS_PER_MINUTE,
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
            in this process's memory; ``None``: no limit. Anonymous uploads are not counted.
    """
    if uploads_per_minute is not None and (
        not isinstance(uploads_per_minute, int) or isinstance(uploads_per_minute, bool) or uploads_per_minute < 1
    ):
        raise ConfigError(f"uploads_per_minute must be an integer >= 1 or None, got {uploads_per_minute!r}.")
    if not isinstance(store, Store):
        store = Store(store)
    db: Store = store
    config = verify_config or VerifyConfig()
    limiter = UploadLimiter(uploads_per_minute) if uploads_per_minute is not None else None
    app = FastAPI(
        title="envgym leaderboard",
        summary="Replay-verified results of agents on envgym benchmark suites.",
        docs_url="/api/docs",
        redoc_url=None,
        openapi_url="/api/openapi.json",
    )
    app.state.store = db
    app.state.upload_limiter = limiter

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

    def submission_or_404(submission_id: int) -> dict[str, Any]:
        sub = db.submission(submission_id)
        if sub is None:
            raise HTTPException(404, f"no submission {submission_id}")
        return sub

    # -- pages -------------------------------------------------------------------------------------
    @app.get("/", response_class=HTMLResponse)
    def index() -> str:
        return pages.index_page(db.suites(), _same)

    @app.get("/suites/{suite_id}", response_class=HTMLResponse)
    def suite(suite_id: str) -> str:
        board = db.leaderboard(suite_id)
        if not board:
            raise HTTPException(404, f"no submissions for suite {suite_id!r}")
        return pages.suite_page(suite_id, board, _same)

    @app.get("/entries/{submission_id}", response_class=HTMLResponse)
    def entry(submission_id: int) -> str:
        sub = submission_or_404(submission_id)
        return pages.submission_page(sub, db.episodes(submission_id), _same)

    @app.get("/entries/{submission_id}/episodes/{ordinal}", response_class=HTMLResponse)
    def episode_view(submission_id: int, ordinal: int) -> str:
        sub = submission_or_404(submission_id)
        found = db.episode(submission_id, ordinal)
        if found is None:
            raise HTTPException(404, f"submission {submission_id} has no episode {ordinal}")
        return pages.episode_page(sub, found, db.episodes(submission_id), _same)

    # -- JSON API ----------------------------------------------------------------------------------
    @app.get("/api/suites")
    def api_suites() -> list[dict[str, Any]]:
        return db.suites()

    @app.get("/api/suites/{suite_id}/entries")
    def api_suite_entries(suite_id: str) -> list[dict[str, Any]]:
        return db.leaderboard(suite_id)

    @app.get("/api/entries/{submission_id}")
    def api_entry(submission_id: int) -> dict[str, Any]:
        return submission_or_404(submission_id)

    @app.get("/api/entries/{submission_id}/episodes")
    def api_episodes(submission_id: int) -> list[dict[str, Any]]:
        submission_or_404(submission_id)
        return db.episodes(submission_id)

    @app.get("/api/entries/{submission_id}/episodes/{ordinal}")
    def api_episode(submission_id: int, ordinal: int) -> dict[str, Any]:
        submission_or_404(submission_id)
        found = db.episode(submission_id, ordinal)
        if found is None:
            raise HTTPException(404, f"submission {submission_id} has no episode {ordinal}")
        return found

    def verify_and_store(data: bytes, submitter: str | None) -> JSONResponse:
        try:
            bundle = read_bundle(data, max_bytes=max_unpacked_bytes)
        except BundleError as err:
            return _error(400, "malformed", str(err))
        if bundle.recompute_hash() == bundle.content_hash:
            existing = db.find(bundle.content_hash)
            if existing is not None:
                return JSONResponse({"status": "exists", "submission": existing}, status_code=200)
        try:
            verified = verify_bundle(bundle, config)
        except VerificationError as err:
            return _error(422, "rejected", str(err))
        except BundleError as err:
            return _error(400, "malformed", str(err))
        stored, created = db.add(verified, bundle_size=len(data), submitter=submitter)
        log.info(
            "submission %s (%s) from %s: %s",
            stored["id"],
            stored["agent_name"],
            submitter or "anonymous",
            "stored" if created else "existing",
        )
        return JSONResponse(
            {"status": "created" if created else "exists", "submission": stored}, status_code=201 if created else 200
        )

    @app.post("/api/submissions")
    async def api_submit(request: Request) -> JSONResponse:
        # Who, and how often, before reading a byte of the body.
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
            wait = limiter.admit(who["name"]) if who is not None and limiter is not None else None
            if wait is not None:
                raise _Refused(
                    429,
                    "rate_limited",
                    f"token {who['name']!r} sent more than {uploads_per_minute} uploads in a minute; "
                    f"retry in {wait} s.",
                    {"Retry-After": str(wait)},
                )
        except _Refused as refused:
            return refused.response()
        submitter = who["name"] if who is not None else None
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
        return await run_in_threadpool(verify_and_store, body, submitter)

    # -- moderation (admin tokens) -----------------------------------------------------------------
    async def moderate(submission_id: int, request: Request, *, hide: bool) -> JSONResponse:
        action = "hide" if hide else "unhide"
        try:
            who = await admin(request)
            raw = await request.body()
            try:
                document = json.loads(raw) if raw.strip() else {}
            except (ValueError, RecursionError):
                document = None
            if not isinstance(document, dict):
                raise _Refused(
                    400, "bad_request", f'the body of /{action} must be a JSON object like {{"reason": "..."}}.'
                )
            reason = document.get("reason", "")
            if not isinstance(reason, str) or (hide and not reason.strip()) or len(reason) > MAX_REASON:
                need = "a reason (the audit keeps it)" if hide else "an optional reason"
                raise _Refused(
                    400,
                    "bad_request",
                    f'/{action} takes {need}: {{"reason": "..."}}, text of 1 to {MAX_REASON} characters; '
                    f"got {reason!r:.80}.",
                )
        except _Refused as refused:
            return refused.response()
        entry = await run_in_threadpool(db.set_hidden, submission_id, hide, reason=reason.strip(), by=who["name"])
        if entry is None:
            return _error(404, "not_found", f"no submission {submission_id}.")
        log.info("submission %s: %s by %s (%s)", submission_id, action, who["name"], entry["reason"] or "no reason")
        return JSONResponse({"submission_id": submission_id, "hidden": hide, "audit": entry})

    @app.post("/api/submissions/{submission_id}/hide")
    async def api_hide(submission_id: int, request: Request) -> JSONResponse:
        return await moderate(submission_id, request, hide=True)

    @app.post("/api/submissions/{submission_id}/unhide")
    async def api_unhide(submission_id: int, request: Request) -> JSONResponse:
        return await moderate(submission_id, request, hide=False)

    @app.get("/api/audit")
    async def api_audit(request: Request) -> JSONResponse:
        try:
            await admin(request)
        except _Refused as refused:
            return refused.response()
        return JSONResponse(await run_in_threadpool(db.audit))

    return app
