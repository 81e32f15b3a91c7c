"""The telecom domain: a mobile carrier's support desk with the customer's own phone (dual control).

The agent works on the carrier's database (customers, lines, plans, bills); the user has their
phone (``world.device``) and acts on it when the agent asks. Both are graded (the world's hash
covers the database and the device). See :class:`.domain.TelecomDomain` for the card; the scripted user is
in :mod:`.user`.
"""

from __future__ import annotations

import copy
import re
from typing import Any

from envgym.environments.service.core import Tool, ToolError, World

__all__ = [
    "CARRIER",
    "DEFAULT_APN",
    "GOOD_SPEED_MBPS",
    "MAX_REFUEL_GB",
    "PLANS",
    "POLICY",
    "causes",
    "data_works",
    "has_service",
    "problem_fixed",
    "speed_mbps",
]

CARRIER = "Nimbus Mobile"
TODAY = "2025-05-14"
#: The carrier's APN: data needs this name on the phone.
DEFAULT_APN = {"name": "nimbus.internet", "mmsc": "http://mms.nimbus.example"}
#: Most gigabytes of refuel a line may get in one billing cycle.
MAX_REFUEL_GB = 2
#: A speed test at or above this is good.
GOOD_SPEED_MBPS = 10.0
#: plan id -> (name, data GB, monthly price, refuel price per GB, roaming price per day)
PLANS: dict[str, tuple[str, int, float, float, float]] = {
    "basic_5": ("Basic 5", 5, 25.0, 5.0, 12.0),
    "standard_15": ("Standard 15", 15, 40.0, 4.0, 10.0),
    "plus_30": ("Plus 30", 30, 55.0, 3.0, 8.0),
    "max_60": ("Max 60", 60, 70.0, 2.0, 6.0),
}
_MODES = ("2g", "3g", "4g", "5g")
_BASE_SPEED = {"2g": 0.1, "3g": 2.0, "4g": 45.0, "5g": 180.0}
_SIGNAL_FACTOR = {"excellent": 1.0, "good": 0.6, "fair": 0.4}
_SAVER_CAP = 1.5

POLICY = f"""
# {CARRIER} technical support policy

You help customers of {CARRIER}, a mobile phone carrier, with problems on their line: no service,
mobile data not working, slow data, and using the phone abroad. Today is {TODAY}.

## Identity
- Before looking anything up, ask the customer for the phone number of the affected line and
  their full name. Find the account with `get_customer_by_phone` and check that the name matches
  the account holder; if it does not, do not discuss or change the account.
- Act only on the line whose number the customer gave.

## Changes on the account
- Before any change (paying a bill, resuming a line, a data refuel, a plan change, enabling
  roaming), tell the customer what you will do and what it costs, and get an explicit yes.
- A line suspended for an overdue bill may be resumed only after every overdue bill of the
  account is paid. Pay with `pay_bill` (the payment method on file) only when the customer agrees.
  Bills are never waived, reduced or postponed: if the customer will not pay, tell them the
  overdue amount (in dollars) and that the line stays suspended until it is paid.
- Only overdue bills are paid over the phone; open bills are paid by the customer when due.
- When the line's data allowance for the cycle is used up, offer a data refuel or a plan change
  and do what the customer prefers. A refuel adds whole gigabytes at the plan's refuel price per
  GB (tell them the total price); a line may get at most {MAX_REFUEL_GB} GB of refuel per billing
  cycle in total. If it already had {MAX_REFUEL_GB} GB, refuse and tell the customer the date the
  cycle ends (`cycle_end_date`, as written there), when the allowance resets.
- A plan change takes effect at once and its allowance applies to the current cycle; tell the
  customer the new monthly price first.
- A line works abroad only when roaming is enabled on it. When a customer abroad needs service,
  enable it after telling them the plan's roaming price per day.
- Refuels, plan changes and roaming need an active line and an account with no overdue bill.
- A SIM card that is PIN/PUK-locked cannot be unlocked over the phone: tell the customer to bring
  a photo ID to a {CARRIER} store for a replacement SIM, and change nothing.

## Troubleshooting the phone
The phone belongs to the customer: you cannot change it, only ask them to do things on it and
listen to what they report. They can check the status bar; check their network status (airplane
mode, SIM, service, signal, network mode, mobile data, data roaming, data saver, whether they are
abroad); check the SIM status; check and reset the APN settings; toggle airplane mode, mobile
data, data roaming and data saver; set the network mode preference (2G, 3G, 4G or 5G); reseat the
SIM card; restart the phone; run a speed test.

Find and fix the root causes one at a time:
- Service needs: airplane mode off; an active SIM card (a SIM that is not detected must be
  reseated); an active line; abroad, roaming enabled on the line.
- Mobile data needs service and: mobile data on; the APN name `{DEFAULT_APN["name"]}` (otherwise
  the customer resets the APN settings and then restarts the phone: a reset takes effect after a
  restart); data allowance left; abroad, data roaming on in the phone.
- Good speed needs the network mode preference at 5G (when it is 2G or 3G, ask the customer to
  set it to 5G) and data saver off. A speed test of {GOOD_SPEED_MBPS:g} Mbps or more is good.
- Change only what causes the problem: do not have the customer change settings that are right.
- The problem is solved when the customer sees it solved (service in the status bar, a speed test
  that works). Then end the conversation.
"""


