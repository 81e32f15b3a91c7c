"""Oracle for the telecom service domain: diagnoses from what the user and the tools say, then fixes.

It sees only the observations (the user's words, tool results as JSON) and ``info``, like any
agent. The script, written as a generator that yields actions and receives observations:

1. ask the user for the line's number and their full name; look the account up by the number
   and check the name; read the line, its plan and the account's bills;
2. a suspended line: tell the overdue total and offer to pay it; on yes pay every overdue bill
   and resume the line, on no refuse (bills are never waived) and stop;
3. ask the user to check their network status (and, for data trouble, the APN settings); a
   locked SIM: send them to a store with a photo ID and stop;
4. data used up (for data trouble): offer a refuel or a plan change and do what the user
   prefers after telling the price; at the refuel limit, refuse and tell the cycle end date;
5. abroad with roaming off on the line: tell the daily price and enable it on a yes;
6. one instruction per message for each wrong setting on the phone that causes the trouble
   (airplane mode, SIM not detected, mobile data off, APN not the carrier's: reset then restart,
   data roaming off abroad; for slow data, a 2G/3G network mode: 5G, data saver on: off);
7. check the result (status bar, or a speed test), look again if it is not fixed, and close.
"""

from __future__ import annotations

import json
import re
from collections.abc import Generator
from typing import Any

from envgym.rollout import Policy

__all__ = ["Solver"]

CARRIER_APN = "nimbus.internet"
MAX_REFUEL_GB = 2
GOOD_MBPS = 10.0
_PHONE = re.compile(r"\(?\b\d{3}\)?[-. ]?\d{3}[-. ]?\d{4}\b")
Script = Generator[str, str, None]


def _money(x: float) -> str:
    return f"${x:.2f}"


def _user_text(observation: str) -> str:
    return observation.rsplit("User: ", 1)[-1] if "User: " in observation else ""


def _tool_result(observation: str) -> Any:
    """The JSON of a tool result observation (None for a tool error or anything else)."""
    match = re.match(r"Tool result \([^)]*\): (.*)", observation, re.DOTALL)
    if match is None or match.group(1).startswith("Tool error"):
        return None
    try:
        return json.loads(match.group(1))
    except json.JSONDecodeError:
        return None


def _goal(opening: str) -> str:
    text = opening.lower()
    if re.search(r"\bslow|crawling|takes? forever", text):
        return "speed"
    if re.search(r"\b(data|internet)\b", text) and not re.search(r"suspend|cut off|puk|locked", text):
        return "data"
    return "service"


def _yes(reply: str) -> bool:
    return bool(re.search(r"\b(yes|go ahead|sure|please do)\b", reply.lower())) and "don't" not in reply.lower()


def _status(reply: str) -> dict[str, Any]:
    """What the user reported from their network status screen."""
    text = reply.lower()
    found: dict[str, Any] = {}
    for key, pattern in (
        ("airplane_mode", r"airplane mode is (on|off)"),
        ("mobile_data", r"mobile data is (on|off)"),
        ("data_roaming", r"data roaming is (on|off)"),
        ("data_saver", r"data saver is (on|off)"),
    ):
        match = re.search(pattern, text)
        if match:
            found[key] = match.group(1) == "on"
    for key, pattern in (("sim", r"sim card is (\w+)"), ("mode", r"network mode preference is (\w+)")):
        match = re.search(pattern, text)
        if match:
            found[key] = match.group(1)
    found["abroad"] = "i'm abroad" in text
    return found


