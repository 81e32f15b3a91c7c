"""The 20 games of Coopetition-Gym v1 as data: name, mechanism class, where the class lives, summary.

Imported by the family's ``__init__`` (registration imports no game code) and by :mod:`.api`
(which imports a game's module only when the game is made).
"""

from __future__ import annotations

import importlib
from typing import Any, NamedTuple

from envgym.errors import UnknownEnvError, suggest

__all__ = ["GAMES", "GameEntry", "game_class"]


class GameEntry(NamedTuple):
    name: str
    mechanism: str
    module: str
    cls: str
    summary: str


GAMES: tuple[GameEntry, ...] = (
    # TR-1: interdependence and complementarity
    GameEntry(
        "PartnerHoldUp", "TR-1", "interdependence", "PartnerHoldUp", "Strong and weak partner; hold-up risk, weak partner may exit"
    ),
    GameEntry(
        "PlatformEcosystem", "TR-1", "interdependence", "PlatformEcosystem", "A platform and its developers; the ecosystem can die"
    ),
    GameEntry("DynamicPartnerSelection", "TR-1", "interdependence", "DynamicPartnerSelection", "Agents choose whom to invest in"),
    GameEntry("SynergySearch", "TR-1", "interdependence", "SynergySearch", "Two partners learn a hidden synergy strength"),
    GameEntry("RenaultNissan", "TR-1", "interdependence", "RenaultNissan", "Renault-Nissan alliance case study in four phases"),
    # TR-2: trust and reputation
    GameEntry("TrustDilemma", "TR-2", "trust", "TrustDilemma", "Repeated dyadic trust game; ends if trust collapses"),
    GameEntry("RecoveryRace", "TR-2", "trust", "RecoveryRace", "Rebuild trust after a breach under a reputation ceiling"),
    GameEntry("SLCD", "TR-2", "trust", "SLCD", "Samsung-Sony S-LCD joint venture case study"),
    GameEntry("CooperativeNegotiation", "TR-2", "trust", "CooperativeNegotiation", "Negotiate toward an agreement"),
    GameEntry("ReputationMarket", "TR-2", "trust", "ReputationMarket", "Market of agents ranked in reputation tiers"),
    # TR-3: collective action and loyalty
    GameEntry("TeamProduction", "TR-3", "collective", "TeamProduction", "Team production with free-riding incentives"),
    GameEntry("LoyaltyTeam", "TR-3", "collective", "LoyaltyTeam", "Team production with loyalty bonuses"),
    GameEntry("CoalitionFormation", "TR-3", "collective", "CoalitionFormation", "Coalitions form and collapse"),
    GameEntry("ApacheProject", "TR-3", "collective", "ApacheProject", "Apache HTTP Server open-source project case study"),
    GameEntry("PublicGoods", "TR-3", "collective", "PublicGoods", "Public goods game with a multiplied common pool"),
    # TR-4: sequential interaction and reciprocity
    GameEntry("ReciprocalDilemma", "TR-4", "reciprocity", "ReciprocalDilemma", "Dyadic dilemma with reciprocity over 5 rounds"),
    GameEntry("GiftExchange", "TR-4", "reciprocity", "GiftExchange", "Employer-worker gift exchange"),
    GameEntry("IndirectReciprocity", "TR-4", "reciprocity", "IndirectReciprocity", "Reciprocity through reputation among 4"),
    GameEntry("GraduatedSanction", "TR-4", "reciprocity", "GraduatedSanction", "Community with graduated sanctions among 6"),
    GameEntry("AppleAppStore", "TR-4", "reciprocity", "AppleAppStore", "Apple, developers and users: App Store case study"),
)

_BY_NAME = {g.name: g for g in GAMES}


def game_class(name: str) -> Any:
    """The :class:`~.game.Game` subclass of ``name`` (imports its module)."""
    entry = _BY_NAME.get(name)
    if entry is None:
        raise UnknownEnvError(
            f"unknown coopetition game {name!r}.{suggest(name, list(_BY_NAME))} Games: {', '.join(_BY_NAME)}."
        )
    module = importlib.import_module(f"envgym.environments.coopetition.{entry.module}")
    return getattr(module, entry.cls)