# ---------------------------------------------------------------------- world helpers
def _digits(phone: str) -> str:
    return re.sub(r"\D", "", phone)


def _line_by_phone(db: dict[str, Any], phone: str) -> dict[str, Any] | None:
    want = _digits(phone)
    return next((ln for ln in db["lines"].values() if want and _digits(ln["phone_number"]) == want), None)


def _line(world: World, line_id: str) -> dict[str, Any]:
    line = world.db["lines"].get(line_id)
    if line is None:
        raise ToolError(f"no line {line_id!r}; line ids look like 'L1234' (see get_customer_by_phone).")
    return line


def _overdue(db: dict[str, Any], customer_id: str) -> list[dict[str, Any]]:
    return [b for b in db["bills"].values() if b["customer_id"] == customer_id and b["status"] == "overdue"]


def _limit(db: dict[str, Any], line: dict[str, Any]) -> float:
    return PLANS[line["plan_id"]][1] + line["data_refuel_gb"]


def _device_line(world: World) -> dict[str, Any] | None:
    return _line_by_phone(world.db, world.device.get("phone_number", ""))


def has_service(world: World) -> bool:
    """The phone is registered on a network (bars in the status bar)."""
    dev, line = world.device, _device_line(world)
    if dev["airplane_mode"] or dev["sim_status"] != "active" or line is None or line["status"] != "active":
        return False
    return dev["location"] == "home" or line["roaming_enabled"]


def data_works(world: World) -> bool:
    """Mobile data connects."""
    dev, line = world.device, _device_line(world)
    if not has_service(world) or line is None or not dev["mobile_data"]:
        return False
    if dev["apn"]["name"] != DEFAULT_APN["name"]:
        return False
    if dev["location"] != "home" and not dev["data_roaming"]:
        return False
    return line["data_used_gb"] < _limit(world.db, line)


def speed_mbps(world: World) -> float | None:
    """What a speed test measures (None: no data connection)."""
    if not data_works(world):
        return None
    dev = world.device
    speed = _BASE_SPEED[dev["network_mode"]] * _SIGNAL_FACTOR[dev["signal"]]
    if dev["data_saver"]:
        speed = min(speed, _SAVER_CAP)
    return round(speed, 1)


def problem_fixed(world: World, goal: str) -> bool:
    """The user's goal holds: ``service``, ``data`` (a working connection) or ``speed`` (a good one)."""
    if goal == "service":
        return has_service(world)
    if goal == "data":
        return data_works(world)
    speed = speed_mbps(world)
    return speed is not None and speed >= GOOD_SPEED_MBPS


