"""The travel domain: an airline's reservations, flights and members, under a written policy.

The agent works for an airline: it looks up users, reservations and flights, searches direct
flights, and cancels reservations, changes flights or cabin, adds checked bags, fixes passenger
details and sends compensation certificates. The tools only refuse what is impossible (an unknown
id, a full or cancelled flight, a gift card without enough balance); what is *allowed* is the
policy's business (:data:`POLICY`), which the agent must apply itself: who may cancel, that basic
economy flights cannot be changed, the free bag allowance, who gets compensation and how much.
:meth:`.domain.TravelDomain.violations` checks the rules a write call can break.

Worlds and tasks come from :mod:`.tasks`, the domain and its card from :mod:`.domain`; the clock is fixed (:data:`NOW`) so that every
task is deterministic.
"""

from __future__ import annotations

import copy
import re
from datetime import datetime, timedelta
from typing import Any

from envgym.environments.service.core import Tool, ToolError, World

__all__ = [
    "BAG_FEE",
    "CABINS",
    "COMPENSATION",
    "FREE_BAGS",
    "NOW",
    "POLICY",
    "TODAY",
    "cancellation_grounds",
    "free_bags",
    "is_flown",
]

#: The world's clock: every task happens at this moment (Eastern time).
NOW = "2024-05-15 15:00:00"
TODAY = NOW[:10]
CABINS: tuple[str, ...] = ("basic_economy", "economy", "business")
#: Free checked bags per passenger, by membership and cabin.
FREE_BAGS: dict[str, dict[str, int]] = {
    "regular": {"basic_economy": 0, "economy": 1, "business": 2},
    "silver": {"basic_economy": 1, "economy": 2, "business": 3},
    "gold": {"basic_economy": 2, "economy": 3, "business": 4},
}
#: Price of each checked bag beyond the free allowance (dollars).
BAG_FEE = 50
#: Compensation certificate per passenger, by what happened to the flight (dollars).
COMPENSATION: dict[str, int] = {"cancelled": 100, "delayed": 50}
#: Words of a cancellation reason that travel insurance covers (health or weather).
COVERED_WORDS: tuple[str, ...] = (
    "health",
    "medical",
    "sick",
    "ill",
    "injur",
    "doctor",
    "hospital",
    "surgery",
    "weather",
    "storm",
    "hurricane",
    "snow",
    "blizzard",
    "flood",
)

