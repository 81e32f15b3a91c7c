"""The travel domain (its card is :class:`TravelDomain`'s docstring) and its scripted user."""

from __future__ import annotations

from typing import Any

from envgym.environments.service.core import Domain, ServiceTask, Tool, ToolCall, World
from envgym.environments.service.travel import tasks
from envgym.environments.service.travel.tools import (
    POLICY,
    TOOLS,
    cancellation_grounds,
    compensation_amounts,
    free_bags,
    is_flown,
)
from envgym.environments.service.user import CONFIRM, ScriptedUser

__all__ = ["TravelDomain", "TravelUser"]


class TravelUser(ScriptedUser):
    """The airline's scripted caller (see :class:`TravelDomain`, "User").

    Satisfied when the world equals the task's expected one and everything in ``communicate_info``
    was said in some message of the agent so far (a change task); when every ``communicate_info``
    was said (a refusal); or once they said no to a confirmation question asked after they gave
    their user id (a user who changes their mind: ``confirm`` false).
    """

    def begin(self, start: World) -> None:
        super().begin(start)
        self.heard: list[str] = []
        self._identified = False
        self._expected = self.domain.expected_world(start, self.task).state_hash()
        self._changes = any(self._writes(c) for c in self.task.gold_actions)

    def respond(self, message: str, world: World) -> Any:
        self.heard.append(message.lower().replace(",", ""))
        self._identified = "user_id" in self.given  # before this message: a question about the id is no action
        return super().respond(message, world)

    def satisfied(self, message: str, world: World) -> bool:
        if not self.scenario.confirm:
            return self._identified and bool(CONFIRM.search(message))
        said = "\n".join(self.heard)
        told = all(i.lower().replace(",", "") in said for i in self.task.communicate_info)
        if self._changes:
            return told and world.state_hash() == self._expected
        return bool(self.task.communicate_info) and told


