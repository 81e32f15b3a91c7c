"""The telecom domain (dual control): tools, the phone model, policy, tasks, the scripted user, the oracle, the env."""

from __future__ import annotations

import collections
import copy
import json
import random
import zlib
from typing import Any

import gymnasium
import pytest
from envgym.agents.solvers.service_telecom import Solver
from envgym.environments.service.core import ToolCall, ToolError, World, grade
from envgym.environments.service.env import TEST_MODULUS, ServiceEnv
from envgym.environments.service.telecom.domain import TelecomDomain
from envgym.environments.service.telecom.tools import (
    DEFAULT_APN,
    causes,
    data_works,
    has_service,
    problem_fixed,
    speed_mbps,
)
from envgym.environments.service.telecom.user import TelecomUser, instructions
from envgym.environments.service.user import STOP

from envgym.testing import check_env

ENV_ID = "envgym/Service-Telecom-v0"
DOMAIN = TelecomDomain()
KINDS = {
    "no_service",
    "mobile_data",
    "data_refuel",
    "plan_change",
    "slow_data",
    "roaming",
    "refuse_waive_bill",
    "refuse_refuel_limit",
    "sim_locked",
}


def hand_world(**device: Any) -> World:
    """Two customers: Ana (line L1, 415-555-0101, Basic 5, 3.0 GB used; line L2) and Bo (L3, suspended, bill B3 overdue)."""
    line = {"status": "active", "suspension_reason": None, "data_refuel_gb": 0, "roaming_enabled": False}
    db = {
        "customers": {
            "C1": {"customer_id": "C1", "full_name": "Ana Lee", "date_of_birth": "1990-01-02",
                   "payment_method": "credit card ending 1111", "line_ids": ["L1", "L2"]},
            "C2": {"customer_id": "C2", "full_name": "Bo Ito", "date_of_birth": "1980-03-04",
                   "payment_method": "bank account ending 2222", "line_ids": ["L3"]},
        },
        "lines": {
            "L1": {**line, "line_id": "L1", "phone_number": "415-555-0101", "customer_id": "C1", "plan_id": "basic_5",
                   "data_used_gb": 3.0, "cycle_end_date": "2025-06-01"},
            "L2": {**line, "line_id": "L2", "phone_number": "415-555-0102", "customer_id": "C1", "plan_id": "max_60",
                   "data_used_gb": 1.0, "cycle_end_date": "2025-06-01"},
            "L3": {**line, "line_id": "L3", "phone_number": "206-555-0303", "customer_id": "C2", "plan_id": "plus_30",
                   "data_used_gb": 2.0, "cycle_end_date": "2025-05-20", "status": "suspended",
                   "suspension_reason": "overdue bill"},
        },
        "bills": {
            "B1": {"bill_id": "B1", "customer_id": "C1", "period": "2025-05", "amount_usd": 25.0,
                   "due_date": "2025-05-28", "status": "open", "paid_with": None},
            "B3": {"bill_id": "B3", "customer_id": "C2", "period": "2025-04", "amount_usd": 55.5,
                   "due_date": "2025-05-05", "status": "overdue", "paid_with": None},
        },
        "charges": [],
    }  # fmt: skip
    dev = {
        "phone_number": "415-555-0101", "airplane_mode": False, "mobile_data": True, "data_roaming": False,
        "data_saver": False, "network_mode": "5g", "apn": dict(DEFAULT_APN), "apn_reset_pending": False,
        "sim_status": "active", "signal": "good", "location": "home",
    }  # fmt: skip
    dev.update(device)
    return World(db, dev)


def call(world: World, name: str, requestor: str = "assistant", **arguments: Any) -> Any:
    return DOMAIN.run(world, ToolCall(name, arguments, requestor=requestor))


def user(world: World, name: str, **arguments: Any) -> Any:
    return call(world, name, "user", **arguments)


