"""WebShop: find and buy the product an instruction describes in a simulated online store.

Only specs live here (string entry points): registering the family imports no environment code.
``envgym/WebShop-v0`` is the text environment over the generated 10,000-product catalogue in
WebShop's ``text`` observation mode; ``-TextRich`` and ``-HTML`` set the other observation modes;
``-Small`` uses a 1,000-product catalogue (WebShop's ``items_shuffle_1000`` scale, quick to build);
``envgym/WebShop-Browser-v0`` drives the same store served over HTTP in a real Chromium through
Playwright (needs ``pip install 'envgym[webshop]'`` and Debian's ``chromium``).
"""

from __future__ import annotations

from envgym.registration import EnvSpec

FAMILY = "webshop"
#: The family contract's data (envgym.families): its suite, perf script and waivers.
CONTRACT = {"suite": "webshop-v1", "perf": "benchmarks/perf/webshop.py"}
_ENTRY = "envgym.environments.webshop.env:WebShopEnv"
_BASE = "envgym/WebShop-v0"
_SUMMARY = "WebShop online store: search, pick a product and options, buy (BM25 over SQLite FTS5)"

#: (id part, summary, kwargs) of the presets of envgym/WebShop-v0.
_VARIANTS = (
    (
        "TextRich",
        "WebShop, text_rich observations (marked buttons, one element a line)",
        {"observation_mode": "text_rich"},
    ),
    ("HTML", "WebShop, raw HTML observations", {"observation_mode": "html"}),
    ("Small", "WebShop over a 1,000-product catalogue (text mode)", {"catalogue_size": 1000}),
)

SPECS: list[EnvSpec] = [
    EnvSpec(id=_BASE, entry_point=_ENTRY, family=FAMILY, summary=f"{_SUMMARY}; 10,000 products, text mode"),
    *(
        EnvSpec(
            id=f"envgym/WebShop-{name}-v0",
            entry_point=_ENTRY,
            family=FAMILY,
            summary=summary,
            kwargs=kwargs,
            variant_of=_BASE,
        )
        for name, summary, kwargs in _VARIANTS
    ),
    EnvSpec(
        id="envgym/WebShop-Browser-v0",
        entry_point="envgym.environments.webshop.browser_env:WebShopBrowserEnv",
        family=FAMILY,
        summary="WebShop served over HTTP and driven in Chromium via Playwright (needs envgym[webshop])",
    ),
]
