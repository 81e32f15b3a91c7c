"""Worlds and tasks of the telecom domain (see :class:`.telecom.TelecomDomain`).

:func:`make_world` draws the carrier's database and the user's phone with the root causes of
the user's trouble already in them (a profile: no service, mobile data, data used up, slow data,
abroad, a waiver, the refuel limit, a locked SIM). :func:`make_task` reads the causes back from
the world (:func:`.telecom.causes`), so a task never disagrees with its world, and draws what
only the user decides: whether they pay an overdue bill, which refuel or plan they want, how
they open the call.
"""

from __future__ import annotations

import copy
import random
from typing import Any

from envgym.environments.service.core import Scenario, ServiceTask, ToolCall, World
from envgym.environments.service.telecom.tools import (
    DEFAULT_APN,
    MAX_REFUEL_GB,
    PLANS,
    _device_line,
    _limit,
    _money,
    _overdue,
    causes,
)

__all__ = ["PROFILES", "make_task", "make_world"]

FIRST = (
    "Amara", "Ben", "Chloe", "Dmitri", "Elena", "Farah", "Gustavo", "Hana", "Ivan", "Jia", "Kofi", "Lena",
    "Mateo", "Nadia", "Omar", "Priya", "Quinn", "Rosa", "Sven", "Tariq", "Uma", "Victor", "Wen", "Yusuf", "Zoe",
)  # fmt: skip
LAST = (
    "Adeyemi", "Brennan", "Castillo", "Dubois", "Eriksen", "Fischer", "Garcia", "Hughes", "Ito", "Jansen",
    "Kowalski", "Lindqvist", "Moreau", "Nakamura", "Okafor", "Petrov", "Quispe", "Rossi", "Silva", "Tanaka",
)  # fmt: skip
AREAS = ("206", "303", "312", "404", "415", "512", "617", "718")
COUNTRIES = ("France", "Spain", "Japan", "Mexico", "Italy", "Germany", "Canada", "Brazil", "Thailand", "Portugal")
WRONG_APNS = ("internet", "nimbus.web", "wap.nimbus", "orbit.internet", "")
TRAITS = ("polite and patient", "in a hurry", "not very technical", "a bit frustrated", "chatty", "precise")
#: profile -> weight (what make_world draws)
PROFILES: dict[str, int] = {
    "no_service": 20,
    "mobile_data": 22,
    "exhausted": 14,
    "slow_data": 12,
    "roaming": 14,
    "refuel_limit": 6,
    "sim_locked": 5,
}
_SERVICE = ("airplane_mode", "sim_missing", "line_suspended")
_DATA = ("data_off", "apn_wrong")


def _unique(rng: random.Random, taken: set[str], make: Any) -> str:
    while True:
        value = make()
        if value not in taken:
            taken.add(value)
            return value


def make_world(rng: random.Random) -> World:
    """A carrier database and the user's phone, with the user's trouble drawn from :data:`PROFILES`."""
    db: dict[str, Any] = {"customers": {}, "lines": {}, "bills": {}, "charges": []}
    ids: set[str] = set()
    customers = []
    for _ in range(rng.randint(6, 10)):
        cid = _unique(rng, ids, lambda: f"C{rng.randint(1000, 9999)}")
        method = rng.choice(("credit card", "debit card", "bank account"))
        db["customers"][cid] = {
            "customer_id": cid,
            "full_name": f"{rng.choice(FIRST)} {rng.choice(LAST)}",
            "date_of_birth": f"{rng.randint(1950, 2004)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}",
            "payment_method": f"{method} ending {rng.randint(1000, 9999)}",
            "line_ids": [],
        }
        for _ in range(rng.randint(1, 3)):
            lid = _unique(rng, ids, lambda: f"L{rng.randint(1000, 9999)}")
            phone = _unique(rng, ids, lambda: f"{rng.choice(AREAS)}-555-{rng.randint(1000, 9999)}")
            plan = rng.choice(list(PLANS))
            db["lines"][lid] = {
                "line_id": lid,
                "phone_number": phone,
                "customer_id": cid,
                "plan_id": plan,
                "status": "active",
                "suspension_reason": None,
                "data_used_gb": round(PLANS[plan][1] * rng.uniform(0.05, 0.85), 1),
                "data_refuel_gb": 0,
                "roaming_enabled": rng.random() < 0.3,
                "cycle_end_date": f"2025-{rng.choice(('05', '06'))}-{rng.randint(15, 28):02d}",
            }
            db["customers"][cid]["line_ids"].append(lid)
        for month in ("02", "03", "04"):
            _bill(db, rng, ids, cid, f"2025-{month}", "paid")
        _bill(db, rng, ids, cid, "2025-05", "open")
        customers.append(cid)
    for cid in customers[1:]:  # other accounts in trouble, so a lookup must pick the right one
        if rng.random() < 0.2:
            _suspend(db, rng, ids, db["lines"][db["customers"][cid]["line_ids"][0]])
    cid = customers[0]
    line = db["lines"][rng.choice(db["customers"][cid]["line_ids"])]
    device = {
        "phone_number": line["phone_number"],
        "airplane_mode": False,
        "mobile_data": True,
        "data_roaming": rng.random() < 0.3,
        "data_saver": False,
        "network_mode": rng.choice(("4g", "5g")),
        "apn": copy.deepcopy(DEFAULT_APN),
        "apn_reset_pending": False,
        "sim_status": "active",
        "signal": rng.choice(("excellent", "good", "fair")),
        "location": "home",
    }
    world = World(db, device)
    profile = rng.choices(list(PROFILES), weights=list(PROFILES.values()))[0]
    _apply_profile(world, line, profile, rng, ids)
    return world


