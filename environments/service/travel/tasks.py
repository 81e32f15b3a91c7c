"""Worlds and tasks of the travel domain (:mod:`.travel`), drawn from a seeded ``random.Random``.

:func:`make_world` builds the airline's database; :func:`make_task` lists, for every task kind,
the situations of that world where it applies (a reservation whose facts make a cancellation
allowed, a flight of a complaint that really was delayed, ...), picks a kind uniformly among
those that have one, then a situation, and writes the caller's scenario and the gold calls.
Kinds are defined by the facts the policy looks at, so the gold calls follow from the policy.
"""

from __future__ import annotations

import random
from datetime import date, datetime, timedelta
from typing import Any

from envgym.environments.service.core import Scenario, ServiceTask, ToolCall, World
from envgym.environments.service.travel.tools import (
    BAG_FEE,
    CABINS,
    COMPENSATION,
    NOW,
    TODAY,
    booked_within_24h,
    free_bags,
    is_flown,
)

__all__ = ["AIRPORTS", "KINDS", "make_task", "make_world"]

AIRPORTS: dict[str, str] = {
    "JFK": "New York",
    "LAX": "Los Angeles",
    "ORD": "Chicago",
    "SFO": "San Francisco",
    "SEA": "Seattle",
    "BOS": "Boston",
    "ATL": "Atlanta",
    "DEN": "Denver",
    "MIA": "Miami",
    "DFW": "Dallas",
    "PHX": "Phoenix",
    "LAS": "Las Vegas",
    "IAH": "Houston",
    "MSP": "Minneapolis",
    "DTW": "Detroit",
    "PHL": "Philadelphia",
}
FIRST = (
    "Emma",
    "Liam",
    "Olivia",
    "Noah",
    "Ava",
    "Ethan",
    "Sophia",
    "Mason",
    "Mia",
    "Lucas",
    "Amelia",
    "Aarav",
    "Yusuf",
    "Chen",
    "Fatima",
    "Mateo",
    "Isabella",
    "Omar",
    "Priya",
    "Raj",
    "Sofia",
    "Daniel",
    "Harper",
    "Lei",
    "Juan",
    "Anya",
    "Kofi",
    "Ingrid",
    "Hiro",
    "Nadia",
    "Tomas",
    "Grace",
    "Ivan",
    "Zara",
    "Mohamed",
)
LAST = (
    "Kim",
    "Smith",
    "Garcia",
    "Nguyen",
    "Patel",
    "Johnson",
    "Brown",
    "Lopez",
    "Muller",
    "Rossi",
    "Sanchez",
    "Ahmed",
    "Wang",
    "Silva",
    "Kowalski",
    "Tanaka",
    "Okafor",
    "Ivanova",
    "Cohen",
    "Haddad",
    "Larsen",
    "Moreau",
    "Gupta",
    "Davis",
    "Martin",
    "Santos",
    "Novak",
    "Ali",
    "Schmidt",
    "Rivera",
)
BRANDS = ("visa", "mastercard", "amex")
COVERED_REASONS = (
    "I have a medical emergency in the family",
    "I got sick and my doctor told me not to fly",
    "I injured my leg and can't travel",
    "a big storm is forecast at my destination",
    "a hurricane warning was issued where I'm going",
)
UNCOVERED_REASONS = (
    "my plans changed",
    "I found a cheaper flight elsewhere",
    "my business meeting was moved",
    "I just don't want to go anymore",
    "my friend can't come with me",
)
STYLES = ("polite and brief", "in a hurry", "chatty and friendly", "a bit frustrated", "calm and precise")
KINDS: tuple[str, ...] = (
    "cancel_within_24h",
    "cancel_airline_cancelled",
    "cancel_business",
    "cancel_insured_covered",
    "refuse_cancel",
    "refuse_cancel_not_covered",
    "change_flight",
    "refuse_change_basic_economy",
    "change_cabin",
    "add_bags",
    "update_passenger",
    "compensation_cancelled",
    "compensation_delayed",
    "refuse_compensation",
    "user_declines",
)
#: Requests a user may take back at the confirmation (``user_declines``).
DECLINABLE = ("cancel_within_24h", "cancel_business", "change_flight", "change_cabin", "add_bags", "update_passenger")
#: Dates with a schedule: from FIRST_DAY to LAST_DAY days after today.
FIRST_DAY, LAST_DAY = -3, 12
OFFSETS = tuple(range(FIRST_DAY, LAST_DAY + 1))
DAYS = tuple((date.fromisoformat(TODAY) + timedelta(days=o)).isoformat() for o in OFFSETS)
SEATS = (0, 2, 4, 6, 9, 12, 15, 20)
INSURANCE_PRICE = 30
NOW_DT = datetime.fromisoformat(NOW)
TODAY_D = date.fromisoformat(TODAY)


