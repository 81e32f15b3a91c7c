"""The scripted user of the telecom domain: does what the agent asks on their phone and says what they see.

:class:`TelecomUser` splits the agent's message into instructions (sentences, and clauses joined
by "then" or by "and" before a verb) and maps each to the user tools of
:class:`~.telecom.TelecomDomain`: switching a setting on or off (airplane mode, mobile data,
data roaming, data saver; "on and off" switches it twice), setting the network mode, resetting
the APN, reseating the SIM, restarting the phone, and the checks (status bar, network status,
SIM, APN, speed test). A setting that is already as asked is reported, not switched. Sentences
the agent says about its own work ("I have enabled roaming on your line") are not instructions.
The user is satisfied when their phone really works (the task's goal, :func:`.telecom.problem_fixed`),
or in a refusal task when one message of the agent says it cannot help and gives what the task's
``communicate_info`` names (the overdue amount, the cycle end date, the photo ID for the store).
"""

from __future__ import annotations

import re
from typing import Any

from envgym.environments.service.core import ToolCall, ToolError, World
from envgym.environments.service.telecom.tools import problem_fixed
from envgym.environments.service.user import ScriptedUser, UserReply

__all__ = ["TelecomUser", "instructions"]

_VERBS = (
    r"turn|switch|toggle|enable|disable|activate|deactivate|set|change|reset|restore|reseat|re-seat|restart|reboot|"
    r"check|run|make sure|ensure|open|go|look|put|select|tell me|try|remove|take|do|perform|confirm|let me know"
)
_SENTENCE = re.compile(r"(?:[^.;!?\n]|(?<=\d)\.(?=\d))+[.;!?\n]*")
_SPLIT = re.compile(rf",?\s*\bthen\b|,?\s*\band\b(?=\s+(?:please\s+)?(?:{_VERBS})\b)")
_SELF = re.compile(r"^\s*(?:i|i've|i have|i'll|i will|i can|i just|we|we've|we have|we'll|we can)\b")
_ACT = re.compile(
    r"\b(turn(ing)?|switch(ing)?|toggl(e|ing)|enabl(e|ing)|disabl(e|ing)|activat(e|ing)|deactivat(e|ing)|"
    r"make sure|ensure|set|setting|put)\b"
)
_CHECK = re.compile(r"\b(check|look|see|tell me|what|whether|verify|let me know|read)\b")
_REBOOT = re.compile(
    r"\b(restart|reboot|power[- ]cycle)\b|\b(turn|switch|power)(ing)? (it|your phone|your device|the phone|the device) "
    r"(off|down)\b.*\b(back on|on again|on)\b|\b(power|switch|turn)(ing)? off (your|the) (phone|device)\b"
)
_RESEAT = re.compile(
    r"\b(re-?seat|re-?insert)\b|\b(take|pull|remove|taking|removing) (out )?(the |your )?sim|sim card out"
)
_PHONE_WORDS = re.compile(r"\b(on|in|of) (your|the) (phone|device|settings)\b")
_REFUSED = re.compile(r"\b(cannot|can't|can not|unable|not able|not possible|won't|not allowed|no way)\b")
_MODE = re.compile(r"\b(2g|3g|4g|5g|lte)\b")
_SETTINGS = (
    (
        "data_saver",
        re.compile(r"(mobile )?data[- ]?saver( mode)?|low data mode|data saving"),
        "toggle_data_saver",
        "data saver",
    ),
    ("data_roaming", re.compile(r"(data |mobile data )?roaming"), "toggle_roaming", "data roaming"),
    ("airplane_mode", re.compile(r"airplane|aeroplane|flight mode"), "toggle_airplane_mode", "airplane mode"),
    ("mobile_data", re.compile(r"mobile data|cellular data|\bdata\b"), "toggle_data", "mobile data"),
)
Item = tuple[str, dict[str, Any]] | str


def instructions(message: str, device: dict[str, Any]) -> list[Item]:
    """The user tool calls an agent's message asks for, in order (a string: something to say instead).

    ``device`` is read to skip switching a setting that is already as asked.
    """
    state = dict(device)
    out: list[Item] = []
    for sentence in _SENTENCE.findall(message.lower()):
        question = sentence.rstrip().endswith("?")
        for clause in _SPLIT.split(sentence):
            if clause and clause.strip() and not _SELF.match(clause):
                out += _clause(clause, state, question)
    seen: set[str] = set()
    result = []
    for item in out:  # the same check twice in one message is done once
        key = repr(item)
        if isinstance(item, tuple) and item[0].startswith(("check_", "run_")) and key in seen:
            continue
        seen.add(key)
        result.append(item)
    return result


def _clause(clause: str, state: dict[str, Any], question: bool) -> list[Item]:
    act = bool(_ACT.search(clause))
    if _REBOOT.search(clause) and not any(p.search(clause) for _, p, _, _ in _SETTINGS):
        return [("reboot_device", {})]
    if _RESEAT.search(clause) and "sim" in clause:
        return [("reseat_sim_card", {})]
    if "apn" in clause:
        if re.search(r"\b(reset|restore|default|defaults)\b", clause):
            return [("reset_apn_settings", {})]
        return [("check_apn_settings", {})] if question or _CHECK.search(clause) else []
    found: list[Item] = []
    if re.search(r"speed ?test", clause):
        found.append(("run_speed_test", {}))
    if "status bar" in clause:
        found.append(("check_status_bar", {}))
    modes = _MODE.findall(clause)
    if modes and re.search(r"\b(set|change|switch|select|use|put|choose)\b", clause):
        value = max("4g" if m == "lte" else m for m in modes)
        if state.get("network_mode") == value:
            found.append(f"My network mode is already {value.upper()}.")
        else:
            state["network_mode"] = value
            found.append(("set_network_mode_preference", {"mode": value}))
        return found
    if "sim" in clause and not act and (question or _CHECK.search(clause)):
        found.append(("check_sim_status", {}))
    text, mentioned = clause, []
    for key, pattern, tool, label in _SETTINGS:
        if pattern.search(text):
            mentioned.append((key, tool, label))
            text = pattern.sub(" ", text)
    if mentioned and act:
        for key, tool, label in mentioned:
            found += _switch(clause, state, key, tool, label)
    elif (mentioned and (question or _CHECK.search(clause))) or (
        not found and re.search(r"network (status|settings)|\bsignal\b", clause) and (question or _CHECK.search(clause))
    ):
        found.append(("check_network_status", {}))
    return found


