"""The WebShop store as a real web site (FastAPI + uvicorn), one session per episode.

The pages are the text environment's (:class:`~envgym.environments.webshop.pages.Store` renders
both), at WebShop's URLs::

    /{session}                                                  search page
    /search/{session}?q=words                                   the search form (redirects)
    /search_results/{session}/{kw1+kw2}/{page}
    /item_page/{session}/{asin}/{kw}/{page}/{options_json}
    /item_sub_page/{session}/{asin}/{kw}/{page}/{Description|Features|Reviews}/{options_json}
    /done/{session}/{asin}/{options_json}                        buys; shows the score

A session is made with ``POST /api/sessions?goal=<index>`` (a goal index of the catalogue, as
the environments draw them) or is named ``fixed_<i>`` (goal ``i`` of the split the server was
started with, WebShop's convention). ``GET /api/sessions/{session}`` returns the goal and, once
bought, the score and each reward term. State lives in the URLs, as in WebShop; the server keeps
only each session's goal and result.

``envgym webshop serve`` runs it on 127.0.0.1; :func:`start_in_thread` runs it inside a process
(what ``envgym/WebShop-Browser-v0`` does), on a free port.
"""

from __future__ import annotations

import json
import re
import threading
import time
import urllib.parse
import uuid
from dataclasses import dataclass, field
from typing import Any

from envgym.environments.webshop.env import shared_store
from envgym.environments.webshop.loader import load_webshop
from envgym.environments.webshop.pages import Page, Store
from envgym.environments.webshop.reward import RewardBreakdown, score

from envgym.errors import MissingDependencyError, NotAvailableError

__all__ = ["ServerHandle", "WebShopSite", "create_app", "start_in_thread"]

_SUBS = {"description": "description", "features": "features", "reviews": "reviews"}
_SESSION = re.compile(r"^[A-Za-z0-9_\-]{1,64}$")


@dataclass
class _Session:
    goal: int
    result: RewardBreakdown | None = None
    options: list[str] = field(default_factory=list)
    asin: str = ""


class WebShopSite:
    """The site's logic without the web framework: sessions, URL -> page, page -> HTML."""

    def __init__(self, store: Store, split_range: tuple[int, int]) -> None:
        self.store = store
        self.split_range = split_range
        self.sessions: dict[str, _Session] = {}
        self._lock = threading.Lock()

    def new_session(self, goal: int) -> str:
        if not 0 <= goal < self.store.catalogue.n_goals():
            raise KeyError(f"goal index {goal} outside 0..{self.store.catalogue.n_goals() - 1}")
        sid = uuid.uuid4().hex
        with self._lock:
            self.sessions[sid] = _Session(goal)
        return sid

    def session(self, sid: str) -> _Session:
        with self._lock:
            found = self.sessions.get(sid)
            if found is None:
                m = re.fullmatch(r"fixed_(\d+)", sid)
                lo, hi = self.split_range
                if m is None or not 0 <= int(m.group(1)) < hi - lo:
                    raise KeyError(f"unknown session {sid!r}")
                found = self.sessions[sid] = _Session(lo + int(m.group(1)))
            return found

    def page(self, sid: str, kind: str, **parts: str) -> Page:
        """The :class:`Page` a URL names (``KeyError`` when it names nothing)."""
        self.session(sid)
        if kind == "search":
            return Page()
        keywords = " ".join(urllib.parse.unquote_plus(parts.get("kw", "")).split())
        if keywords == "-":
            keywords = ""
        number = int(parts.get("page", "1"))
        results = tuple(self.store.index.search(keywords)) if keywords else ()
        if kind == "results":
            if number < 1 or (number - 1) * 10 >= max(len(results), 1):
                raise KeyError(f"no results page {number}")
            return Page("results", keywords=keywords, page=number, results=results)
        index = self.store.catalogue.index_of_asin(parts["asin"])
        if index is None:
            raise KeyError(f"unknown product {parts['asin']!r}")
        raw = json.loads(urllib.parse.unquote(parts.get("options", "{}")) or "{}")
        if not isinstance(raw, dict):
            raise KeyError("options must be a JSON object")
        offered = self.store.catalogue.product(index).options
        options = tuple((str(a), str(v)) for a, v in raw.items() if v in offered.get(str(a), ()))
        page = Page(kind, keywords=keywords, page=number, results=results, product=index, options=options)
        if kind == "sub":
            sub = _SUBS.get(parts.get("sub", "").lower())
            if sub is None:
                raise KeyError(f"unknown sub-page {parts.get('sub')!r}")
            page = Page("sub", keywords, number, results, index, options, sub)
        return page

    def render(self, sid: str, page: Page) -> str:
        session = self.session(sid)
        goal = self.store.catalogue.goal(session.goal)
        text = self.store.render_html(page, goal, session=sid)
        if page.kind == "done":
            if session.result is None:  # the first purchase of a session counts
                product = self.store.catalogue.product(page.product)
                session.result = score(product, goal, [v for _, v in page.options])
                session.options = [v for _, v in page.options]
                session.asin = product.asin
            line = f"<p id='score'>Your score (min 0.0, max 1.0): {session.result.score:.4f}</p>"
            text = text.replace("</body>", line + "</body>")
        return text

    def state(self, sid: str) -> dict[str, Any]:
        session = self.session(sid)
        goal = self.store.catalogue.goal(session.goal)
        out: dict[str, Any] = {"session": sid, "goal_index": session.goal, "instruction": goal.instruction}
        r = session.result
        if r is not None:
            out.update(
                bought=session.asin,
                options=session.options,
                score=r.score,
                success=r.success,
                components={
                    "webshop_reward": r.score,
                    "type_reward": r.r_type,
                    "attribute_reward": r.attribute,
                    "option_reward": r.option,
                    "price_reward": r.price,
                    "success_reward": 1.0 if r.success else 0.0,
                },
            )
        return out