def causes(world: World) -> list[str]:
    """The root causes of the user's trouble in ``world`` (read from the device and their line)."""
    dev, line = world.device, _device_line(world)
    assert line is not None
    abroad = dev["location"] != "home"
    found = {
        "airplane_mode": dev["airplane_mode"],
        "sim_missing": dev["sim_status"] == "missing",
        "sim_locked": dev["sim_status"] == "locked",
        "line_suspended": line["status"] == "suspended",
        "line_roaming_off": abroad and not line["roaming_enabled"],
        "data_off": not dev["mobile_data"],
        "apn_wrong": dev["apn"]["name"] != DEFAULT_APN["name"],
        "data_exhausted": line["data_used_gb"] >= _limit(world.db, line),
        "device_roaming_off": abroad and not dev["data_roaming"],
        "slow_network_mode": dev["network_mode"] in ("2g", "3g"),
        "data_saver": dev["data_saver"],
    }
    return [name for name, on in found.items() if on]


def _money(x: float) -> str:
    return f"${x:.2f}"


# ---------------------------------------------------------------------- agent tools
def get_customer_by_phone(world: World, phone_number: str) -> Any:
    line = _line_by_phone(world.db, phone_number)
    if line is None:
        raise ToolError(f"no line with the phone number {phone_number!r}; check the number with the customer.")
    return get_customer_details(world, line["customer_id"])


def get_customer_details(world: World, customer_id: str) -> Any:
    cust = world.db["customers"].get(customer_id)
    if cust is None:
        raise ToolError(f"no customer {customer_id!r}; customer ids look like 'C1234'.")
    out = copy.deepcopy(cust)
    out["lines"] = [{"line_id": i, "phone_number": world.db["lines"][i]["phone_number"]} for i in cust["line_ids"]]
    return out


def get_line_details(world: World, line_id: str) -> Any:
    line = _line(world, line_id)
    out = copy.deepcopy(line)
    out["data_limit_gb"] = _limit(world.db, line)
    out["data_remaining_gb"] = round(max(0.0, _limit(world.db, line) - line["data_used_gb"]), 2)
    return out


def _plan_dict(plan_id: str) -> dict[str, Any]:
    name, gb, price, refuel, roaming = PLANS[plan_id]
    return {
        "plan_id": plan_id,
        "name": name,
        "data_gb": gb,
        "monthly_price_usd": price,
        "refuel_price_per_gb_usd": refuel,
        "roaming_price_per_day_usd": roaming,
    }


def get_plan_details(world: World, plan_id: str) -> Any:
    if plan_id not in PLANS:
        raise ToolError(f"no plan {plan_id!r}; plans: {', '.join(PLANS)}.")
    return _plan_dict(plan_id)


def list_plans(world: World) -> Any:
    return [_plan_dict(p) for p in PLANS]


def get_bills(world: World, customer_id: str) -> Any:
    if customer_id not in world.db["customers"]:
        raise ToolError(f"no customer {customer_id!r}; customer ids look like 'C1234'.")
    bills = [b for b in world.db["bills"].values() if b["customer_id"] == customer_id]
    return sorted((copy.deepcopy(b) for b in bills), key=lambda b: b["bill_id"])


def pay_bill(world: World, bill_id: str) -> Any:
    bill = world.db["bills"].get(bill_id)
    if bill is None:
        raise ToolError(f"no bill {bill_id!r}; see get_bills for the customer's bill ids.")
    if bill["status"] == "paid":
        raise ToolError(f"bill {bill_id} is already paid.")
    method = world.db["customers"][bill["customer_id"]]["payment_method"]
    bill.update(status="paid", paid_with=method)
    return {"bill_id": bill_id, "status": "paid", "amount_usd": bill["amount_usd"], "paid_with": method}


def resume_line(world: World, line_id: str) -> Any:
    line = _line(world, line_id)
    if line["status"] != "suspended":
        raise ToolError(f"line {line_id} is {line['status']}, not suspended.")
    line.update(status="active", suspension_reason=None)
    return {"line_id": line_id, "status": "active"}


def refuel_data(world: World, line_id: str, data_gb: int) -> Any:
    line = _line(world, line_id)
    if data_gb < 1:
        raise ToolError(f"data_gb must be a whole number of gigabytes, at least 1; got {data_gb}.")
    price = PLANS[line["plan_id"]][3] * data_gb
    line["data_refuel_gb"] += data_gb
    world.db["charges"].append({"line_id": line_id, "description": f"data refuel {data_gb} GB", "amount_usd": price})
    return {"line_id": line_id, "added_gb": data_gb, "charged_usd": price, "data_limit_gb": _limit(world.db, line)}