def _day(offset: int) -> str:
    return (TODAY_D + timedelta(days=offset)).isoformat()


def _offset(day: str) -> int:
    return (date.fromisoformat(day) - TODAY_D).days


# ----------------------------------------------------------------------------- world
def _flights(rng: random.Random, airports: list[str]) -> dict[str, Any]:
    pairs = [(a, b) for i, a in enumerate(airports) for b in airports[i + 1 :]]
    routes = rng.sample(pairs, 4)
    numbers = iter(rng.sample(range(100, 1000), 40))
    flights: dict[str, Any] = {}
    for a, b in routes:
        for origin, destination in ((a, b), (b, a)):
            base = {
                "basic_economy": rng.randint(50, 110),
                "economy": rng.randint(160, 260),
                "business": rng.randint(400, 700),
            }
            duration = rng.randint(2, 6)
            for hour in sorted(rng.sample(range(6, 22), 3)):
                number = f"HAT{next(numbers)}"
                minute = rng.choice((0, 15, 30, 45))
                dates = {}
                for offset, day in zip(OFFSETS, DAYS, strict=True):
                    # rng.random() rather than randint/choice: the schedule is most of a world's draws
                    roll = rng.random()
                    if offset < 0:
                        status = "landed"
                    elif offset == 0:
                        status = (
                            "delayed"
                            if roll < 0.3
                            else "cancelled"
                            if roll < 0.4
                            else "landed"
                            if hour < 15
                            else "available"
                        )
                    elif offset == 1:
                        status = "delayed" if roll < 0.15 else "cancelled" if roll < 0.2 else "available"
                    else:
                        status = "cancelled" if roll < 0.05 else "available"
                    r = rng.random
                    dates[day] = {
                        "status": status,
                        "prices": {
                            "basic_economy": base["basic_economy"] + int(r() * 41) - 20,
                            "economy": base["economy"] + int(r() * 41) - 20,
                            "business": base["business"] + int(r() * 81) - 40,
                        },
                        "available_seats": {c: SEATS[int(r() * len(SEATS))] for c in CABINS},
                    }
                flights[number] = {
                    "flight_number": number,
                    "origin": origin,
                    "destination": destination,
                    "departure_time": f"{hour:02d}:{minute:02d}:00",
                    "arrival_time": f"{(hour + duration) % 24:02d}:{minute:02d}:00",
                    "dates": dates,
                }
    return flights


def _person(rng: random.Random, last: str | None = None) -> dict[str, str]:
    born = date(rng.randint(1950, 2012), rng.randint(1, 12), rng.randint(1, 28))
    return {"first_name": rng.choice(FIRST), "last_name": last or rng.choice(LAST), "dob": born.isoformat()}


def _user(rng: random.Random, taken: set[str]) -> dict[str, Any]:
    while True:
        first, last = rng.choice(FIRST), rng.choice(LAST)
        user_id = f"{first.lower()}_{last.lower()}_{rng.randint(1000, 9999)}"
        if user_id not in taken:
            break
    methods: dict[str, Any] = {}
    fours = rng.sample(range(1000, 10000), 2)
    for four in fours[: rng.choice((1, 1, 2))]:
        pid = f"credit_card_{rng.randint(1000000, 9999999)}"
        methods[pid] = {"id": pid, "source": "credit_card", "brand": rng.choice(BRANDS), "last_four": str(four)}
    if rng.random() < 0.6:
        pid = f"gift_card_{rng.randint(1000000, 9999999)}"
        methods[pid] = {"id": pid, "source": "gift_card", "amount": rng.randint(0, 60) * 10}
    for _ in range(rng.choice((0, 0, 1, 2))):
        pid = f"certificate_{rng.randint(1000000, 9999999)}"
        methods[pid] = {"id": pid, "source": "certificate", "amount": rng.choice((50, 100, 150, 250, 500))}
    born = date(rng.randint(1950, 2004), rng.randint(1, 12), rng.randint(1, 28))
    return {
        "user_id": user_id,
        "name": {"first_name": first, "last_name": last},
        "dob": born.isoformat(),
        "email": f"{first.lower()}.{last.lower()}@example.com",
        "membership": rng.choices(("regular", "silver", "gold"), weights=(5, 3, 2))[0],
        "payment_methods": methods,
        "reservations": [],
    }


