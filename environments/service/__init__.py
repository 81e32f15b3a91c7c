"""Customer service with a simulated user: tau2-bench-style domains, including dual control.

Only specs live here (string entry points): registering the family imports no environment code.
``envgym/Service-<Domain>-v0`` for each domain of :data:`.catalog.DOMAINS`
(:class:`.env.ServiceEnv`).
"""

from __future__ import annotations

from envgym.environments.service.catalog import DOMAINS

from envgym.registration import EnvSpec

FAMILY = "service"
#: The family contract's data (envgym.families): its suite, perf script and waivers.
CONTRACT = {"suite": "service-v1", "perf": "benchmarks/perf/service.py"}

SPECS: list[EnvSpec] = [
    EnvSpec(
        id=f"envgym/Service-{part}-v0",
        entry_point="envgym.environments.service.env:ServiceEnv",
        family=FAMILY,
        summary=f"Customer service with a simulated user: {summary}",
        kwargs={"domain": name},
    )
    for name, (_module, _cls, part, summary) in DOMAINS.items()
]
