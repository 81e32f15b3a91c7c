"""Oracle for the travel domain of ``envgym/Service-Travel-v0``: a careful agent that follows the policy.

It reads only the observations: the first one (policy, tools, the user's opening message) and
then each user reply or tool result. From the opening it takes the request (cancel, move a
flight, upgrade the cabin, add bags, fix a passenger name, compensation for a delayed or
cancelled flight) and the trip (airport codes and date, flight number); from the policy text it
takes the clock, the free bag table, the bag fee and the compensation amounts. Then it does what
the policy asks of an agent: asks for the user id and looks the user up, finds the reservation
among the user's own, checks the facts the policy depends on with the tools (booking time,
flight statuses, cabin, insurance, membership; the cancellation reason when insurance is the
only ground), refuses with the reason when the policy forbids the request, otherwise states the
action and its cost, asks which payment method to use when money moves, asks for a yes, acts,
and tells the user the outcome (refund, price difference, fee, certificate amount). It never
reads the task's gold calls or expected state. The conversation is a generator: each ``yield``
is one action, and the next observation is sent back into it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Generator
from datetime import datetime, timedelta
from typing import Any

from envgym.rollout import Policy

__all__ = ["Solver", "parse_policy", "parse_request"]

Script = Generator[str, str, None]
_TRIP = re.compile(r"\(([A-Z]{3})\) to [^()]*\(([A-Z]{3})\) on (\d{4}-\d{2}-\d{2})")
_CABIN_WORDS = (("basic economy", "basic_economy"), ("business", "business"), ("economy", "economy"))
_COVERED = re.compile(
    r"\b(health|medical|sick|ill|injur\w*|doctor|hospital|surgery|weather|storm|hurricane|snow|blizzard|flood)",
    re.IGNORECASE,
)
_NUMBERS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "a": 1, "an": 1}


def parse_policy(text: str) -> dict[str, Any]:
    """The figures the policy states: clock, free bags table, bag fee, compensation per passenger."""
    now = re.search(r"current time is (\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2})", text)
    table = {
        m.group(1): {"basic_economy": int(m.group(2)), "economy": int(m.group(3)), "business": int(m.group(4))}
        for m in re.finditer(r"\|\s*(regular|silver|gold)\s*\|\s*(\d+)\s*\|\s*(\d+)\s*\|\s*(\d+)\s*\|", text)
    }
    fee = re.search(r"beyond the free allowance costs \$(\d+)", text)
    comp = re.search(
        r"\$(\d+) per passenger of the reservation for a cancelled flight, or\s+\$(\d+) per passenger", text
    )
    if not (now and len(table) == 3 and fee and comp):
        raise ValueError("the travel policy text changed: the oracle cannot read its figures")
    return {
        "now": datetime.fromisoformat(now.group(1)),
        "free_bags": table,
        "bag_fee": int(fee.group(1)),
        "compensation": {"cancelled": int(comp.group(1)), "delayed": int(comp.group(2))},
    }


def parse_request(opening: str) -> dict[str, Any]:
    """What the caller wants, from their opening message."""
    text = opening.lower()
    req: dict[str, Any] = {"intent": None}
    trip = _TRIP.search(opening)
    if trip:
        req["origin"], req["destination"], req["date"] = trip.groups()
    if "compensation" in text:
        req["intent"] = "compensation"
        flight = re.search(r"\b(HAT\d+)\b", opening)
        req["flight_number"] = flight.group(1) if flight else None
    elif "cancel" in text:
        req["intent"] = "cancel"
    elif re.search(r"\b(move|change|reschedule)\b.*\bflight\b", text):
        req["intent"] = "change_flight"
        dates = re.findall(r"\d{4}-\d{2}-\d{2}", opening)
        req["new_date"] = dates[-1] if len(dates) >= 2 else None
        req["preference"] = "cheapest" if "cheapest" in text else "earliest"
    elif "upgrade" in text:
        req["intent"] = "change_cabin"
        tail = text.rsplit(" to ", 1)[-1]
        req["cabin"] = next((code for word, code in _CABIN_WORDS if word in tail), None)
    elif "bag" in text:
        req["intent"] = "add_bags"
        many = re.search(r"\badd (\d+|one|two|three|four|five|a|an)\b", text)
        req["bags"] = (int(many.group(1)) if many.group(1).isdigit() else _NUMBERS[many.group(1)]) if many else 1
    elif "passenger" in text:
        req["intent"] = "update_passenger"
        names = re.search(r":\s*([A-Za-z'-]+) ([A-Za-z'-]+) should be ([A-Za-z'-]+) ([A-Za-z'-]+)", opening)
        req["names"] = names.groups() if names else None
    return req


def _result(observation: str) -> Any:
    """A tool result's JSON, or ``{"error": text}`` for a tool error or anything unexpected."""
    body = observation.split("): ", 1)[-1] if observation.startswith("Tool result (") else observation
    if body.startswith("Tool error:"):
        return {"error": body}
    try:
        return json.loads(body)
    except json.JSONDecodeError:
        return {"error": body}