# ----------------------------------------------------------------------------- domain
class TravelDomain(Domain):
    """An airline (tau2-bench's airline domain, rebuilt): ``envgym/Service-Travel-v0``.

    **World.** Seven airports, four routes flown both ways by three daily flights each, from three
    days before to twelve days after today (``2024-05-15``, clock fixed at 15:00 EST). Each flight
    date has a status (past ones ``landed``; some ``delayed`` or ``cancelled`` today and later),
    prices and free seats per cabin (``basic_economy`` < ``economy`` < ``business``). Four users
    (membership regular, silver or gold; credit cards, maybe a gift card and certificates) hold
    three to five reservations each: one way or round trip, one to three passengers, bags, travel
    insurance, booked hours to weeks ago, a few already cancelled.

    **Tools.** Read: ``get_user_details``, ``get_reservation_details``, ``get_flight_details``,
    ``search_direct_flight``. Write: ``cancel_reservation`` (refunds to the original methods),
    ``update_reservation_flights``, ``update_reservation_cabin``, ``update_reservation_baggages``,
    ``update_reservation_passengers``, ``send_certificate``. Tools refuse only the impossible
    (unknown ids, cancelled reservations, unavailable or full flights, certificates or short gift
    cards as payment, removing bags, changing the number of passengers).

    **Policy** (:data:`POLICY`, checked on writes by :meth:`violations` where a write can show it):
    authenticate by user id first (every task requires ``get_user_details`` of the caller: the
    ``ACTION`` basis); confirm before writes; cancel only within 24 h of booking, when the airline
    cancelled a flight, in business, or with insurance for a health or weather reason, and never
    after a flight was flown; no flight changes in basic economy, same route, nothing flown;
    cabin changes only before any flight; free bags by membership and cabin, $50 each beyond;
    compensation only on complaint, only for silver/gold members, insured or business
    reservations, $100 per passenger for a cancelled flight, $50 for a delayed one.

    **Task kinds** (15): ``cancel_within_24h``, ``cancel_airline_cancelled``, ``cancel_business``,
    ``cancel_insured_covered``, ``change_flight`` (another date; the earliest or cheapest flight),
    ``change_cabin``, ``add_bags``, ``update_passenger``, ``compensation_cancelled``,
    ``compensation_delayed``; refusals ``refuse_cancel`` (tell "24 hours"),
    ``refuse_cancel_not_covered`` ("not covered"), ``refuse_change_basic_economy``
    ("basic economy"), ``refuse_compensation`` ("not eligible"); and ``user_declines`` (the user
    says no at the confirmation: nothing may change). The graded basis is DB, COMMUNICATE,
    ACTION and POLICY; refusals must leave the database unchanged.

    **User** (:class:`TravelUser`). Opens with the request and the trip (route with airport codes
    and date, or the flight number) but without their user id; gives the user id, reservation
    id (when they know it, else says they don't), payment method ("my visa credit card ending in
    1234", "my gift card") and reason for cancelling when a message asks for them (keywords such
    as "user id", "reservation number", "payment", "card", "reason"); answers confirmation
    questions yes (no in ``user_declines``); ends the call once the task is settled (see
    :class:`TravelUser`).
    """

    name = "travel"
    title = "an airline"
    policy = POLICY

    def tools(self) -> list[Tool]:
        return list(TOOLS)

    def make_world(self, rng: Any) -> World:
        return tasks.make_world(rng)

    def make_task(self, world: World, rng: Any) -> ServiceTask:
        return tasks.make_task(world, rng)

    def make_user(self, task: ServiceTask) -> TravelUser:
        return TravelUser(task, self)

    def violations(self, before: World, call: ToolCall, result: Any) -> list[str]:
        db, args = before.db, call.arguments
        if call.name == "cancel_reservation":
            res = db["reservations"][args["reservation_id"]]
            if any(is_flown(db, s) for s in res["flights"]):
                return [f"cancelled reservation {res['reservation_id']} after one of its flights was flown"]
            if not cancellation_grounds(db, res):
                why = "booked over 24 hours ago, no airline cancellation, not business, no insurance"
                return [f"cancelled reservation {res['reservation_id']}: {why}"]
        elif call.name == "update_reservation_flights":
            res = db["reservations"][args["reservation_id"]]
            if res["cabin"] == "basic_economy":
                return [f"changed the flights of basic economy reservation {res['reservation_id']}"]
            out = []
            for old, new in zip(res["flights"], args["flights"], strict=True):
                if (old["flight_number"], old["date"]) == (new["flight_number"], new["date"]):
                    continue
                flight = db["flights"][new["flight_number"]]
                if (flight["origin"], flight["destination"]) != (old["origin"], old["destination"]):
                    out.append(
                        f"changed {old['origin']}-{old['destination']} to {flight['origin']}-{flight['destination']}"
                    )
                if is_flown(db, old):
                    out.append(f"changed flight {old['flight_number']} on {old['date']}, already flown")
            return out
        elif call.name == "update_reservation_cabin":
            res = db["reservations"][args["reservation_id"]]
            if any(is_flown(db, s) for s in res["flights"]):
                return [f"changed the cabin of reservation {res['reservation_id']} after a flight was flown"]
        elif call.name == "update_reservation_baggages":
            res = db["reservations"][args["reservation_id"]]
            membership = db["users"][res["user_id"]]["membership"]
            free = free_bags(membership, res["cabin"], len(res["passengers"]))
            due = max(0, args["total_baggages"] - free)
            if args["nonfree_baggages"] != due:
                return [
                    f"{args['total_baggages']} bags with {free} free need {due} non-free, not {args['nonfree_baggages']}"
                ]
        elif call.name == "send_certificate":
            allowed = compensation_amounts(db, args["user_id"])
            if args["amount"] not in allowed:
                shown = sorted(allowed) or "none"
                return [f"sent a ${args['amount']} certificate to {args['user_id']}; the policy allows {shown}"]
        return []