def _reservation(
    rng: random.Random,
    user: dict[str, Any],
    flights: dict[str, Any],
    by_route: dict[tuple[str, str], list[str]],
    taken: set[str],
) -> dict[str, Any]:
    origin, destination = rng.choice(sorted(by_route))
    start = rng.choices(range(-2, 11), weights=[1, 1, 4, 3] + [3] * 9)[0]
    round_trip = rng.random() < 0.5 and start + 1 <= LAST_DAY - 1
    legs = [(origin, destination, start)]
    if round_trip:
        legs.append((destination, origin, rng.randint(start + 1, min(start + 6, LAST_DAY))))
    cabin = rng.choices(CABINS, weights=(3, 4, 3))[0]
    pax = rng.choices((1, 2, 3), weights=(5, 3, 2))[0]
    passengers = [
        {"first_name": user["name"]["first_name"], "last_name": user["name"]["last_name"], "dob": user["dob"]}
    ]
    while len(passengers) < pax:
        p = _person(rng, user["name"]["last_name"] if rng.random() < 0.5 else None)
        if all((p["first_name"], p["last_name"]) != (q["first_name"], q["last_name"]) for q in passengers):
            passengers.append(p)
    segments = []
    for o, d, offset in legs:
        number = rng.choice(by_route[(o, d)])
        day = _day(offset)
        segments.append(
            {
                "flight_number": number,
                "origin": o,
                "destination": d,
                "date": day,
                "price": flights[number]["dates"][day]["prices"][cabin],
            }
        )
    if rng.random() < 0.3 and start >= 1:
        created = NOW_DT - timedelta(hours=rng.randint(1, 22), minutes=rng.randint(0, 59))
    else:
        created = NOW_DT - timedelta(days=rng.randint(max(2, 1 - start), 40), hours=rng.randint(0, 23))
    insurance = "yes" if rng.random() < 0.35 else "no"
    free = free_bags(user["membership"], cabin, pax)
    total = rng.randint(0, free + 1)
    nonfree = max(0, total - free)
    amount = (
        sum(s["price"] for s in segments) * pax
        + (INSURANCE_PRICE * pax if insurance == "yes" else 0)
        + BAG_FEE * nonfree
    )
    payers = sorted(p for p, m in user["payment_methods"].items() if m["source"] != "certificate")
    while True:
        rid = "".join(rng.choice("ABCDEFGHJKLMNPQRSTUVWXYZ0123456789") for _ in range(6))
        if rid not in taken:
            break
    return {
        "reservation_id": rid,
        "user_id": user["user_id"],
        "origin": origin,
        "destination": destination,
        "flight_type": "round_trip" if round_trip else "one_way",
        "cabin": cabin,
        "flights": segments,
        "passengers": passengers,
        "payment_history": [{"payment_id": rng.choice(payers), "amount": amount}],
        "created_at": created.strftime("%Y-%m-%d %H:%M:%S"),
        "total_baggages": total,
        "nonfree_baggages": nonfree,
        "insurance": insurance,
        "status": "cancelled" if rng.random() < 0.06 else "active",
    }