# ---------------------------------------------------------------------- agent tools
def test_lookups_find_the_account_by_any_phone_format_and_compute_data_left() -> None:
    w = hand_world()
    for number in ("415-555-0101", "(415) 555 0101", "4155550101"):
        cust = call(w, "get_customer_by_phone", phone_number=number)
        assert cust["customer_id"] == "C1" and cust["full_name"] == "Ana Lee"
    assert cust["lines"] == [
        {"line_id": "L1", "phone_number": "415-555-0101"},
        {"line_id": "L2", "phone_number": "415-555-0102"},
    ]
    line = call(w, "get_line_details", line_id="L1")
    assert (line["data_limit_gb"], line["data_remaining_gb"], line["status"]) == (5, 2.0, "active")
    assert call(w, "get_plan_details", plan_id="plus_30")["refuel_price_per_gb_usd"] == 3.0
    assert [p["plan_id"] for p in call(w, "list_plans")] == ["basic_5", "standard_15", "plus_30", "max_60"]
    assert [b["bill_id"] for b in call(w, "get_bills", customer_id="C2")] == ["B3"]
    for name, args, message in (
        ("get_customer_by_phone", {"phone_number": "999-555-0000"}, "no line with the phone number"),
        ("get_customer_details", {"customer_id": "C9"}, "no customer 'C9'"),
        ("get_line_details", {"line_id": "L9"}, "no line 'L9'"),
        ("get_plan_details", {"plan_id": "gold"}, "no plan 'gold'; plans: basic_5"),
        ("get_bills", {"customer_id": "C9"}, "no customer"),
    ):
        with pytest.raises(ToolError, match=message):
            call(w, name, **args)


def test_write_tools_change_the_database_and_refuse_wrong_states() -> None:
    w = hand_world()
    assert call(w, "pay_bill", bill_id="B3") == {
        "bill_id": "B3", "status": "paid", "amount_usd": 55.5, "paid_with": "bank account ending 2222"
    }  # fmt: skip
    with pytest.raises(ToolError, match="already paid"):
        call(w, "pay_bill", bill_id="B3")
    assert call(w, "resume_line", line_id="L3") == {"line_id": "L3", "status": "active"}
    with pytest.raises(ToolError, match="is active, not suspended"):
        call(w, "resume_line", line_id="L3")
    out = call(w, "refuel_data", line_id="L1", data_gb=2)
    assert out == {"line_id": "L1", "added_gb": 2, "charged_usd": 10.0, "data_limit_gb": 7}
    assert w.db["charges"] == [{"line_id": "L1", "description": "data refuel 2 GB", "amount_usd": 10.0}]
    with pytest.raises(ToolError, match="at least 1"):
        call(w, "refuel_data", line_id="L1", data_gb=0)
    assert call(w, "change_plan", line_id="L1", plan_id="plus_30")["monthly_price_usd"] == 55.0
    with pytest.raises(ToolError, match="already on the plan plus_30"):
        call(w, "change_plan", line_id="L1", plan_id="plus_30")
    with pytest.raises(ToolError, match="expected one of"):  # the schema's enum
        call(w, "change_plan", line_id="L1", plan_id="gold")
    call(w, "enable_roaming", line_id="L1")
    with pytest.raises(ToolError, match="already enabled"):
        call(w, "enable_roaming", line_id="L1")
    call(w, "disable_roaming", line_id="L1")
    assert w.db["lines"]["L1"]["roaming_enabled"] is False