def _switch(clause: str, state: dict[str, Any], key: str, tool: str, label: str) -> list[Any]:
    text = _PHONE_WORDS.sub(" ", clause)
    on = re.search(r"\b(on|enable|activate)\b", text)
    off = re.search(r"\b(off|disable|deactivate)\b", text)
    if on and off and re.search(r"\b(on and (back )?off|off and (back )?on)\b", text):
        return [(tool, {}), (tool, {})]
    if not on and not off:  # "toggle airplane mode": flip it
        want = not state.get(key)
    elif on and off:  # "turn off ... turn it back on" in one clause: the last word wins
        want = on.start() > off.start()
    else:
        want = bool(on)
    if state.get(key) == want:
        return [f"My {label} is already {'on' if want else 'off'}."]
    state[key] = want
    return [(tool, {})]


def describe(name: str, result: Any) -> str:
    """What the user says after a device call (plain words, the same every time)."""
    r = result

    def onoff(flag: bool) -> str:
        return "on" if flag else "off"

    if name == "check_status_bar":
        bits = [f"{r['signal_bars']} signal bars" if r["signal_bars"] else "no signal bars"]
        bits.append(f"the network shows {r['network']}")
        if r["airplane_mode_icon"]:
            bits.append("the airplane mode icon is showing")
        if r["sim"] != "ok":
            bits.append(f"it says '{r['sim']}'")
        bits.append("the mobile data icon is " + ("showing" if r["mobile_data_icon"] else "not showing"))
        if r["data_saver_icon"]:
            bits.append("the data saver icon is showing")
        if r["roaming_icon"]:
            bits.append("the roaming icon is showing")
        return "My status bar shows " + ", ".join(bits) + "."
    if name == "check_network_status":
        where = f"I'm abroad in {r['location']}" if r["abroad"] else "I'm at home"
        return (
            f"My network status: airplane mode is {onoff(r['airplane_mode'])}, the SIM card is {r['sim_status']}, "
            f"service is {r['service']}, signal is {r['signal']}, the network mode preference is "
            f"{r['network_mode_preference'].upper()}, mobile data is {onoff(r['mobile_data'])}, the data connection "
            f"is {r['data_connection']}, data roaming is {onoff(r['data_roaming'])}, data saver is "
            f"{onoff(r['data_saver'])}, and {where}."
        )
    if name == "check_sim_status":
        return f"My SIM card status is {r['sim_status']}."
    if name == "check_apn_settings":
        text = f"My APN settings: the APN name is '{r['name']}' and the MMSC is '{r['mmsc']}'"
        return text + (" (a reset is waiting for a restart)." if r["reset_pending_restart"] else ".")
    if name == "run_speed_test":
        if r["download_mbps"] is None:
            return "I ran a speed test: it failed, no data connection."
        return f"I ran a speed test: {r['download_mbps']} Mbps download, rated {r['result']}."
    if name == "set_network_mode_preference":
        return f"I set the network mode preference to {r['network_mode_preference'].upper()}."
    if name == "reset_apn_settings":
        return (
            "I reset the APN settings; the phone says they apply after a restart."
            if r.get("reset_pending_restart")
            else "The APN settings were already the defaults."
        )
    if name == "reseat_sim_card":
        return f"I took the SIM card out and put it back in; the SIM card is now {r['sim_status']}."
    if name == "reboot_device":
        return f"I restarted my phone; it now shows {'service' if r['service'] == 'connected' else 'no service'}."
    key, value = next(iter(r.items()))
    label = {"airplane_mode": "airplane mode", "mobile_data": "mobile data", "data_roaming": "data roaming"}.get(
        key, "data saver"
    )
    return f"I turned {label} {onoff(value)}."


class TelecomUser(ScriptedUser):
    """The telecom scripted user (see the module docstring)."""

    def device_actions(self, message: str, world: World) -> tuple[list[ToolCall], list[str]]:
        calls: list[ToolCall] = []
        reports: list[str] = []
        for item in instructions(message, world.device):
            if isinstance(item, str):
                reports.append(item)
                continue
            call = ToolCall(item[0], item[1], requestor="user")
            try:
                result = self.domain.run(world, call)
            except ToolError as err:  # pragma: no cover - the parser only makes valid calls
                reports.append(f"I couldn't do that: {err}")
                continue
            calls.append(call)
            reports.append(describe(call.name, result))
        return calls, reports

    def respond(self, message: str, world: World) -> UserReply:
        reply = super().respond(message, world)
        unsure = "I'm not sure what you mean. "
        if self.task.extra.get("goal") and reply.text.startswith(unsure):  # the phone still shows the trouble
            reply.text = "My phone still doesn't work. " + reply.text[len(unsure) :]
        return reply

    def satisfied(self, message: str, world: World) -> bool:
        goal = self.task.extra.get("goal")
        if goal is None:  # a refusal: told what they must hear, and told no
            return super().satisfied(message, world) and bool(_REFUSED.search(message.lower()))
        return problem_fixed(world, goal)