POLICY = f"""\
# Airline customer service policy

The current time is {NOW} EST. Dates are in this time zone; "today" is {TODAY}.

## Talking with the user
- Authenticate the user before anything else: ask for their **user id** and look it up with
  `get_user_details`. Help only that user, with their own reservations.
- Before any action that changes the database (cancel a reservation, change flights, change the
  cabin, add bags, update passengers, send a certificate), list what you are about to do (and what
  it costs or refunds) and get the user's explicit confirmation (yes). If they say no, change
  nothing.
- Do one thing per turn: call one tool, or write to the user.
- Do not invent information, rules or compensation. When the policy forbids what the user asks,
  refuse and tell them why.

## Basics
- A user has a user id, a name, a membership level (regular, silver or gold), payment methods
  (credit cards, at most one gift card, travel certificates) and reservations.
- A flight number flies one route every day. On each date it has a status (`available`,
  `delayed`, `cancelled` or `landed`) and, per cabin (`basic_economy`, `economy`, `business`),
  a price per passenger and a number of free seats. Only `available` flights can be booked.
- A reservation has one or two direct flights (one way or round trip), passengers, one cabin for
  every passenger on every flight, checked bags, travel insurance (yes or no), the payments made
  and the time it was created.
- A flight of a reservation **has been flown** when its status is `landed` or its date is before
  today.
- Changes are paid (or refunded) with a credit card or gift card of the user; travel
  certificates cannot pay for changes. Ask the user which payment method to use.

## Cancel a reservation
- Find the reservation and, when it matters, ask the reason for the cancellation.
- A reservation can be cancelled only if none of its flights has been flown and at least one of
  these holds:
  1. it was booked within the last 24 hours (`created_at` at most 24 hours before now);
  2. the airline cancelled one of its flights (the flight's status is `cancelled`);
  3. its cabin is business;
  4. it has travel insurance and the reason is covered by it: health (illness, injury, medical
     reasons) or weather.
- Otherwise refuse and say why: for example it was booked more than 24 hours ago, or the reason
  is not covered by the insurance.
- `cancel_reservation` refunds every payment to its original payment method. Tell the user the
  total refund.

## Change flights
- Basic economy flights cannot be changed (their cabin can be upgraded, see below).
- In other cabins, a flight not yet flown can be replaced by an `available` flight with the same
  origin and destination on another date (use `search_direct_flight`). Flights already flown
  cannot be changed; the cabin stays the same; a round trip stays a round trip.
- Give `update_reservation_flights` every flight of the reservation, changed or not, in order.
- The price difference, (new price - price paid) times the number of passengers, is charged to
  the payment method the user chooses, or refunded to it when negative. Tell the user the price
  difference.

## Change the cabin
- Any reservation, basic economy included, can change cabin as long as none of its flights has
  been flown. All passengers on all flights change together (`update_reservation_cabin`).
- The price difference, the sum over the flights of (new cabin price - price paid) times the
  number of passengers, is charged to the payment method the user chooses. Tell the user the
  amount.

## Checked bags
- Free checked bags per passenger:

  | membership | basic_economy | economy | business |
  |---|---|---|---|
  | regular | {FREE_BAGS["regular"]["basic_economy"]} | {FREE_BAGS["regular"]["economy"]} | {FREE_BAGS["regular"]["business"]} |
  | silver | {FREE_BAGS["silver"]["basic_economy"]} | {FREE_BAGS["silver"]["economy"]} | {FREE_BAGS["silver"]["business"]} |
  | gold | {FREE_BAGS["gold"]["basic_economy"]} | {FREE_BAGS["gold"]["economy"]} | {FREE_BAGS["gold"]["business"]} |

  The membership is the user's current one; the reservation's free allowance is the number
  above times its passengers.
- Bags can be added, never removed. Every bag beyond the free allowance costs ${BAG_FEE}. Call
  `update_reservation_baggages` with the new total and the new number of non-free bags:
  max(0, total - free allowance). Tell the user the fee, or that the bags are free.

## Passengers
- Passenger names and dates of birth can be corrected with `update_reservation_passengers`
  (give the whole list); the number of passengers cannot change.

## Compensation
- Never offer compensation on your own. Consider it only when the user complains about a
  cancelled or delayed flight of one of their reservations and asks for it.
- Check the flight's status with `get_flight_details`: it must really be `cancelled` or
  `delayed` on that date.
- The user is eligible only if they are a silver or gold member, or the reservation has travel
  insurance, or its cabin is business.
- An eligible user gets one travel certificate (`send_certificate`) of
  ${COMPENSATION["cancelled"]} per passenger of the reservation for a cancelled flight, or
  ${COMPENSATION["delayed"]} per passenger for a delayed flight. Tell them the amount.
- Otherwise tell the user they are not eligible for compensation, and why.
"""


# ----------------------------------------------------------------------------- rules
def _now() -> datetime:
    return datetime.fromisoformat(NOW)


def free_bags(membership: str, cabin: str, passengers: int) -> int:
    """The reservation's free checked bags (per-passenger allowance times passengers)."""
    return FREE_BAGS[membership][cabin] * passengers


def is_flown(db: dict[str, Any], segment: dict[str, Any]) -> bool:
    """A reservation's flight has been flown: landed, or dated before today."""
    if segment["date"] < TODAY:
        return True
    day = db["flights"].get(segment["flight_number"], {}).get("dates", {}).get(segment["date"], {})
    return day.get("status") == "landed"


def _status(db: dict[str, Any], segment: dict[str, Any]) -> str:
    return db["flights"][segment["flight_number"]]["dates"][segment["date"]]["status"]