def _said_yes(reply: str) -> bool:
    return bool(re.search(r"\b(yes|yeah|sure|go ahead|please do|confirm)\b", reply, re.IGNORECASE)) and not re.search(
        r"\b(no|don't|do not|not now)\b", reply, re.IGNORECASE
    )


class Solver(Policy):
    """Policy-following agent for the travel domain (see the module docstring)."""

    def __init__(self, env_id: str = "envgym/Service-Travel-v0", seed: int | None = None) -> None:
        self.env_id = env_id
        self._script: Script | None = None

    def act(self, observation: str, info: dict[str, Any]) -> str:
        if self._script is None:
            opening = observation.rsplit("\n\nUser: ", 1)[-1]
            self._script = self._conversation(parse_policy(observation), parse_request(opening))
            return next(self._script)
        try:
            return self._script.send(observation)
        except StopIteration:
            return "done"

    # ------------------------------------------------------------------ helpers
    @staticmethod
    def _call(name: str, **arguments: Any) -> Generator[str, str, Any]:
        observation = yield json.dumps({"name": name, "arguments": arguments})
        return _result(observation)

    @staticmethod
    def _confirm(text: str) -> Generator[str, str, bool]:
        reply = yield f"{text} Shall I proceed? Please answer yes or no."
        return _said_yes(reply)

    def _payment(self, user: dict[str, Any], amount: int) -> Generator[str, str, str | None]:
        methods = user["payment_methods"]
        usable = {pid: m for pid, m in sorted(methods.items()) if m["source"] != "certificate"}
        listed = "; ".join(
            f"{m['brand']} credit card ending in {m['last_four']}"
            if m["source"] == "credit_card"
            else f"gift card (${m['amount']} left)"
            for m in usable.values()
        )
        for _ in range(2):
            reply = yield f"Please tell me which payment method to use for ${abs(amount)}: {listed}."
            low = reply.lower()
            if "gift card" in low:
                gift = [pid for pid, m in usable.items() if m["source"] == "gift_card"]
                if gift:
                    return gift[0]
            for four in re.findall(r"\b(\d{4})\b", reply):
                cards = [pid for pid, m in usable.items() if m.get("last_four") == four]
                if cards:
                    return cards[0]
            cards = [pid for pid, m in usable.items() if m["source"] == "credit_card"]
            if "credit card" in low and len(cards) == 1:
                return cards[0]
        return None

    def _flown(self, segment: dict[str, Any], status: str, today: str) -> bool:
        return segment["date"] < today or status == "landed"

    # ------------------------------------------------------------------ the conversation
    def _conversation(self, policy: dict[str, Any], req: dict[str, Any]) -> Script:
        today = policy["now"].date().isoformat()
        user_id = None
        reply = yield "I'd be glad to help. First, could you please tell me your user id?"
        for _ in range(2):
            found = re.search(r"user id is ([A-Za-z0-9_.-]+?)\.?(?:\s|$)", reply)
            if found:
                user_id = found.group(1)
                break
            reply = yield "To look up your account I need your user id. What is your user id?"
        if user_id is None:
            yield "I'm sorry, I can't help without your user id."
            return
        user = yield from self._call("get_user_details", user_id=user_id)
        if "error" in user:
            yield "I'm sorry, I couldn't find an account with that user id."
            return
        res = seg = None
        for rid in user["reservations"]:
            found_res = yield from self._call("get_reservation_details", reservation_id=rid)
            if "error" in found_res or found_res["status"] != "active":
                continue
            for s in found_res["flights"]:
                if (s["origin"], s["destination"], s["date"]) == (
                    req.get("origin"),
                    req.get("destination"),
                    req.get("date"),
                ):
                    res, seg = found_res, s
            if res is not None:
                break
        if res is None or req["intent"] is None:
            yield "I'm sorry, I couldn't find an active reservation of yours with that flight."
            return
        statuses = []
        for s in res["flights"]:
            flight = yield from self._call("get_flight_details", flight_number=s["flight_number"], date=s["date"])
            statuses.append(flight.get("status", "unknown"))
        flown = any(self._flown(s, st, today) for s, st in zip(res["flights"], statuses, strict=True))
        handler = getattr(self, f"_{req['intent']}")
        yield from handler(policy, req, user, res, seg, statuses, flown)

    def _cancel(self, policy, req, user, res, seg, statuses, flown) -> Script:
        rid = res["reservation_id"]
        if flown:
            yield f"I'm sorry, reservation {rid} cannot be cancelled: one of its flights has already been flown."
            return
        within = policy["now"] - datetime.fromisoformat(res["created_at"]) <= timedelta(hours=24)
        allowed = within or "cancelled" in statuses or res["cabin"] == "business"
        if not allowed and res["insurance"] == "yes":
            reply = yield "Could you tell me the reason for the cancellation?"
            if _COVERED.search(reply):
                allowed = True
            else:
                yield (
                    f"I'm sorry, but I can't cancel reservation {rid}. It was booked more than 24 hours ago, no flight "
                    "was cancelled by the airline, it is not in business class, and your reason is not covered by the "
                    "travel insurance, which covers health or weather reasons only."
                )
                return
        if not allowed:
            yield (
                f"I'm sorry, but I can't cancel reservation {rid}. It was booked more than 24 hours ago, no flight was "
                "cancelled by the airline, it is not in business class, and it has no travel insurance."
            )
            return
        paid: dict[str, int] = {}
        for p in res["payment_history"]:
            paid[p["payment_id"]] = paid.get(p["payment_id"], 0) + p["amount"]
        refund = sum(a for a in paid.values() if a > 0)
        ok = yield from self._confirm(
            f"I can cancel reservation {rid}; the refund of ${refund} goes back to the original payment method."
        )
        if not ok:
            yield "Understood, I have not cancelled anything."
            return
        result = yield from self._call("cancel_reservation", reservation_id=rid)
        if "error" in result:
            yield f"I'm sorry, the cancellation failed: {result['error']}"
            return
        yield f"Reservation {rid} is cancelled. A refund of ${result['total_refund']} goes back to your original payment method."

    def _change_flight(self, policy, req, user, res, seg, statuses, flown) -> Script:
        rid = res["reservation_id"]
        if res["cabin"] == "basic_economy":
            yield f"I'm sorry, reservation {rid} is in basic economy, and basic economy flights cannot be changed."
            return
        index = res["flights"].index(seg)
        if self._flown(seg, statuses[index], policy["now"].date().isoformat()) or not req.get("new_date"):
            yield "I'm sorry, that flight cannot be changed."
            return
        pax, cabin = len(res["passengers"]), res["cabin"]
        found = yield from self._call(
            "search_direct_flight", origin=seg["origin"], destination=seg["destination"], date=req["new_date"]
        )
        options = (
            [f for f in found if isinstance(f, dict) and f["available_seats"][cabin] >= pax]
            if isinstance(found, list)
            else []
        )
        if not options:
            yield f"I'm sorry, there is no available {cabin} flight on {req['new_date']} with enough seats."
            return
        if req["preference"] == "cheapest":
            pick = min(options, key=lambda f: (f["prices"][cabin], f["departure_time"]))
        else:
            pick = min(options, key=lambda f: (f["departure_time"], f["prices"][cabin]))
        diff = (pick["prices"][cabin] - seg["price"]) * pax
        payment = yield from self._payment(user, diff)
        if payment is None:
            yield "I'm sorry, I need a credit card or gift card of yours to make the change."
            return
        money = f"a price difference of ${diff} charged" if diff >= 0 else f"a refund of ${-diff}"
        ok = yield from self._confirm(
            f"I'll replace flight {seg['flight_number']} on {seg['date']} with flight {pick['flight_number']} on "
            f"{req['new_date']} (departing {pick['departure_time']}), in {cabin.replace('_', ' ')}, with {money}."
        )
        if not ok:
            yield "Understood, I have not changed anything."
            return
        flights = [{"flight_number": s["flight_number"], "date": s["date"]} for s in res["flights"]]
        flights[index] = {"flight_number": pick["flight_number"], "date": req["new_date"]}
        result = yield from self._call(
            "update_reservation_flights", reservation_id=rid, flights=flights, payment_id=payment
        )
        if "error" in result:
            yield f"I'm sorry, the change failed: {result['error']}"
            return
        yield (
            f"Done: you are now on flight {pick['flight_number']} on {req['new_date']}. The price difference is "
            f"${abs(result['price_difference'])}" + (" refunded to you." if result["price_difference"] < 0 else ".")
        )

    def _change_cabin(self, policy, req, user, res, seg, statuses, flown) -> Script:
        rid, cabin, pax = res["reservation_id"], req.get("cabin"), len(res["passengers"])
        if flown:
            yield f"I'm sorry, the cabin of reservation {rid} cannot be changed: a flight has already been flown."
            return
        if cabin is None or cabin == res["cabin"]:
            yield f"Your reservation {rid} is already in {res['cabin'].replace('_', ' ')}."
            return
        diff = 0
        for s in res["flights"]:
            flight = yield from self._call("get_flight_details", flight_number=s["flight_number"], date=s["date"])
            if "error" in flight or flight["status"] != "available" or flight["available_seats"][cabin] < pax:
                yield f"I'm sorry, flight {s['flight_number']} on {s['date']} has no {cabin.replace('_', ' ')} seats for you."
                return
            diff += (flight["prices"][cabin] - s["price"]) * pax
        payment = yield from self._payment(user, diff)
        if payment is None:
            yield "I'm sorry, I need a credit card or gift card of yours to pay for the upgrade."
            return
        ok = yield from self._confirm(
            f"I'll move reservation {rid} to {cabin.replace('_', ' ')} for all passengers and flights; the price "
            f"difference is ${diff}."
        )
        if not ok:
            yield "Understood, I have not changed anything."
            return
        result = yield from self._call("update_reservation_cabin", reservation_id=rid, cabin=cabin, payment_id=payment)
        if "error" in result:
            yield f"I'm sorry, the upgrade failed: {result['error']}"
            return
        yield f"Done: reservation {rid} is now in {cabin.replace('_', ' ')}. You paid a price difference of ${result['price_difference']}."

    def _add_bags(self, policy, req, user, res, seg, statuses, flown) -> Script:
        rid, pax = res["reservation_id"], len(res["passengers"])
        free = policy["free_bags"][user["membership"]][res["cabin"]] * pax
        total = res["total_baggages"] + req["bags"]
        nonfree = max(0, total - free)
        fee = policy["bag_fee"] * (nonfree - res["nonfree_baggages"])
        if fee > 0:
            payment = yield from self._payment(user, fee)
        else:
            payment = next(
                (pid for pid, m in sorted(user["payment_methods"].items()) if m["source"] != "certificate"), None
            )
        if payment is None:
            yield "I'm sorry, I need a credit card or gift card of yours to pay for the bags."
            return
        cost = f"the fee is ${fee}" if fee else "these bags are free with your allowance"
        ok = yield from self._confirm(
            f"I'll add {req['bags']} checked bag(s) to reservation {rid}: {total} in total, {free} free, so {nonfree} "
            f"non-free; {cost}."
        )
        if not ok:
            yield "Understood, I have not added any bags."
            return
        result = yield from self._call(
            "update_reservation_baggages",
            reservation_id=rid,
            total_baggages=total,
            nonfree_baggages=nonfree,
            payment_id=payment,
        )
        if "error" in result:
            yield f"I'm sorry, adding the bags failed: {result['error']}"
            return
        yield f"Done: reservation {rid} now has {total} checked bag(s); " + (
            f"you paid a fee of ${result['fee']}." if result["fee"] else "the added bags are free."
        )

    def _update_passenger(self, policy, req, user, res, seg, statuses, flown) -> Script:
        rid = res["reservation_id"]
        if not req.get("names"):
            yield "Which passenger should I correct, and what is the right name?"
            return
        old_first, old_last, new_first, new_last = req["names"]
        passengers = [dict(p) for p in res["passengers"]]
        match = [i for i, p in enumerate(passengers) if (p["first_name"], p["last_name"]) == (old_first, old_last)]
        if not match:
            yield f"I'm sorry, there is no passenger {old_first} {old_last} on reservation {rid}."
            return
        passengers[match[0]].update(first_name=new_first, last_name=new_last)
        ok = yield from self._confirm(
            f"I'll rename passenger {old_first} {old_last} to {new_first} {new_last} on reservation {rid}, keeping the "
            "date of birth."
        )
        if not ok:
            yield "Understood, I have not changed anything."
            return
        result = yield from self._call("update_reservation_passengers", reservation_id=rid, passengers=passengers)
        if "error" in result:
            yield f"I'm sorry, the update failed: {result['error']}"
            return
        yield f"Done: the passenger is now {new_first} {new_last} on reservation {rid}."

    def _compensation(self, policy, req, user, res, seg, statuses, flown) -> Script:
        status = statuses[res["flights"].index(seg)]
        eligible = user["membership"] in ("silver", "gold") or res["insurance"] == "yes" or res["cabin"] == "business"
        if status not in policy["compensation"]:
            yield (
                f"I'm sorry to hear that. Our records show flight {seg['flight_number']} on {seg['date']} as {status}, "
                "not delayed or cancelled, so you are not eligible for compensation."
            )
            return
        if not eligible:
            yield (
                f"I'm sorry about the {status} flight. Compensation is only for silver or gold members, insured "
                "reservations or business cabin, so you are not eligible for compensation."
            )
            return
        amount = policy["compensation"][status] * len(res["passengers"])
        ok = yield from self._confirm(
            f"I'm sorry about the {status} flight. I can send you a travel certificate of ${amount} "
            f"(${policy['compensation'][status]} per passenger)."
        )
        if not ok:
            yield "Understood, I have not sent anything."
            return
        result = yield from self._call("send_certificate", user_id=user["user_id"], amount=amount)
        if "error" in result:
            yield f"I'm sorry, sending the certificate failed: {result['error']}"
            return
        yield f"Done: a travel certificate of ${amount} is now in your account."
