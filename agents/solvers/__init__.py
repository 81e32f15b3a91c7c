"""Per-environment solvers used by the oracle agent (module name = env class ``name``)."""