def change_plan(world: World, line_id: str, plan_id: str) -> Any:
    line = _line(world, line_id)
    if plan_id not in PLANS:
        raise ToolError(f"no plan {plan_id!r}; plans: {', '.join(PLANS)}.")
    if line["plan_id"] == plan_id:
        raise ToolError(f"line {line_id} is already on the plan {plan_id}.")
    line["plan_id"] = plan_id
    return {"line_id": line_id, "plan_id": plan_id, "monthly_price_usd": PLANS[plan_id][2]}


def _set_roaming(world: World, line_id: str, on: bool) -> Any:
    line = _line(world, line_id)
    if line["roaming_enabled"] == on:
        raise ToolError(f"roaming is already {'enabled' if on else 'disabled'} on line {line_id}.")
    line["roaming_enabled"] = on
    return {"line_id": line_id, "roaming_enabled": on}


def enable_roaming(world: World, line_id: str) -> Any:
    return _set_roaming(world, line_id, True)


def disable_roaming(world: World, line_id: str) -> Any:
    return _set_roaming(world, line_id, False)


# ---------------------------------------------------------------------- user (device) tools
def check_status_bar(world: World) -> Any:
    dev = world.device
    service = has_service(world)
    bars = {"excellent": 4, "good": 3, "fair": 2}[dev["signal"]]
    return {
        "airplane_mode_icon": dev["airplane_mode"],
        "signal_bars": bars if service else 0,
        "network": dev["network_mode"].upper() if service else "no service",
        "sim": {"active": "ok", "missing": "no SIM", "locked": "SIM locked"}[dev["sim_status"]],
        "mobile_data_icon": data_works(world),
        "data_saver_icon": dev["data_saver"],
        "roaming_icon": service and dev["location"] != "home",
    }


def check_network_status(world: World) -> Any:
    dev = world.device
    return {
        "airplane_mode": dev["airplane_mode"],
        "sim_status": dev["sim_status"],
        "service": "connected" if has_service(world) else "no service",
        "signal": dev["signal"] if has_service(world) else "none",
        "network_mode_preference": dev["network_mode"],
        "mobile_data": dev["mobile_data"],
        "data_connection": "connected" if data_works(world) else "not connected",
        "data_roaming": dev["data_roaming"],
        "data_saver": dev["data_saver"],
        "abroad": dev["location"] != "home",
        "location": dev["location"],
    }


def check_sim_status(world: World) -> Any:
    return {"sim_status": world.device["sim_status"]}


def check_apn_settings(world: World) -> Any:
    return {**copy.deepcopy(world.device["apn"]), "reset_pending_restart": world.device["apn_reset_pending"]}


def run_speed_test(world: World) -> Any:
    speed = speed_mbps(world)
    if speed is None:
        return {"download_mbps": None, "result": "no data connection"}
    quality = (
        "very poor" if speed < 1 else "poor" if speed < GOOD_SPEED_MBPS else "good" if speed < 100 else "excellent"
    )
    return {"download_mbps": speed, "result": quality}


def _flip(world: World, key: str) -> Any:
    world.device[key] = not world.device[key]
    return {key: world.device[key]}


def toggle_airplane_mode(world: World) -> Any:
    return _flip(world, "airplane_mode")


def toggle_data(world: World) -> Any:
    return _flip(world, "mobile_data")


def toggle_roaming(world: World) -> Any:
    return _flip(world, "data_roaming")


def toggle_data_saver(world: World) -> Any:
    return _flip(world, "data_saver")


def set_network_mode_preference(world: World, mode: str) -> Any:
    world.device["network_mode"] = mode
    return {"network_mode_preference": mode}


def reset_apn_settings(world: World) -> Any:
    if world.device["apn"] == DEFAULT_APN:
        return {"apn": copy.deepcopy(DEFAULT_APN), "note": "the APN settings are already the defaults"}
    world.device["apn_reset_pending"] = True
    return {"reset_pending_restart": True, "note": "the default APN settings apply after a restart"}


def reseat_sim_card(world: World) -> Any:
    dev = world.device
    if dev["sim_status"] == "missing":
        dev["sim_status"] = "active"
    return {"sim_status": dev["sim_status"]}