# ---------------------------------------------------------------------- the phone
def test_service_data_and_speed_follow_the_phone_and_the_line() -> None:
    w = hand_world(network_mode="4g", signal="fair")
    assert has_service(w) and data_works(w) and speed_mbps(w) == 18.0 and problem_fixed(w, "speed")
    assert user(w, "run_speed_test") == {"download_mbps": 18.0, "result": "good"}
    user(w, "toggle_data_saver")
    assert speed_mbps(w) == 1.5 and not problem_fixed(w, "speed") and problem_fixed(w, "data")
    user(w, "toggle_data_saver")
    user(w, "set_network_mode_preference", mode="2g")
    assert user(w, "run_speed_test") == {"download_mbps": 0.0, "result": "very poor"}
    user(w, "toggle_airplane_mode")
    assert not has_service(w) and user(w, "run_speed_test")["result"] == "no data connection"
    bar = user(w, "check_status_bar")
    assert bar["airplane_mode_icon"] and bar["signal_bars"] == 0 and bar["network"] == "no service"
    w = hand_world(sim_status="missing")
    assert not has_service(w) and user(w, "reseat_sim_card") == {"sim_status": "active"} and has_service(w)
    w = hand_world(sim_status="locked")
    assert user(w, "reseat_sim_card") == {"sim_status": "locked"} and not has_service(w)
    w = hand_world()
    w.db["lines"]["L1"]["data_used_gb"] = 5.0  # the allowance is used up: service, but no data
    assert has_service(w) and not data_works(w) and causes(w) == ["data_exhausted"]
    call(w, "refuel_data", line_id="L1", data_gb=1)
    assert data_works(w)


def test_a_wrong_apn_is_fixed_by_a_reset_only_after_a_restart() -> None:
    w = hand_world(apn={"name": "wap.nimbus", "mmsc": ""})
    assert has_service(w) and not data_works(w) and causes(w) == ["apn_wrong"]
    assert user(w, "reset_apn_settings")["reset_pending_restart"] is True
    assert user(w, "check_apn_settings") == {"name": "wap.nimbus", "mmsc": "", "reset_pending_restart": True}
    assert not data_works(w)
    assert user(w, "reboot_device") == {"restarted": True, "service": "connected"}
    assert w.device["apn"] == DEFAULT_APN and not w.device["apn_reset_pending"] and data_works(w)
    assert user(w, "reboot_device")["restarted"] and w.device["apn"] == DEFAULT_APN  # a restart alone changes nothing


def test_abroad_needs_roaming_on_the_line_and_on_the_phone() -> None:
    w = hand_world(location="Japan")
    assert not has_service(w) and causes(w) == ["line_roaming_off", "device_roaming_off"]
    call(w, "enable_roaming", line_id="L1")
    assert has_service(w) and not data_works(w)
    assert user(w, "check_network_status")["abroad"] is True
    user(w, "toggle_roaming")
    assert data_works(w) and causes(w) == [] and user(w, "check_status_bar")["roaming_icon"]


# ---------------------------------------------------------------------- policy
def violations_of(world: World, name: str, **arguments: Any) -> list[str]:
    before = world.copy()
    c = ToolCall(name, arguments)
    return DOMAIN.violations(before, c, DOMAIN.run(world, c))


def test_writes_that_break_the_policy_are_violations() -> None:
    assert violations_of(hand_world(), "resume_line", line_id="L3") == ["resumed line L3 while bill B3 is overdue"]
    assert violations_of(hand_world(), "pay_bill", bill_id="B1") == ["paid bill B1, which is open, not overdue"]
    assert violations_of(hand_world(), "enable_roaming", line_id="L3") == [
        "enable_roaming on line L3, which is suspended",
        "enable_roaming while bill B3 is overdue",
    ]
    assert violations_of(hand_world(), "refuel_data", line_id="L1", data_gb=3) == [
        "refuelled 3 GB on top of 0 GB (limit 2)"
    ]
    w = hand_world()
    assert violations_of(w, "refuel_data", line_id="L1", data_gb=1) == []
    assert violations_of(w, "refuel_data", line_id="L1", data_gb=2) == ["refuelled 2 GB on top of 1 GB (limit 2)"]
    w = hand_world()  # the policy's order: pay, then resume; then the line may change
    assert violations_of(w, "pay_bill", bill_id="B3") == []
    assert violations_of(w, "resume_line", line_id="L3") == []
    assert violations_of(w, "change_plan", line_id="L3", plan_id="max_60") == []


