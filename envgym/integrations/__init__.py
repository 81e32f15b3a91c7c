"""Adapters that plug envgym environments into other stacks (TRL, verifiers, SkyRL, verl, OpenEnv)."""
