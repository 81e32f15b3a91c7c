"""Agents that play envgym environments: random, per-environment oracles (solvers) and more."""