# ---------------------------------------------------------------------- the scripted user
@pytest.mark.parametrize(
    ("message", "expected"),
    [
        ("Please turn off airplane mode.", ["toggle_airplane_mode"]),
        (
            "Could you toggle airplane mode off and then check your status bar?",
            ["toggle_airplane_mode", "check_status_bar"],
        ),
        ("Please go to Settings > Network and make sure Mobile Data is switched on.", ["toggle_data"]),
        ("Please turn mobile data off and on again.", ["toggle_data", "toggle_data"]),
        ("Please turn on mobile data and data roaming.", ["toggle_roaming", "toggle_data"]),
        (
            "Can you turn off data saver mode and set network mode to 5G?",
            ["toggle_data_saver", "set_network_mode_preference"],
        ),
        ("Please reset your APN settings and restart your phone.", ["reset_apn_settings", "reboot_device"]),
        ("Please power off your phone and turn it back on.", ["reboot_device"]),
        ("Remove the SIM card and insert it again.", ["reseat_sim_card"]),
        ("Please reseat your SIM card: take it out and put it back in.", ["reseat_sim_card"]),
        ("Is airplane mode on?", ["check_network_status"]),
        ("What does your APN say?", ["check_apn_settings"]),
        ("Let's run a speed test.", ["run_speed_test"]),
        ("Could you check your network status and tell me what you see?", ["check_network_status"]),
        ("I've enabled roaming on your line. Please turn on data roaming on your phone.", ["toggle_roaming"]),
        ("Roaming is not turned on for your line. Would you like me to proceed and enable it?", []),
        ("Your allowance is used up (5.2 of 5 GB). I can add a data refuel. Which would you prefer?", []),
        ("Please bring a photo ID to a Nimbus Mobile store to get a replacement SIM.", []),
    ],
)
def test_the_user_understands_instructions_in_many_phrasings(message: str, expected: list[str]) -> None:
    device = {
        "airplane_mode": True,
        "mobile_data": False,
        "data_roaming": False,
        "data_saver": True,
        "network_mode": "3g",
    }
    assert [i[0] for i in instructions(message, device) if isinstance(i, tuple)] == expected


def test_the_user_reports_settings_already_right_and_picks_the_network_mode() -> None:
    device = {"airplane_mode": False, "mobile_data": True, "network_mode": "5g"}
    assert instructions("Please turn off airplane mode.", device) == ["My airplane mode is already off."]
    assert instructions("Set the network mode to 5G.", device) == ["My network mode is already 5G."]
    assert instructions("Change your preferred network type to LTE/5G.", {"network_mode": "2g"}) == [
        ("set_network_mode_preference", {"mode": "5g"})
    ]


def task_of(kind: str, split: str = "train") -> ServiceEnv:
    env = ServiceEnv(domain="telecom", split=split)
    for seed in range(300):
        env.reset(seed=seed)
        if env.service_task.kind == kind:
            return env
    raise AssertionError(kind)


def test_the_user_acts_on_the_phone_and_ends_only_when_it_really_works() -> None:
    env = task_of("no_service")
    task = env.service_task
    u = env.user
    assert isinstance(u, TelecomUser)
    reply = u.respond("Your phone is fixed now. Anything else?", env.world)
    assert not reply.stop and reply.text.startswith(
        "My phone still doesn't work."
    )  # a claim is not a fix: the user restates
    reply = u.respond("Please check your network status and tell me what you see.", env.world)
    assert reply.text.startswith("My network status: airplane mode is") and reply.tool_calls[0].requestor == "user"
    for c in task.gold_actions:  # the gold fixes, agent side directly, user side by instruction
        if c.requestor == "assistant":
            DOMAIN.run(env.world, c)
    text = {"toggle_airplane_mode": "Please turn off airplane mode.", "reseat_sim_card": "Please reseat your SIM card."}
    for c in task.gold_actions:
        if c.requestor == "user":
            reply = u.respond(text[c.name], env.world)
            assert [x.name for x in reply.tool_calls] == [c.name] and not reply.stop
    reply = u.respond("Is there anything else I can help you with?", env.world)
    assert reply.stop and STOP in reply.text
    assert env.world.state_hash() == DOMAIN.expected_world(env.start, task).state_hash()


