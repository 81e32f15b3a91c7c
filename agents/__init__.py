"""Agents that play envgym environments: random, per-environment oracles (solvers) and more.

This folder installs as ``envgym.agents`` and imports under that name only (see
``hatch_build.py``): a top-level ``agents`` would clash with other distributions (the OpenAI
Agents SDK installs one).
"""

if __name__ != "envgym.agents":
    raise ImportError(
        f"envgym's agents import as 'envgym.agents', not {__name__!r}: "
        "use `import envgym.agents` (install the checkout with `pip install -e .`)."
    )