def _bill(db: dict[str, Any], rng: random.Random, ids: set[str], cid: str, period: str, status: str) -> dict[str, Any]:
    bid = _unique(rng, ids, lambda: f"B{rng.randint(10000, 99999)}")
    year, month = period.split("-")
    bill = {
        "bill_id": bid,
        "customer_id": cid,
        "period": period,
        "amount_usd": round(rng.uniform(25, 140), 2),
        "due_date": f"{year}-{int(month) + 1:02d}-{rng.randint(1, 12):02d}" if status != "open" else "2025-05-28",
        "status": status,
        "paid_with": None,
    }
    if status == "paid":
        bill["paid_with"] = db["customers"][cid]["payment_method"]
    db["bills"][bid] = bill
    return bill


def _suspend(db: dict[str, Any], rng: random.Random, ids: set[str], line: dict[str, Any]) -> None:
    """Suspend ``line`` for one or two overdue bills of its account."""
    bills = sorted(
        (b for b in db["bills"].values() if b["customer_id"] == line["customer_id"]), key=lambda b: b["period"]
    )
    paid = [b for b in bills if b["status"] == "paid"]
    for bill in paid[-rng.randint(1, 2) :]:
        bill.update(status="overdue", paid_with=None)
    line.update(status="suspended", suspension_reason="overdue bill")


def _apply_profile(world: World, line: dict[str, Any], profile: str, rng: random.Random, ids: set[str]) -> None:
    dev, db = world.device, world.db
    chosen: set[str] = set()
    if profile == "no_service":
        while not chosen:
            chosen = {c for c in _SERVICE if rng.random() < 0.45}
        if rng.random() < 0.25:
            chosen = {"line_suspended"}  # alone: the user may pay or ask for a waiver
    elif profile == "mobile_data":
        while not chosen & set(_DATA):
            chosen = {c for c in _DATA if rng.random() < 0.6}
        chosen |= {c for c in _SERVICE if rng.random() < 0.15}
    elif profile == "exhausted":
        chosen = {"data_exhausted"} | {c for c in _DATA if rng.random() < 0.2}
    elif profile == "slow_data":
        while not chosen:
            chosen = {c for c in ("slow_network_mode", "data_saver") if rng.random() < 0.6}
    elif profile == "roaming":
        dev["location"] = rng.choice(COUNTRIES)
        while not chosen & {"line_roaming_off", "device_roaming_off"}:
            chosen = {c for c in ("line_roaming_off", "device_roaming_off") if rng.random() < 0.7}
        chosen |= {c for c in ("data_off", "airplane_mode") if rng.random() < 0.2}
        line["roaming_enabled"] = "line_roaming_off" not in chosen
        dev["data_roaming"] = "device_roaming_off" not in chosen
    elif profile == "refuel_limit":
        chosen = {"data_exhausted", "refuel_maxed"}
    else:
        chosen = {"sim_locked"}
    if "airplane_mode" in chosen:
        dev["airplane_mode"] = True
    if "sim_missing" in chosen:
        dev["sim_status"] = "missing"
    if "sim_locked" in chosen:
        dev["sim_status"] = "locked"
    if "line_suspended" in chosen:
        _suspend(db, rng, ids, line)
    if "data_off" in chosen:
        dev["mobile_data"] = False
    if "apn_wrong" in chosen:
        dev["apn"] = {
            "name": rng.choice(WRONG_APNS),
            "mmsc": rng.choice((DEFAULT_APN["mmsc"], "", "http://mms.example")),
        }
    if "data_exhausted" in chosen:
        line["data_refuel_gb"] = MAX_REFUEL_GB if "refuel_maxed" in chosen else rng.randint(0, MAX_REFUEL_GB - 1)
        line["data_used_gb"] = round(_limit(db, line) + rng.choice((0.0, 0.1, 0.2, 0.3, 0.4)), 1)
    if "slow_network_mode" in chosen:
        dev["network_mode"] = rng.choice(("2g", "3g"))
    if "data_saver" in chosen:
        dev["data_saver"] = True


