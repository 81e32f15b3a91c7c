"""The verifiers plugin ``envgym-verifiers``: verifiers imports a taskset by a top-level module name,
so this folder goes on ``PYTHONPATH`` for ``vf-eval`` and prime-rl's env servers
(:func:`envgym.integrations.verifiers.plugin_dir`). Everything lives in
:mod:`envgym.integrations.verifiers`."""

from envgym.integrations.verifiers import *
from envgym.integrations.verifiers import __all__  # noqa: F401
