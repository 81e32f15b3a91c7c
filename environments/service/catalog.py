"""The customer-service domains by name (imported by the family's ``__init__`` and by the env)."""

from __future__ import annotations

import importlib
from typing import Any

from envgym.errors import InvalidKwargsError, suggest

__all__ = ["DOMAINS", "domain_class"]

#: domain name -> (module, class, id part, summary)
DOMAINS: dict[str, tuple[str, str, str, str]] = {
    "retail": (
        "retail.domain",
        "RetailDomain",
        "Retail",
        "online store orders: cancel, return, exchange, change address",
    ),
    "travel": ("travel.domain", "TravelDomain", "Travel", "flight bookings: change, cancel, baggage, compensation"),
    "telecom": (
        "telecom.domain",
        "TelecomDomain",
        "Telecom",
        "mobile support, dual control: guide the user on their phone",
    ),
}


def domain_class(name: str) -> Any:
    """The :class:`~.core.Domain` subclass called ``name`` (imports its module)."""
    entry = DOMAINS.get(name)
    if entry is None:
        raise InvalidKwargsError(
            f"domain must be one of {', '.join(DOMAINS)}, got {name!r}.{suggest(str(name), list(DOMAINS))}"
        )
    module = importlib.import_module(f"envgym.environments.service.{entry[0]}")
    return getattr(module, entry[1])