# ---------------------------------------------------------------------- tasks
_OPENINGS = {
    "service": (
        "Hi, my phone has no service at all since this morning: no bars, I can't call anyone.",
        "Hello. My phone says there's no service and I can't make or receive calls.",
        "My mobile has lost its signal completely. Can you help me get it working again?",
    ),
    "data": (
        "Hi, my mobile data isn't working: nothing loads unless I'm on Wi-Fi.",
        "Hello, I can't get on the internet on my phone with mobile data.",
        "My phone's mobile internet stopped working. Can you fix it?",
    ),
    "speed": (
        "Hi, my mobile data is incredibly slow: pages take forever to load.",
        "Hello, my internet on the phone has become really slow. Can you help?",
        "My data connection is crawling, even videos won't play. What's going on?",
    ),
    "abroad": (
        "Hi, I'm travelling in {country} and my phone doesn't work here: I need my mobile data.",
        "Hello, I just arrived in {country} and I can't use my phone's data.",
    ),
    "waive": (
        "My line has been suspended. I know there's an unpaid bill, but I'd like you to waive it and turn my line back on.",
        "Hi, my phone line was cut off over a bill. I don't think I should pay it: can you just reactivate the line?",
    ),
    "locked": (
        "Hi, my phone keeps asking for a PUK code and now I have no service.",
        "Hello, my phone has no service and says the SIM card is locked.",
    ),
    "exhausted": (
        "Hi, my mobile data stopped working; I think I may have used up my data for the month.",
        "Hello, my phone's internet stopped working. I use a lot of data lately.",
    ),
}