def make_world(rng: random.Random) -> World:
    """A fresh airline: airports, flights over the schedule window, four users and their reservations."""
    airports = sorted(rng.sample(sorted(AIRPORTS), 7))
    flights = _flights(rng, airports)
    by_route: dict[tuple[str, str], list[str]] = {}
    for number, f in sorted(flights.items()):
        by_route.setdefault((f["origin"], f["destination"]), []).append(number)
    users: dict[str, Any] = {}
    reservations: dict[str, Any] = {}
    for _ in range(4):
        user = _user(rng, set(users))
        users[user["user_id"]] = user
        for _ in range(rng.randint(3, 5)):
            res = _reservation(rng, user, flights, by_route, set(reservations))
            reservations[res["reservation_id"]] = res
            user["reservations"].append(res["reservation_id"])
    return World(
        {
            "airports": {a: AIRPORTS[a] for a in airports},
            "flights": flights,
            "users": users,
            "reservations": reservations,
        }
    )


# ----------------------------------------------------------------------------- tasks
def _status(db: dict[str, Any], seg: dict[str, Any]) -> str:
    return db["flights"][seg["flight_number"]]["dates"][seg["date"]]["status"]


def _trip(seg: dict[str, Any]) -> str:
    return (
        f"{AIRPORTS[seg['origin']]} ({seg['origin']}) to {AIRPORTS[seg['destination']]} ({seg['destination']}) "
        f"on {seg['date']}"
    )


def _unique_segments(db: dict[str, Any], user: dict[str, Any]) -> dict[tuple[str, str, str], tuple[dict, dict]]:
    """The user's active flights that the route and date alone identify: key -> (reservation, segment)."""
    seen: dict[tuple[str, str, str], list[tuple[dict, dict]]] = {}
    for rid in user["reservations"]:
        res = db["reservations"][rid]
        if res["status"] != "active":
            continue
        for seg in res["flights"]:
            seen.setdefault((seg["origin"], seg["destination"], seg["date"]), []).append((res, seg))
    return {k: v[0] for k, v in seen.items() if len(v) == 1}


def _payment(rng: random.Random, user: dict[str, Any], amount: int) -> tuple[str, str]:
    """A payment method the user picks for ``amount``: (id, how they describe it)."""
    options = []
    for pid, m in sorted(user["payment_methods"].items()):
        if m["source"] == "credit_card":
            options.append((pid, f"my {m['brand']} credit card ending in {m['last_four']}"))
        elif m["source"] == "gift_card" and m["amount"] >= amount:
            options.append((pid, "my gift card"))
    return rng.choice(options)


def _refund(res: dict[str, Any]) -> int:
    paid: dict[str, int] = {}
    for p in res["payment_history"]:
        paid[p["payment_id"]] = paid.get(p["payment_id"], 0) + p["amount"]
    return sum(a for a in paid.values() if a > 0)


class _Draft:
    """What a kind's builder fills in: the pieces of the task besides the user and persona."""

    def __init__(self, opening: str, instructions: str, res: dict[str, Any] | None) -> None:
        self.opening = opening
        self.instructions = instructions
        self.res = res
        self.gold: list[ToolCall] = []
        self.communicate: list[str] = []
        self.facts: dict[str, tuple[str, tuple[str, ...]]] = {}
        self.forbidden: list[ToolCall] = []


KEYS_PAYMENT = ("payment", "pay with", "pay for", "card", "charge", "which method")
KEYS_REASON = ("reason", "why")


