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
"""

from __future__ import annotations

import logging
from typing import Any

from envgym.errors import MissingDependencyError

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

__all__ = ["DEFAULT_MAX_UPLOAD", "create_app"]

log = logging.getLogger(__name__)

#: Largest upload accepted by default (the compressed bundle).
DEFAULT_MAX_UPLOAD = 32 * 1024 * 1024


def _error(status: int, error: str, reason: str) -> JSONResponse:
    return JSONResponse({"error": error, "reason": reason}, status_code=status)


def _same(href: str) -> str:
    return href


class _TooLarge(Exception):
    pass


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
) -> FastAPI:
    """The leaderboard as a FastAPI app.

    Args:
        store: a :class:`Store`, a database URL or path, or ``None`` for the default database.
        max_upload_bytes: largest request body of ``POST /api/submissions`` (``413`` above).
        max_unpacked_bytes: largest bundle once decompressed (``400`` above).
        verify_config: how bundles are verified.
    """
    if not isinstance(store, Store):
        store = Store(store)
    db: Store = store
    config = verify_config or VerifyConfig()
    app = FastAPI(
        title="envgym leaderboard",
        summary="Replay-verified results of agents on envgym benchmark suites.",
        docs_url="/api/docs",
        redoc_url=None,
        openapi_url="/api/openapi.json",
    )
    app.state.store = db

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

    def verify_and_store(data: bytes) -> JSONResponse:
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
        stored, created = db.add(verified, bundle_size=len(data))
        log.info("submission %s (%s): %s", stored["id"], stored["agent_name"], "stored" if created else "existing")
        return JSONResponse(
            {"status": "created" if created else "exists", "submission": stored}, status_code=201 if created else 200
        )

    @app.post("/api/submissions")
    async def api_submit(request: Request) -> JSONResponse:
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
        return await run_in_threadpool(verify_and_store, body)

    return app