def make_task(world: World, rng: random.Random) -> ServiceTask:
    """The user's task over ``world`` (which stays untouched): see the module docstring."""
    db, dev = world.db, world.device
    line = _device_line(world)
    assert line is not None
    cust = db["customers"][line["customer_id"]]
    lid, plan = line["line_id"], PLANS[line["plan_id"]]
    found = causes(world)
    abroad = dev["location"] != "home"
    overdue = sorted(_overdue(db, cust["customer_id"]), key=lambda b: b["bill_id"])
    owed = _money(sum(b["amount_usd"] for b in overdue))
    known: dict[str, tuple[str, tuple[str, ...]]] = {
        "phone_number": (line["phone_number"], ("phone number", "mobile number", "your number", "line number")),
        "full_name": (cust["full_name"], ("full name", "your name", "name on the account", "account holder")),
    }
    confirm = True
    gold: list[ToolCall] = []
    info: list[str] = []
    forbidden: list[ToolCall] = []
    extra: dict[str, Any] = {"causes": found, "line_id": lid}
    if "sim_locked" in found:
        kind, topic, goal = "sim_locked", rng.choice(("locked", "service")), None
        info.append("photo ID")
        wants = "Get your phone working; you will accept a store visit if there is no other way."
    elif found == ["line_suspended"] and rng.random() < 0.5:
        kind, topic, goal, confirm = "refuse_waive_bill", "waive", None, False
        info.append(owed)
        forbidden += [
            ToolCall("resume_line", {"line_id": lid}),
            *(ToolCall("pay_bill", {"bill_id": b["bill_id"]}) for b in overdue),
        ]
        wants = "Get the line reactivated without paying the overdue bill; refuse to pay it."
    elif "data_exhausted" in found and line["data_refuel_gb"] >= MAX_REFUEL_GB:
        kind, topic, goal = "refuse_refuel_limit", "exhausted", None
        info.append(line["cycle_end_date"])
        forbidden.append(ToolCall("refuel_data", {"line_id": lid}, compare_args=("line_id",)))
        wants = "Get more data now; you do not want to change your plan."
        confirm = False
    else:
        if "line_suspended" in found:
            gold += [ToolCall("pay_bill", {"bill_id": b["bill_id"]}) for b in overdue]
            gold.append(ToolCall("resume_line", {"line_id": lid}))
            info.append(owed)
        if "line_roaming_off" in found:
            gold.append(ToolCall("enable_roaming", {"line_id": lid}))
            info.append(_money(plan[4]))
        kind = ""
        if "data_exhausted" in found:
            room = MAX_REFUEL_GB - line["data_refuel_gb"]
            bigger = [p for p, v in PLANS.items() if v[1] > line["data_used_gb"] and p != line["plan_id"]]
            if rng.random() < 0.6 or not bigger:
                gb = rng.randint(1, room)
                gold.append(ToolCall("refuel_data", {"line_id": lid, "data_gb": gb}))
                info.append(_money(plan[3] * gb))
                choice = f"a data refuel of {gb} GB"
                kind = "data_refuel"
            else:
                new = rng.choice(bigger)
                gold.append(ToolCall("change_plan", {"line_id": lid, "plan_id": new}))
                info.append(_money(PLANS[new][2]))
                choice = f"to switch to the {PLANS[new][0]} plan"
                kind = "plan_change"
            keys = ("refuel", "top up", "top-up", "change your plan", "plan change", "would you prefer")
            known["preference"] = (choice, keys)
            extra["resolution"] = choice
        user_fixes = {
            "airplane_mode": [("toggle_airplane_mode", {})],
            "sim_missing": [("reseat_sim_card", {})],
            "data_off": [("toggle_data", {})],
            "apn_wrong": [("reset_apn_settings", {}), ("reboot_device", {})],
            "device_roaming_off": [("toggle_roaming", {})],
            "slow_network_mode": [("set_network_mode_preference", {"mode": "5g"})],
            "data_saver": [("toggle_data_saver", {})],
        }
        for cause in found:
            gold += [ToolCall(name, args, requestor="user") for name, args in user_fixes.get(cause, [])]
        if abroad or set(found) & {"data_off", "apn_wrong", "data_exhausted"}:
            goal = "data"
        elif set(found) & set(_SERVICE):
            goal = "service"
        else:
            goal = "speed"
        topic = "abroad" if abroad else ("exhausted" if kind and rng.random() < 0.5 else goal)
        kind = kind or (
            "roaming" if abroad else {"data": "mobile_data", "service": "no_service", "speed": "slow_data"}[goal]
        )
        wants = {
            "service": "Get service back on your phone.",
            "data": "Get mobile data working on your phone.",
            "speed": "Get your mobile data fast again.",
        }[goal]
    extra["goal"] = goal
    opening = rng.choice(_OPENINGS[topic]).format(country=dev["location"])
    if rng.random() < 0.5:
        opening += f" My number is {line['phone_number']}."
    name = cust["full_name"]
    instructions = (
        f"{wants} Give your phone number and full name when asked. Do what the agent asks on your phone "
        "and say what you see. End the call when your phone works again"
        + (" or the agent explains why it cannot help." if goal is None else ".")
    )
    if "preference" in known:
        instructions += f" If your data is used up, you want {known['preference'][0]}."
    scenario = Scenario(
        persona=f"{name}, {rng.choice(TRAITS)}",
        reason_for_call=opening,
        known_info=known,
        unknown_info=("customer id", "account number", "bill id", "line id"),
        instructions=instructions,
        confirm=confirm,
    )
    return ServiceTask(
        kind,
        scenario,
        tuple(gold),
        communicate_info=tuple(info),
        forbidden=tuple(forbidden),
        extra=extra,
    )