def booked_within_24h(reservation: dict[str, Any]) -> bool:
    return _now() - datetime.fromisoformat(reservation["created_at"]) <= timedelta(hours=24)


def cancellation_grounds(db: dict[str, Any], reservation: dict[str, Any]) -> list[str]:
    """The policy's grounds that let ``reservation`` be cancelled whatever the reason (may be empty);
    ``"insurance"`` is listed when the reservation is insured (the reason must then be covered)."""
    grounds = []
    if booked_within_24h(reservation):
        grounds.append("within_24h")
    if any(_status(db, s) == "cancelled" for s in reservation["flights"]):
        grounds.append("airline_cancelled")
    if reservation["cabin"] == "business":
        grounds.append("business")
    if reservation["insurance"] == "yes":
        grounds.append("insurance")
    return grounds


def reason_is_covered(reason: str) -> bool:
    """Travel insurance covers the reason: health or weather."""
    text = reason.lower()
    return any(re.search(rf"\b{w}", text) for w in COVERED_WORDS)


def compensation_amounts(db: dict[str, Any], user_id: str) -> dict[int, list[str]]:
    """Certificate amounts the policy allows for ``user_id``: amount -> reservation ids."""
    user = db["users"][user_id]
    out: dict[int, list[str]] = {}
    for rid in user["reservations"]:
        res = db["reservations"][rid]
        if res["status"] != "active":
            continue
        eligible = user["membership"] in ("silver", "gold") or res["insurance"] == "yes" or res["cabin"] == "business"
        if not eligible:
            continue
        for seg in res["flights"]:
            status = _status(db, seg)
            if status in COMPENSATION:
                out.setdefault(COMPENSATION[status] * len(res["passengers"]), []).append(rid)
    return out


# ----------------------------------------------------------------------------- tools
def _user(world: World, user_id: str) -> dict[str, Any]:
    user = world.db["users"].get(user_id)
    if user is None:
        raise ToolError(f"no user with id {user_id!r} (user ids look like 'emma_kim_1234').")
    return user


def _reservation(world: World, reservation_id: str, *, active: bool = False) -> dict[str, Any]:
    res = world.db["reservations"].get(reservation_id)
    if res is None:
        raise ToolError(f"no reservation with id {reservation_id!r} (reservation ids are 6 letters or digits).")
    if active and res["status"] != "active":
        raise ToolError(f"reservation {reservation_id} is {res['status']}: it cannot be changed.")
    return res


def _day(world: World, flight_number: str, date: str) -> tuple[dict[str, Any], dict[str, Any]]:
    flight = world.db["flights"].get(flight_number)
    if flight is None:
        raise ToolError(f"no flight number {flight_number!r} (flight numbers look like 'HAT123').")
    day = flight["dates"].get(date)
    if day is None:
        first, last = min(flight["dates"]), max(flight["dates"])
        raise ToolError(
            f"flight {flight_number} has no schedule on {date!r}: dates run from {first} to {last} (YYYY-MM-DD)."
        )
    return flight, day


def _flight_view(flight: dict[str, Any], date: str, day: dict[str, Any]) -> dict[str, Any]:
    return {
        "flight_number": flight["flight_number"],
        "origin": flight["origin"],
        "destination": flight["destination"],
        "date": date,
        "departure_time": flight["departure_time"],
        "arrival_time": flight["arrival_time"],
        "status": day["status"],
        "prices": dict(day["prices"]),
        "available_seats": dict(day["available_seats"]),
    }


def _bookable(
    world: World, flight_number: str, date: str, cabin: str, seats: int
) -> tuple[dict[str, Any], dict[str, Any]]:
    flight, day = _day(world, flight_number, date)
    if day["status"] != "available":
        raise ToolError(f"flight {flight_number} on {date} is {day['status']}: only available flights can be booked.")
    if day["available_seats"][cabin] < seats:
        raise ToolError(
            f"flight {flight_number} on {date} has {day['available_seats'][cabin]} {cabin} seat(s) left; {seats} needed."
        )
    return flight, day