def reboot_device(world: World) -> Any:
    dev = world.device
    if dev["apn_reset_pending"]:
        dev["apn"] = copy.deepcopy(DEFAULT_APN)
        dev["apn_reset_pending"] = False
    return {"restarted": True, "service": "connected" if has_service(world) else "no service"}


# ---------------------------------------------------------------------- schemas
_NONE: dict[str, Any] = {"type": "object", "properties": {}, "required": []}


def _obj(**props: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": props, "required": list(props)}


_STR = {"type": "string"}
_LINE = _obj(line_id={"type": "string", "description": "the line id, e.g. 'L1234'"})


def _agent_tools() -> list[Tool]:
    cid = _obj(customer_id={"type": "string", "description": "the customer id, e.g. 'C1234'"})
    return [
        Tool(
            "get_customer_by_phone",
            "Find the customer account that owns a phone number (any format): name, date of birth, payment method, lines.",
            _obj(phone_number={"type": "string", "description": "the line's phone number, e.g. '415-555-0123'"}),
            get_customer_by_phone,
        ),
        Tool("get_customer_details", "A customer's account by id.", cid, get_customer_details),
        Tool(
            "get_line_details",
            "A line: status (active/suspended), plan, data used and left this cycle, refuel, roaming, cycle end date.",
            _LINE,
            get_line_details,
        ),
        Tool(
            "get_plan_details",
            "A plan: data, monthly price, refuel and roaming prices.",
            _obj(plan_id=_STR),
            get_plan_details,
        ),
        Tool("list_plans", "Every plan on offer.", _NONE, list_plans),
        Tool("get_bills", "A customer's bills (paid, open, overdue).", cid, get_bills),
        Tool(
            "pay_bill",
            "Pay a bill with the customer's payment method on file.",
            _obj(bill_id=_STR),
            pay_bill,
            writes=True,
        ),
        Tool("resume_line", "Resume (reactivate) a suspended line.", _LINE, resume_line, writes=True),
        Tool(
            "refuel_data",
            "Add data (whole GB) to a line for this cycle, charged at the plan's refuel price.",
            _obj(
                line_id={"type": "string", "description": "the line id"},
                data_gb={"type": "integer", "description": "gigabytes to add"},
            ),
            refuel_data,
            writes=True,
        ),
        Tool(
            "change_plan",
            "Move a line to another plan (takes effect at once).",
            _obj(line_id={"type": "string"}, plan_id={"type": "string", "enum": list(PLANS)}),
            change_plan,
            writes=True,
        ),
        Tool("enable_roaming", "Enable roaming on a line (service abroad).", _LINE, enable_roaming, writes=True),
        Tool("disable_roaming", "Disable roaming on a line.", _LINE, disable_roaming, writes=True),
    ]


def _user_tools() -> list[Tool]:
    def user(name: str, text: str, fn: Any, writes: bool = False, params: dict[str, Any] = _NONE) -> Tool:
        return Tool(name, text, params, fn, writes=writes, side="user")

    mode = _obj(mode={"type": "string", "enum": list(_MODES)})
    return [
        user("check_status_bar", "What the phone's status bar shows.", check_status_bar),
        user("check_network_status", "The phone's network settings and connection.", check_network_status),
        user("check_sim_status", "Whether the SIM card is active, missing or locked.", check_sim_status),
        user("check_apn_settings", "The phone's APN settings.", check_apn_settings),
        user("run_speed_test", "Measure the mobile data download speed.", run_speed_test),
        user("toggle_airplane_mode", "Turn airplane mode on or off.", toggle_airplane_mode, True),
        user("toggle_data", "Turn mobile data on or off.", toggle_data, True),
        user("toggle_roaming", "Turn data roaming on or off.", toggle_roaming, True),
        user("toggle_data_saver", "Turn data saver mode on or off.", toggle_data_saver, True),
        user("set_network_mode_preference", "Set the preferred network mode.", set_network_mode_preference, True, mode),
        user(
            "reset_apn_settings", "Reset the APN settings to the defaults (after a restart).", reset_apn_settings, True
        ),
        user("reseat_sim_card", "Take the SIM card out and put it back in.", reseat_sim_card, True),
        user("reboot_device", "Restart the phone.", reboot_device, True),
    ]