def _candidates(db: dict[str, Any]) -> dict[str, list[tuple[Any, ...]]]:
    """Every situation of the world per kind: (kind -> [(user, reservation, segment), ...])."""
    out: dict[str, list[tuple[Any, ...]]] = {k: [] for k in KINDS}
    for uid in sorted(db["users"]):
        user = db["users"][uid]
        unique = _unique_segments(db, user)
        for res, seg in unique.values():
            flown = any(is_flown(db, s) for s in res["flights"])
            statuses = [_status(db, s) for s in res["flights"]]
            first = seg is res["flights"][0]
            item = (user, res, seg)
            # complaints: about this very flight
            status = _status(db, seg)
            eligible = user["membership"] != "regular" or res["insurance"] == "yes" or res["cabin"] == "business"
            if status in COMPENSATION:
                out[f"compensation_{status}" if eligible else "refuse_compensation"].append(item)
            elif status == "landed" and eligible:
                out["refuse_compensation"].append(item)
            if not first or flown:
                continue
            # reservation-level kinds (described by their first flight)
            within = booked_within_24h(res)
            airline = "cancelled" in statuses
            business = res["cabin"] == "business"
            if within:
                out["cancel_within_24h"].append(item)
            elif airline:
                out["cancel_airline_cancelled"].append(item)
            elif business:
                out["cancel_business"].append(item)
            elif res["insurance"] == "yes":
                out["cancel_insured_covered"].append(item)
                out["refuse_cancel_not_covered"].append(item)
            else:
                out["refuse_cancel"].append(item)
            out["add_bags"].append(item)
            out["update_passenger"].append(item)
            if res["cabin"] != "business" and all(s == "available" for s in statuses):
                out["change_cabin"].append(item)
        for res, seg in unique.values():
            if any(is_flown(db, s) for s in res["flights"]) or _status(db, seg) != "available":
                continue
            out["refuse_change_basic_economy" if res["cabin"] == "basic_economy" else "change_flight"].append(
                (user, res, seg)
            )
    return out


def _change_options(db: dict[str, Any], res: dict[str, Any], seg: dict[str, Any]) -> list[tuple[str, str, dict]]:
    """(new date, preference, chosen flight view) for moving ``seg`` to another date."""
    index = res["flights"].index(seg)
    low, high = 1, LAST_DAY
    if index == 1:
        low = max(low, _offset(res["flights"][0]["date"]) + 1)
    if index == 0 and len(res["flights"]) == 2:
        high = min(high, _offset(res["flights"][1]["date"]) - 1)
    pax, cabin = len(res["passengers"]), res["cabin"]
    options = []
    for offset in range(low, high + 1):
        day = _day(offset)
        if day == seg["date"]:
            continue
        found = []
        for number, f in sorted(db["flights"].items()):
            d = f["dates"][day]
            route = (f["origin"], f["destination"]) == (seg["origin"], seg["destination"])
            if route and d["status"] == "available" and d["available_seats"][cabin] >= pax:
                found.append((f["departure_time"], d["prices"][cabin], number))
        if not found:
            continue
        options.append((day, "earliest", min(found)[2]))
        prices = sorted(p for _, p, _ in found)
        if len(prices) == 1 or prices[0] < prices[1]:
            options.append((day, "cheapest", min(found, key=lambda t: t[1])[2]))
    return options


def make_task(world: World, rng: random.Random) -> ServiceTask:
    """A task over ``world`` (left unchanged): a kind uniformly among those the world allows."""
    db = world.db
    cands = _candidates(db)
    while True:
        kinds = [k for k in KINDS if cands[k] or (k == "user_declines" and any(cands[b] for b in DECLINABLE))]
        if not kinds:  # pragma: no cover - every world has reservations to add bags to
            raise RuntimeError("this world allows no travel task")
        kind = rng.choice(kinds)
        base = kind
        if kind == "user_declines":
            base = rng.choice([b for b in DECLINABLE if cands[b]])
        item = rng.choice(cands[base])
        user, res, seg = item
        draft = _build(base, db, user, res, seg, rng)
        if draft is not None:
            break
        cands[base] = [c for c in cands[base] if c is not item]
    if kind == "user_declines":  # the same request, but the user says no when asked to confirm
        draft.gold, draft.communicate, draft.forbidden = [], [], []
    uid = user["user_id"]
    facts: dict[str, tuple[str, tuple[str, ...]]] = {
        "user_id": (uid, ("user id", "user-id", "userid", "account id", "customer id", "member id", "your id")),
        "name": (f"{user['name']['first_name']} {user['name']['last_name']}", ("your name", "full name")),
    }
    unknown: tuple[str, ...] = ()
    if draft.res is not None:
        if rng.random() < 0.5:
            facts["reservation_id"] = (
                draft.res["reservation_id"],
                ("reservation id", "reservation number", "reservation code", "booking reference", "booking number"),
            )
        else:
            unknown = ("reservation id", "reservation number")
    facts.update(draft.facts)
    confirm = True
    if kind == "user_declines":
        confirm = False
    scenario = Scenario(
        persona=f"{facts['name'][0]}, a {user['membership']} member of the airline, {rng.choice(STYLES)}.",
        reason_for_call=draft.opening,
        known_info=facts,
        unknown_info=unknown,
        instructions=draft.instructions
        + (" When the agent asks you to confirm, say no: you changed your mind." if not confirm else ""),
        confirm=confirm,
    )
    return ServiceTask(
        kind=kind,
        scenario=scenario,
        gold_actions=(ToolCall("get_user_details", {"user_id": uid}), *draft.gold),
        communicate_info=tuple(draft.communicate),
        required_actions=(ToolCall("get_user_details", {"user_id": uid}),),
        forbidden=tuple(draft.forbidden),
        reward_basis=("DB", "COMMUNICATE", "ACTION", "POLICY"),
        extra={"reservation_id": draft.res["reservation_id"] if draft.res else None},
    )