def _pay(world: World, res: dict[str, Any], payment_id: str, amount: int) -> None:
    """Charge ``amount`` (refund when negative) to one of the reservation owner's payment methods."""
    user = world.db["users"][res["user_id"]]
    method = user["payment_methods"].get(payment_id)
    if method is None:
        known = ", ".join(sorted(user["payment_methods"]))
        raise ToolError(f"user {res['user_id']} has no payment method {payment_id!r}; theirs: {known}.")
    if method["source"] == "certificate":
        raise ToolError(f"{payment_id} is a travel certificate: changes are paid with a credit card or gift card.")
    if method["source"] == "gift_card" and amount > method["amount"]:
        raise ToolError(f"gift card {payment_id} has ${method['amount']} left; ${amount} is needed.")
    if amount:
        if method["source"] == "gift_card":
            method["amount"] -= amount
        res["payment_history"].append({"payment_id": payment_id, "amount": amount})


def get_user_details(world: World, user_id: str) -> dict[str, Any]:
    return copy.deepcopy(_user(world, user_id))


def get_reservation_details(world: World, reservation_id: str) -> dict[str, Any]:
    return copy.deepcopy(_reservation(world, reservation_id))


def get_flight_details(world: World, flight_number: str, date: str) -> dict[str, Any]:
    flight, day = _day(world, flight_number, date)
    return _flight_view(flight, date, day)


def search_direct_flight(world: World, origin: str, destination: str, date: str) -> list[dict[str, Any]]:
    if origin not in world.db["airports"] or destination not in world.db["airports"]:
        codes = ", ".join(sorted(world.db["airports"]))
        raise ToolError(f"unknown airport code in {origin!r} -> {destination!r}; codes: {codes}.")
    found = []
    for number in sorted(world.db["flights"]):
        flight = world.db["flights"][number]
        day = flight["dates"].get(date)
        if flight["origin"] == origin and flight["destination"] == destination and day and day["status"] == "available":
            found.append(_flight_view(flight, date, day))
    return sorted(found, key=lambda f: (f["departure_time"], f["flight_number"]))


def cancel_reservation(world: World, reservation_id: str) -> dict[str, Any]:
    res = _reservation(world, reservation_id, active=True)
    user = world.db["users"][res["user_id"]]
    paid: dict[str, int] = {}
    for payment in res["payment_history"]:
        paid[payment["payment_id"]] = paid.get(payment["payment_id"], 0) + payment["amount"]
    refunds = []
    for payment_id, amount in sorted(paid.items()):
        if amount <= 0:
            continue
        method = user["payment_methods"].get(payment_id)
        if method is not None and method["source"] != "credit_card":
            method["amount"] += amount
        res["payment_history"].append({"payment_id": payment_id, "amount": -amount})
        refunds.append({"payment_id": payment_id, "amount": amount})
    for seg in res["flights"]:
        if not is_flown(world.db, seg):
            _, day = _day(world, seg["flight_number"], seg["date"])
            day["available_seats"][res["cabin"]] += len(res["passengers"])
    res["status"] = "cancelled"
    return {
        "reservation_id": reservation_id,
        "status": "cancelled",
        "refunds": refunds,
        "total_refund": sum(r["amount"] for r in refunds),
    }