def create_app(site: WebShopSite) -> Any:
    """The FastAPI application serving ``site``."""
    try:
        from fastapi import FastAPI, HTTPException
        from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse
    except ImportError as err:
        raise MissingDependencyError("fastapi", "webshop", "the WebShop web server") from err

    app = FastAPI(title="envgym WebShop", docs_url=None, redoc_url=None, openapi_url=None)

    def html(sid: str, kind: str, **parts: str) -> HTMLResponse:
        if not _SESSION.match(sid):
            raise HTTPException(404, "unknown session")
        try:
            page = site.page(sid, kind, **parts)
            return HTMLResponse(site.render(sid, page))
        except (KeyError, ValueError) as err:
            raise HTTPException(404, str(err)) from None

    @app.post("/api/sessions")
    def new_session(goal: int) -> JSONResponse:
        try:
            return JSONResponse({"session": site.new_session(goal)})
        except KeyError as err:
            raise HTTPException(400, str(err)) from None

    @app.get("/api/sessions/{sid}")
    def session_state(sid: str) -> JSONResponse:
        try:
            return JSONResponse(site.state(sid))
        except KeyError as err:
            raise HTTPException(404, str(err)) from None

    @app.get("/search/{sid}")
    def search(sid: str, q: str = "") -> RedirectResponse:
        words = "+".join(urllib.parse.quote(w, safe="") for w in q.split())
        if not words:
            return RedirectResponse(f"/{sid}", status_code=303)
        return RedirectResponse(f"/search_results/{sid}/{words}/1", status_code=303)

    @app.get("/search_results/{sid}/{kw}/{page}")
    def results(sid: str, kw: str, page: str) -> HTMLResponse:
        return html(sid, "results", kw=kw, page=page)

    @app.get("/item_page/{sid}/{asin}/{kw}/{page}/{options}")
    def item(sid: str, asin: str, kw: str, page: str, options: str) -> HTMLResponse:
        return html(sid, "item", asin=asin, kw=kw, page=page, options=options)

    @app.get("/item_sub_page/{sid}/{asin}/{kw}/{page}/{sub}/{options}")
    def sub_page(sid: str, asin: str, kw: str, page: str, sub: str, options: str) -> HTMLResponse:
        return html(sid, "sub", asin=asin, kw=kw, page=page, sub=sub, options=options)

    @app.get("/done/{sid}/{asin}/{options}")
    def done(sid: str, asin: str, options: str) -> HTMLResponse:
        return html(sid, "done", asin=asin, options=options)

    @app.get("/{sid}")
    def search_page(sid: str) -> HTMLResponse:
        return html(sid, "search")

    return app


@dataclass
class ServerHandle:
    """A server running in a daemon thread of this process."""

    site: WebShopSite
    url: str
    server: Any
    thread: threading.Thread

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)


def start_in_thread(site: WebShopSite, host: str = "127.0.0.1", port: int = 0) -> ServerHandle:
    """Serve ``site`` with uvicorn in a daemon thread; returns once it accepts connections."""
    try:
        import uvicorn
    except ImportError as err:
        raise MissingDependencyError("uvicorn", "webshop", "the WebShop web server") from err
    config = uvicorn.Config(create_app(site), host=host, port=port, log_level="warning", lifespan="off")
    server = uvicorn.Server(config)
    server.install_signal_handlers = lambda: None  # type: ignore[method-assign]  # not the main thread
    thread = threading.Thread(target=server.run, name="envgym-webshop-server", daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise NotAvailableError(f"the WebShop server did not start on {host}:{port}.")
        time.sleep(0.01)
    bound = server.servers[0].sockets[0].getsockname()
    return ServerHandle(site, f"http://{host}:{bound[1]}", server, thread)


def serve(
    *,
    host: str = "127.0.0.1",
    port: int = 3000,
    catalogue_size: int = 10_000,
    catalogue_seed: int = 0,
    split: str = "test",
    cache_dir: str | None = None,
    items: str | None = None,
    attributes: str | None = None,
    human: str | None = None,
    announce: Any = None,
) -> None:
    """Serve the store until interrupted (``envgym webshop serve``)."""
    try:
        import uvicorn
    except ImportError as err:
        raise MissingDependencyError("uvicorn", "webshop", "the WebShop web server") from err
    catalogue = load_webshop(items, attributes, human) if items else None
    store = shared_store(catalogue, size=catalogue_size, seed=catalogue_seed, cache_dir=cache_dir)
    site = WebShopSite(store, store.catalogue.split_range(split))
    if announce is not None:
        lo, hi = site.split_range
        announce(
            f"envgym WebShop on http://{host}:{port}/fixed_0 ({store.catalogue.label}; "
            f"sessions fixed_0..fixed_{hi - lo - 1} are the {split} goals)"
        )
    uvicorn.run(create_app(site), host=host, port=port, log_level="warning")