class Solver(Policy):
    """The telecom oracle of one episode (see the module docstring)."""

    def __init__(self, env_id: str, seed: int | None = None) -> None:
        self.env_id = env_id
        self._script: Script | None = None
        self._done = False

    def act(self, observation: str, info: dict[str, Any]) -> str:
        if self._done:
            return "done"
        try:
            if self._script is None:
                self._script = self._run(observation)
                return next(self._script)
            return self._script.send(observation)
        except StopIteration:
            self._done = True
            return "done"

    # ------------------------------------------------------------------ steps
    def _call(self, name: str, **arguments: Any) -> Generator[str, str, Any]:
        observation = yield json.dumps({"name": name, "arguments": arguments})
        return _tool_result(observation)

    def _say(self, text: str) -> Generator[str, str, str]:
        observation = yield text
        return _user_text(observation)

    def _run(self, first: str) -> Script:
        opening = _user_text(first)
        goal = _goal(opening)
        reply = yield from self._say(
            "I'm sorry about the trouble, I can help. To find your account, could you tell me the phone number "
            "of the affected line and your full name?"
        )
        phone_match = _PHONE.search(reply) or _PHONE.search(opening)
        name_match = re.search(r"full name is (.+?)\.(?:\s|$)", reply)
        if phone_match is None:
            return
        customer = yield from self._call("get_customer_by_phone", phone_number=phone_match.group(0))
        if customer is None:
            yield from self._say("I couldn't find a line with that number. Could you check it?")
            return
        if name_match and name_match.group(1).strip().lower() != customer["full_name"].lower():
            yield from self._say("I'm sorry, that name does not match the account, so I can't help with this line.")
            return
        digits = re.sub(r"\D", "", phone_match.group(0))
        line_id = next(x["line_id"] for x in customer["lines"] if re.sub(r"\D", "", x["phone_number"]) == digits)
        phone = next(x["phone_number"] for x in customer["lines"] if x["line_id"] == line_id)
        line = yield from self._call("get_line_details", line_id=line_id)
        plan = yield from self._call("get_plan_details", plan_id=line["plan_id"])
        bills = yield from self._call("get_bills", customer_id=customer["customer_id"])
        overdue = [b for b in bills if b["status"] == "overdue"]

        # 2. a suspended line
        if line["status"] == "suspended" and overdue:
            owed = _money(sum(b["amount_usd"] for b in overdue))
            ids = ", ".join(b["bill_id"] for b in overdue)
            reply = yield from self._say(
                f"Your line {phone} is suspended because bills totalling {owed} are overdue ({ids}). "
                f"I can pay {owed} now with your {customer['payment_method']} on file and then resume the line. "
                "Would you like me to proceed?"
            )
            if not _yes(reply):
                yield from self._say(
                    f"I understand, but overdue bills cannot be waived or postponed. Your line stays suspended "
                    f"until the {owed} is paid; call us back any time to pay it."
                )
                return
            for bill in overdue:
                yield from self._call("pay_bill", bill_id=bill["bill_id"])
            yield from self._call("resume_line", line_id=line_id)
            reply = yield from self._say(f"Thank you: the {owed} is paid and your line {phone} is active again.")

        # 3. the phone
        reply = yield from self._say("Could you please check your network status and tell me what you see?")
        status = _status(reply)
        if status.get("sim") == "locked":
            yield from self._say(
                "Your SIM card is PIN/PUK-locked, which we cannot unlock over the phone. Please bring a photo ID "
                "to a Nimbus Mobile store to get a replacement SIM."
            )
            return
        if status["abroad"]:
            goal = "data"
        apn_ok = True
        if goal in ("data", "speed"):
            reply = yield from self._say("Could you also check your APN settings?")
            match = re.search(r"apn name is '([^']*)'", reply.lower())
            apn_ok = match is None or match.group(1) == CARRIER_APN

        # 4. data used up
        if goal in ("data", "speed") and line["data_remaining_gb"] <= 0:
            room = MAX_REFUEL_GB - line["data_refuel_gb"]
            if room <= 0:
                yield from self._say(
                    f"Your data allowance for this cycle is used up and your line has already had the maximum "
                    f"{MAX_REFUEL_GB} GB of data refuel this cycle, so I cannot add more. Your allowance resets "
                    f"when the cycle ends on {line['cycle_end_date']}."
                )
                return
            price = plan["refuel_price_per_gb_usd"]
            reply = yield from self._say(
                f"Your data allowance for this cycle is used up ({line['data_used_gb']} of {line['data_limit_gb']} GB). "
                f"I can add a data refuel of up to {room} GB at {_money(price)} per GB, or change your plan to one "
                "with more data. Which would you prefer?"
            )
            refuel = re.search(r"refuel of (\d+) gb", reply.lower())
            switch = re.search(r"switch to the (.+?) plan", reply, re.IGNORECASE)
            if refuel:
                gb = min(int(refuel.group(1)), room)
                reply = yield from self._say(
                    f"I will add {gb} GB of data to your line {phone} for {_money(gb * price)}. Shall I proceed?"
                )
                if _yes(reply):
                    yield from self._call("refuel_data", line_id=line_id, data_gb=gb)
            elif switch:
                plans = yield from self._call("list_plans")
                new = next((p for p in plans if p["name"].lower() == switch.group(1).strip().lower()), None)
                if new is not None:
                    reply = yield from self._say(
                        f"I will move your line {phone} to the {new['name']} plan ({new['data_gb']} GB) at "
                        f"{_money(new['monthly_price_usd'])} per month, starting now. Shall I proceed?"
                    )
                    if _yes(reply):
                        yield from self._call("change_plan", line_id=line_id, plan_id=new["plan_id"])

        # 5. roaming on the line
        if status["abroad"] and not line["roaming_enabled"]:
            reply = yield from self._say(
                f"Roaming is not turned on for your line. On the {plan['name']} plan roaming costs "
                f"{_money(plan['roaming_price_per_day_usd'])} per day. Would you like me to proceed and enable it?"
            )
            if _yes(reply):
                yield from self._call("enable_roaming", line_id=line_id)

        # 6. the phone's settings
        for _attempt in range(2):
            steps = []
            if status.get("airplane_mode"):
                steps.append("Please turn off airplane mode.")
            if status.get("sim") == "missing":
                steps.append("Please reseat your SIM card: take it out and put it back in.")
            if goal in ("data", "speed"):
                if status.get("mobile_data") is False:
                    steps.append("Please turn on mobile data.")
                if not apn_ok:
                    steps += ["Please reset your APN settings to the defaults.", "Please restart your phone."]
                if status["abroad"] and status.get("data_roaming") is False:
                    steps.append("Please turn on data roaming.")
            if goal == "speed":
                if status.get("mode") in ("2g", "3g"):
                    steps.append("Please set your network mode preference to 5G.")
                if status.get("data_saver"):
                    steps.append("Please turn off data saver.")
            for step in steps:
                yield from self._say(step)
            apn_ok = True
            # 7. check
            if goal == "service":
                reply = yield from self._say("Please check your status bar and tell me what you see.")
                fixed = "no signal bars" not in reply and "no service" not in reply
            else:
                reply = yield from self._say("Please run a speed test and tell me the result.")
                speed = re.search(r"([\d.]+) mbps", reply.lower())
                fixed = speed is not None and (goal == "data" or float(speed.group(1)) >= GOOD_MBPS)
            if fixed:
                break
            reply = yield from self._say("Could you please check your network status again and tell me what you see?")
            status = _status(reply)
        yield from self._say("Your phone is working again. Is there anything else I can help you with?")