# ---------------------------------------------------------------------- tasks
def tasks(split: str, seeds: range) -> list[tuple[World, Any]]:
    env = ServiceEnv(domain="telecom", split=split)
    out = []
    for seed in seeds:
        env.reset(seed=seed)
        out.append((env.start, env.service_task))
    return out


@pytest.mark.slow
@pytest.mark.parametrize("split", ["train", "test"])
def test_gold_actions_solve_every_task_and_every_fix_is_needed(split: str) -> None:
    kinds: collections.Counter[str] = collections.Counter()
    for world, task in tasks(split, range(200)):
        kinds[task.kind] += 1
        final = DOMAIN.expected_world(world, task)
        comps = grade(DOMAIN, task, world, final, list(task.communicate_info), list(task.gold_actions), [])
        assert comps["task_reward"] == 1.0, (task.kind, comps)
        replay = world.copy()
        for c in task.gold_actions:  # the gold calls break no policy rule
            before = replay.copy()
            result = DOMAIN.run(replay, c)
            assert c.requestor == "user" or not DOMAIN.violations(before, c, result)
        goal = task.extra["goal"]
        if goal is None:  # a refusal: nothing changes, the forbidden calls are named, the reason is told
            assert task.gold_actions == () and task.communicate_info and final.state_hash() == world.state_hash()
            continue
        assert problem_fixed(final, goal) and not problem_fixed(world, goal)
        for skip in range(len(task.gold_actions)):  # each fix is needed: the user cannot be satisfied early
            partial = world.copy()
            for i, c in enumerate(task.gold_actions):
                if i != skip:
                    DOMAIN.run(partial, c)
            if task.gold_actions[skip].name != "pay_bill":  # paying first is the policy's rule, not the phone's
                assert not problem_fixed(partial, goal), (task.kind, task.gold_actions[skip])
    assert set(kinds) == KINDS, kinds


def test_refusal_tasks_forbid_the_change_and_name_what_to_tell() -> None:
    env = task_of("refuse_waive_bill")
    t = env.service_task
    assert not t.scenario.confirm and {c.name for c in t.forbidden} >= {"resume_line", "pay_bill"}
    owed = t.communicate_info[0]
    assert owed.startswith("$")
    reply = env.user.respond(f"You owe {owed}. Would you like me to pay it now?", env.world)
    assert reply.text == "No, please don't do that." and not reply.stop  # the amount alone is not a refusal
    reply = env.user.respond(
        f"Sorry, bills cannot be waived: the line stays suspended until {owed} is paid.", env.world
    )
    assert reply.stop
    env = task_of("refuse_refuel_limit")
    line = env.start.db["lines"][env.service_task.extra["line_id"]]
    assert line["data_refuel_gb"] == 2 and env.service_task.communicate_info == (line["cycle_end_date"],)
    assert task_of("sim_locked").service_task.communicate_info == ("photo ID",)


def test_some_users_must_be_asked_for_their_number() -> None:
    with_number = 0
    for world, task in tasks("train", range(60)):
        phone = task.scenario.known_info["phone_number"][0]
        with_number += phone in task.scenario.reason_for_call
    assert 15 <= with_number <= 45


@pytest.mark.slow
def test_splits_are_disjoint_with_hundreds_of_distinct_tasks() -> None:
    prints = {}
    for split in ("train", "test"):
        prints[split] = {t.fingerprint() for _, t in tasks(split, range(1000))}
        assert len(prints[split]) >= 300, (split, len(prints[split]))
        for fp in prints[split]:
            assert (zlib.crc32(fp.encode()) % TEST_MODULUS == 0) == (split == "test")
    assert not prints["train"] & prints["test"]