def _build(kind: str, db: dict, user: dict, res: dict, seg: dict, rng: random.Random) -> _Draft | None:
    rid = res["reservation_id"]
    if kind.startswith(("cancel_", "refuse_cancel")):
        if kind == "cancel_insured_covered":
            reason = rng.choice(COVERED_REASONS)
        elif kind == "refuse_cancel_not_covered":
            reason = rng.choice(UNCOVERED_REASONS)
        else:
            reason = rng.choice(UNCOVERED_REASONS + COVERED_REASONS)
        draft = _Draft(
            f"Hi, I need to cancel my reservation for the flight from {_trip(seg)}.",
            f"You want to cancel your reservation for the flight from {_trip(seg)} and get a refund. "
            f"If asked why: {reason}. If the agent says it cannot be cancelled, accept it.",
            res,
        )
        draft.facts["cancellation_reason"] = (reason, KEYS_REASON)
        if kind.startswith("refuse"):
            draft.communicate = ["not covered"] if kind == "refuse_cancel_not_covered" else ["24 hours"]
            draft.forbidden = [ToolCall("cancel_reservation", {"reservation_id": rid})]
        else:
            draft.gold = [ToolCall("cancel_reservation", {"reservation_id": rid})]
            draft.communicate = [f"${_refund(res)}"]
        return draft
    if kind in ("change_flight", "refuse_change_basic_economy"):
        if kind == "refuse_change_basic_economy":
            new_day = _day(rng.choice([o for o in range(1, LAST_DAY + 1) if _day(o) != seg["date"]]))
            pref = rng.choice(("earliest", "cheapest"))
        else:
            options = _change_options(db, res, seg)
            if not options:
                return None
            new_day, pref, number = rng.choice(options)
        draft = _Draft(
            f"Hi, I'd like to move my flight from {_trip(seg)} to {new_day}, on the {pref} flight that day.",
            f"You want to change your flight from {_trip(seg)} to {new_day}, taking the {pref} flight that day, "
            "in the same cabin. If the agent says it cannot be changed, accept it.",
            res,
        )
        if kind == "refuse_change_basic_economy":
            draft.communicate = ["basic economy"]
            draft.forbidden = [
                ToolCall("update_reservation_flights", {"reservation_id": rid}, compare_args=("reservation_id",))
            ]
            return draft
        pax, cabin = len(res["passengers"]), res["cabin"]
        diff = (db["flights"][number]["dates"][new_day]["prices"][cabin] - seg["price"]) * pax
        pid, said = _payment(rng, user, diff)
        flights = [{"flight_number": s["flight_number"], "date": s["date"]} for s in res["flights"]]
        flights[res["flights"].index(seg)] = {"flight_number": number, "date": new_day}
        draft.gold = [
            ToolCall("update_reservation_flights", {"reservation_id": rid, "flights": flights, "payment_id": pid})
        ]
        draft.facts["payment_method"] = (said, KEYS_PAYMENT)
        draft.communicate = [number] + ([f"${abs(diff)}"] if diff else [])
        return draft
    if kind == "change_cabin":
        higher = [c for c in CABINS if CABINS.index(c) > CABINS.index(res["cabin"])]
        pax = len(res["passengers"])
        higher = [
            c
            for c in higher
            if all(
                db["flights"][s["flight_number"]]["dates"][s["date"]]["available_seats"][c] >= pax
                for s in res["flights"]
            )
        ]
        if not higher:
            return None
        cabin = rng.choice(higher)
        diff = sum(
            db["flights"][s["flight_number"]]["dates"][s["date"]]["prices"][cabin] - s["price"] for s in res["flights"]
        )
        diff *= pax
        pid, said = _payment(rng, user, diff)
        words = cabin.replace("_", " ")
        draft = _Draft(
            f"Hello, I'd like to upgrade my reservation with the flight from {_trip(seg)} to {words}.",
            f"You want to upgrade the whole reservation with the flight from {_trip(seg)} to {words}.",
            res,
        )
        draft.gold = [ToolCall("update_reservation_cabin", {"reservation_id": rid, "cabin": cabin, "payment_id": pid})]
        draft.facts["payment_method"] = (said, KEYS_PAYMENT)
        draft.communicate = [f"${diff}"]
        return draft
    if kind == "add_bags":
        n = rng.randint(1, 3)
        membership = user["membership"]
        free = free_bags(membership, res["cabin"], len(res["passengers"]))
        total = res["total_baggages"] + n
        nonfree = max(0, total - free)
        fee = BAG_FEE * (nonfree - res["nonfree_baggages"])
        if fee:
            pid, said = _payment(rng, user, fee)
        else:
            pid, said = _payment(random.Random(rid), user, 0)
        bags = "one more checked bag" if n == 1 else f"{n} more checked bags"
        draft = _Draft(
            f"Hi, I'd like to add {bags} to my reservation with the flight from {_trip(seg)}.",
            f"You want to add {bags} to your reservation with the flight from {_trip(seg)}.",
            res,
        )
        draft.gold = [
            ToolCall(
                "update_reservation_baggages",
                {"reservation_id": rid, "total_baggages": total, "nonfree_baggages": nonfree, "payment_id": pid},
            )
        ]
        draft.facts["payment_method"] = (said, KEYS_PAYMENT)
        draft.communicate = [f"${fee}"] if fee else ["free"]
        return draft
    if kind == "update_passenger":
        index = rng.randrange(len(res["passengers"]))
        old = res["passengers"][index]
        new = dict(old)
        if rng.random() < 0.5:
            new["first_name"] = rng.choice([f for f in FIRST if f != old["first_name"]])
        else:
            new["last_name"] = rng.choice([n for n in LAST if n != old["last_name"]])
        names = [(p["first_name"], p["last_name"]) for p in res["passengers"]]
        if (new["first_name"], new["last_name"]) in names:
            return None
        old_name, new_name = f"{old['first_name']} {old['last_name']}", f"{new['first_name']} {new['last_name']}"
        draft = _Draft(
            f"Hi, I need to correct a passenger name on my reservation with the flight from {_trip(seg)}: "
            f"{old_name} should be {new_name}.",
            f"On your reservation with the flight from {_trip(seg)}, the passenger {old_name} must be renamed "
            f"{new_name} (same date of birth).",
            res,
        )
        passengers = [dict(p) for p in res["passengers"]]
        passengers[index] = new
        draft.gold = [ToolCall("update_reservation_passengers", {"reservation_id": rid, "passengers": passengers})]
        return draft
    # complaints
    status = _status(db, seg)
    claimed = status if status in COMPENSATION else rng.choice(tuple(COMPENSATION))
    draft = _Draft(
        f"My flight {seg['flight_number']} from {_trip(seg)} was {claimed}, and I'm really unhappy about it. "
        "I'd like some compensation.",
        f"Your flight {seg['flight_number']} from {_trip(seg)} was {claimed} (so you say). Complain and ask for "
        "compensation; accept whatever the agent can offer, or a refusal.",
        res,
    )
    if kind == "refuse_compensation":
        draft.communicate = ["not eligible"]
        draft.forbidden = [ToolCall("send_certificate", {"user_id": user["user_id"]}, compare_args=("user_id",))]
        return draft
    amount = COMPENSATION[status] * len(res["passengers"])
    draft.gold = [ToolCall("send_certificate", {"user_id": user["user_id"], "amount": amount})]
    draft.communicate = [f"${amount}"]
    return draft
