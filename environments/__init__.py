"""Environment families. Each subpackage defines ``SPECS`` (a list of ``envgym.EnvSpec``) in its
``__init__`` and keeps the environment code in modules that are imported only when made.

This folder installs as ``envgym.environments`` and imports under that name only (see
``hatch_build.py``): a top-level ``environments`` would clash with other distributions.
"""

if __name__ != "envgym.environments":
    raise ImportError(
        f"envgym's environment families import as 'envgym.environments', not {__name__!r}: "
        "use `import envgym.environments` (install the checkout with `pip install -e .`)."
    )