def test_same_seed_same_task_and_world() -> None:
    a, b = ServiceEnv(domain="telecom"), ServiceEnv(domain="telecom")
    obs_a, _ = a.reset(seed=7)
    obs_b, _ = b.reset(seed=7)
    assert obs_a == obs_b and a.service_task.fingerprint() == b.service_task.fingerprint()
    assert a.start.state_hash() == b.start.state_hash()
    a.reset(seed=8)
    assert a.service_task.fingerprint() != b.service_task.fingerprint()
    world = DOMAIN.make_world(random.Random(3))
    frozen = copy.deepcopy(world)
    DOMAIN.make_task(world, random.Random(4))
    assert world.state_hash() == frozen.state_hash()  # make_task leaves the world alone


# ---------------------------------------------------------------------- episodes
def play(env: ServiceEnv, obs: str, info: dict[str, Any], policy: Any, limit: int = 60) -> dict[str, Any]:
    for _ in range(limit):
        obs, _, terminated, truncated, info = env.step(policy.act(obs, info))
        if terminated or truncated:
            break
    return info


@pytest.mark.slow
@pytest.mark.parametrize("split", ["train", "test"])
def test_the_oracle_solves_at_least_95_percent(split: str) -> None:
    env = gymnasium.make(ENV_ID, split=split)
    wins = 0
    for seed in range(40):
        obs, info = env.reset(seed=seed)
        wins += bool(play(env, obs, info, Solver(ENV_ID, seed))["success"])
    assert wins >= 38, wins


def test_an_agent_that_skips_a_cause_or_breaks_the_policy_fails() -> None:
    env = task_of("refuse_waive_bill")
    line = env.service_task.extra["line_id"]
    for c in env.service_task.forbidden:
        env.step(json.dumps({"tool": c.name, "arguments": dict(c.arguments)}))
    *_, info = env.step("done")
    comps = info["reward_components"]
    assert comps["policy_reward"] == 0.0 and comps["db_reward"] == 0.0 and not info["success"]
    assert env.world.db["lines"][line]["status"] == "active"
    env = task_of("mobile_data")
    obs, _, terminated, _, _ = env.step("I've fixed it on our side: your data works now.")
    assert not terminated and obs.startswith(
        "User: My phone still doesn't work."
    )  # the user checks their phone, not the agent's word
    *_, info = env.step("done")
    assert info["reward_components"]["db_reward"] == 0.0 and not info["success"]


def test_a_differently_phrased_agent_with_several_steps_per_message_succeeds() -> None:
    """An agent that asks for all the phone fixes in one message, in its own words, still solves slow data."""
    env = task_of("slow_data")
    phone = env.service_task.scenario.known_info["phone_number"][0]
    obs, *_ = env.step("Hi! What's the mobile number on the account, and your full name?")
    assert phone in obs
    obs, *_ = env.step(json.dumps({"tool": "get_customer_by_phone", "arguments": {"phone_number": phone}}))
    assert '"full_name"' in obs
    obs, *_ = env.step("Can you open your settings and tell me what you see in the network status?")
    assert "network mode preference" in obs
    fixes = []
    if "data saver is on" in obs:
        fixes.append("switch data saver off")
    if "preference is 2G" in obs or "preference is 3G" in obs:
        fixes.append("change the preferred network type to 5G")
    obs, _, terminated, _, info = env.step("OK, please " + " and then ".join(fixes) + ", then run a speed test.")
    assert "rated good" in obs or "rated excellent" in obs
    obs, _, terminated, _, info = env.step("Great, that should be it!")
    assert terminated and info["success"] and STOP in obs


def test_the_env_passes_the_contract_checker() -> None:
    report = check_env(ENV_ID)
    assert "seeded_determinism" in report.checks and "pickle_roundtrip" in report.checks