def update_reservation_flights(
    world: World, reservation_id: str, flights: list[dict[str, Any]], payment_id: str
) -> dict[str, Any]:
    res = _reservation(world, reservation_id, active=True)
    if len(flights) != len(res["flights"]):
        raise ToolError(
            f"reservation {reservation_id} has {len(res['flights'])} flight(s): give every one of them, changed or not, in order."
        )
    pax, cabin = len(res["passengers"]), res["cabin"]
    new_segments, difference = [], 0
    for old, new in zip(res["flights"], flights, strict=True):
        if (new["flight_number"], new["date"]) == (old["flight_number"], old["date"]):
            new_segments.append(dict(old))
            continue
        flight, day = _bookable(world, new["flight_number"], new["date"], cabin, pax)
        price = day["prices"][cabin]
        difference += (price - old["price"]) * pax
        new_segments.append(
            {
                "flight_number": flight["flight_number"],
                "origin": flight["origin"],
                "destination": flight["destination"],
                "date": new["date"],
                "price": price,
            }
        )
    if len({(s["flight_number"], s["date"]) for s in new_segments}) != len(new_segments):
        raise ToolError("the same flight is listed twice.")
    _pay(world, res, payment_id, difference)
    for old, new in zip(res["flights"], new_segments, strict=True):
        if (old["flight_number"], old["date"]) != (new["flight_number"], new["date"]):
            world.db["flights"][new["flight_number"]]["dates"][new["date"]]["available_seats"][cabin] -= pax
            old_day = world.db["flights"][old["flight_number"]]["dates"].get(old["date"])
            if old_day is not None and not is_flown(world.db, old):
                old_day["available_seats"][cabin] += pax
    res["flights"] = new_segments
    return {"reservation": copy.deepcopy(res), "price_difference": difference}


def update_reservation_cabin(world: World, reservation_id: str, cabin: str, payment_id: str) -> dict[str, Any]:
    res = _reservation(world, reservation_id, active=True)
    if cabin == res["cabin"]:
        raise ToolError(f"reservation {reservation_id} is already in {cabin}.")
    pax, old_cabin = len(res["passengers"]), res["cabin"]
    prices, difference = [], 0
    for seg in res["flights"]:
        _, day = _bookable(world, seg["flight_number"], seg["date"], cabin, pax)
        prices.append(day["prices"][cabin])
        difference += (day["prices"][cabin] - seg["price"]) * pax
    _pay(world, res, payment_id, difference)
    for seg, price in zip(res["flights"], prices, strict=True):
        seats = world.db["flights"][seg["flight_number"]]["dates"][seg["date"]]["available_seats"]
        seats[cabin] -= pax
        seats[old_cabin] += pax
        seg["price"] = price
    res["cabin"] = cabin
    return {"reservation": copy.deepcopy(res), "price_difference": difference}


def update_reservation_baggages(
    world: World, reservation_id: str, total_baggages: int, nonfree_baggages: int, payment_id: str
) -> dict[str, Any]:
    res = _reservation(world, reservation_id, active=True)
    if total_baggages < res["total_baggages"]:
        raise ToolError(
            f"bags can only be added: the reservation has {res['total_baggages']}, got total {total_baggages}."
        )
    if not 0 <= nonfree_baggages <= total_baggages:
        raise ToolError(
            f"nonfree_baggages must be between 0 and total_baggages ({total_baggages}), got {nonfree_baggages}."
        )
    if nonfree_baggages < res["nonfree_baggages"]:
        raise ToolError(
            f"the reservation already has {res['nonfree_baggages']} paid bag(s); got nonfree {nonfree_baggages}."
        )
    fee = BAG_FEE * (nonfree_baggages - res["nonfree_baggages"])
    _pay(world, res, payment_id, fee)
    res["total_baggages"], res["nonfree_baggages"] = total_baggages, nonfree_baggages
    return {"reservation": copy.deepcopy(res), "fee": fee}


def update_reservation_passengers(
    world: World, reservation_id: str, passengers: list[dict[str, Any]]
) -> dict[str, Any]:
    res = _reservation(world, reservation_id, active=True)
    if len(passengers) != len(res["passengers"]):
        raise ToolError(
            f"reservation {reservation_id} has {len(res['passengers'])} passenger(s); the number cannot change "
            f"(got {len(passengers)})."
        )
    for p in passengers:
        if not re.fullmatch(r"\d{4}-\d{2}-\d{2}", p["dob"]):
            raise ToolError(f"dob must be YYYY-MM-DD, got {p['dob']!r}.")
    res["passengers"] = [
        {"first_name": p["first_name"], "last_name": p["last_name"], "dob": p["dob"]} for p in passengers
    ]
    return {"reservation": copy.deepcopy(res)}


