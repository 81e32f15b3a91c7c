"""``python -m envgym``: the ``envgym`` command (:mod:`envgym.cli`), for when the console script
is not on ``PATH`` (a virtual environment that is not activated, ``pipx run``)."""

from envgym.cli import main

main(prog_name="envgym")
