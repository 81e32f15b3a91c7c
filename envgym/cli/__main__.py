"""``python -m envgym.cli``."""

from envgym.cli import main

main()
