"""Software-engineering sandboxes: fix bugs injected into real Python libraries, graded as SWE-bench grades.

Only specs live here (string entry points): registering the family imports no environment code.
``envgym/SWE-v0`` is the bash interface (one command per action, as mini-swe-agent);
``envgym/SWE-Tools-v0`` the structured-tools variant (view a file range, replace a string, search,
run tests, submit). Both run each episode in a fresh sandbox (``sandbox="bwrap"``, the default, or
``"docker"``) over the shipped task manifest (:mod:`.tasks`), built by :mod:`.builder` from the
pinned libraries of :mod:`.libraries`.
"""

from __future__ import annotations

from envgym.registration import EnvSpec

FAMILY = "swe"
#: The family contract's data (envgym.families): its suite, perf script and waivers.
CONTRACT = {"suite": "swe-v1", "perf": "benchmarks/perf/swe.py"}
_ENTRY = "envgym.environments.swe.env:SWEEnv"

SPECS: list[EnvSpec] = [
    EnvSpec(
        id="envgym/SWE-v0",
        entry_point=_ENTRY,
        family=FAMILY,
        summary="Fix a bug injected into a real Python library with bash commands in a sandbox (SWE-bench grading)",
    ),
    EnvSpec(
        id="envgym/SWE-Tools-v0",
        entry_point=_ENTRY,
        family=FAMILY,
        summary="SWE-v0 with structured tools: view a file range, replace a string, search, run tests, submit",
        kwargs={"tools": "structured"},
        variant_of="envgym/SWE-v0",
    ),
]