def send_certificate(world: World, user_id: str, amount: int) -> dict[str, Any]:
    user = _user(world, user_id)
    if amount <= 0:
        raise ToolError(f"amount must be a positive number of dollars, got {amount}.")
    n = 1
    while f"certificate_issued_{n}" in user["payment_methods"]:
        n += 1
    payment_id = f"certificate_issued_{n}"
    user["payment_methods"][payment_id] = {"id": payment_id, "source": "certificate", "amount": amount}
    return {"user_id": user_id, "payment_id": payment_id, "amount": amount}


def _obj(properties: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": list(properties) if required is None else required}


_STR = {"type": "string"}
_DATE = {"type": "string", "description": "YYYY-MM-DD"}
_RID = {"type": "string", "description": "the reservation id, e.g. 'ZFA04Y'"}
_UID = {"type": "string", "description": "the user id, e.g. 'emma_kim_1234'"}
_PAY = {"type": "string", "description": "id of the user's credit card or gift card, e.g. 'credit_card_4421007'"}
_SEGMENT = _obj({"flight_number": _STR, "date": _DATE})
_PASSENGER = _obj({"first_name": _STR, "last_name": _STR, "dob": _DATE})

TOOLS: tuple[Tool, ...] = (
    Tool(
        "get_user_details",
        "A user's profile: name, membership, payment methods, reservation ids.",
        _obj({"user_id": _UID}),
        get_user_details,
    ),
    Tool(
        "get_reservation_details",
        "A reservation: flights, cabin, passengers, bags, insurance, payments, created_at, status.",
        _obj({"reservation_id": _RID}),
        get_reservation_details,
    ),
    Tool(
        "get_flight_details",
        "A flight on one date: route, times, status, prices and free seats per cabin.",
        _obj({"flight_number": _STR, "date": _DATE}),
        get_flight_details,
    ),
    Tool(
        "search_direct_flight",
        "Available direct flights between two airports (IATA codes) on a date.",
        _obj({"origin": _STR, "destination": _STR, "date": _DATE}),
        search_direct_flight,
    ),
    Tool(
        "cancel_reservation",
        "Cancel a whole reservation; every payment is refunded to its original method.",
        _obj({"reservation_id": _RID}),
        cancel_reservation,
        writes=True,
    ),
    Tool(
        "update_reservation_flights",
        "Replace the flights of a reservation (list every flight, changed or not, in order; same cabin). "
        "The price difference is charged to, or refunded to, payment_id.",
        _obj({"reservation_id": _RID, "flights": {"type": "array", "items": _SEGMENT}, "payment_id": _PAY}),
        update_reservation_flights,
        writes=True,
    ),
    Tool(
        "update_reservation_cabin",
        "Move every passenger on every flight of a reservation to another cabin; the difference is charged to payment_id.",
        _obj({"reservation_id": _RID, "cabin": {"type": "string", "enum": list(CABINS)}, "payment_id": _PAY}),
        update_reservation_cabin,
        writes=True,
    ),
    Tool(
        "update_reservation_baggages",
        f"Set a reservation's checked bags: the new total and how many of them are not free (${BAG_FEE} each for "
        "the added non-free ones, charged to payment_id).",
        _obj(
            {
                "reservation_id": _RID,
                "total_baggages": {"type": "integer"},
                "nonfree_baggages": {"type": "integer"},
                "payment_id": _PAY,
            }
        ),
        update_reservation_baggages,
        writes=True,
    ),
    Tool(
        "update_reservation_passengers",
        "Replace the passenger list (same number of passengers).",
        _obj({"reservation_id": _RID, "passengers": {"type": "array", "items": _PASSENGER}}),
        update_reservation_passengers,
        writes=True,
    ),
    Tool(
        "send_certificate",
        "Give a user a travel certificate of `amount` dollars (compensation).",
        _obj({"user_id": _UID, "amount": {"type": "integer"}}),
        send_certificate,
        writes=True,
    ),
)
