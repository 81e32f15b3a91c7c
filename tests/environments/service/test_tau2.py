"""The tau2-bench loader on a small fixture written in tau2-bench's format (our own data, not tau2-bench's)."""

from __future__ import annotations

import json
import pickle
import shutil
import warnings
from pathlib import Path

import pytest
from envgym.environments.service.core import ToolCall, ToolError, World, grade
from envgym.environments.service.env import ServiceEnv
from envgym.environments.service.tau2 import (
    Tau2AirlineDomain,
    Tau2RetailDomain,
    calculate,
    first_person,
    load_tau2,
    parse_known_info,
    parse_unknown_info,
)
from envgym.environments.service.user import STOP

from envgym.errors import ConfigError, NotAvailableError
from envgym.testing import check_env

FIXTURE = Path(__file__).parent / "fixtures" / "tau2"


def load(split: str | None = None) -> Tau2RetailDomain:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        domain = load_tau2(FIXTURE, "retail", split=split)
    assert isinstance(domain, Tau2RetailDomain)
    return domain


def call(tool: str, **arguments: object) -> str:
    return json.dumps({"tool": tool, "arguments": arguments})


def test_loading_keeps_order_splits_and_warns_about_ungraded_criteria() -> None:
    with pytest.warns(
        UserWarning, match=r"1 of 6 tasks grade NL_ASSERTION.*dropped from their reward basis \(tasks 0\)"
    ):
        domain = load_tau2(FIXTURE, "retail")
    assert domain.name == "tau2-retail" and domain.task_ids() == ["0", "1", "2", "3", "4", "5"]
    assert domain.policy.startswith("# Store support policy (test fixture)")
    bases = [t.reward_basis for t in domain.tasks]
    assert bases == [("DB",), ("DB", "COMMUNICATE"), ("DB",), ("DB", "COMMUNICATE"), ("DB", "ACTION"), ("ACTION",)]
    first = domain.tasks[0]
    assert first.extra["not_graded"] == ["NL_ASSERTION"] and first.extra["nl_assertions"]
    assert load("train").task_ids() == ["0", "1", "2", "4"] and load("test").task_ids() == ["3", "5"]
    assert {t.name for t in domain.tools()} >= {
        "cancel_pending_order",
        "get_item_details",
        "modify_pending_order_payment",
        "transfer_to_human_agents",
    }


def test_bad_paths_domains_and_splits_say_what_to_do(tmp_path: Path) -> None:
    with pytest.raises(NotAvailableError, match="clone https://github.com/sierra-research/tau2-bench"):
        load_tau2(tmp_path, "retail")
    with pytest.raises(ConfigError, match="one of retail, airline"):
        load_tau2(FIXTURE, "telecom")
    with pytest.raises(ConfigError, match="split must be one of base, test, train, got 'dev'"):
        load_tau2(FIXTURE, "retail", split="dev")
    with pytest.raises(NotAvailableError, match="missing db.json, policy.md, tasks.json"):
        load_tau2(tmp_path, "airline")


def test_scenarios_are_parsed_into_keyword_facts() -> None:
    facts = parse_known_info("You are Yusuf Rossi in zip code 19122.")
    assert facts["name"][0] == "Yusuf Rossi" and facts["zip_code"][0] == "19122" and "zip" in facts["zip_code"][1]
    facts = parse_known_info("You are mei_kovacs_8020 living in zipcode 28236.")
    assert facts["user_id"][0] == "mei_kovacs_8020" and facts["name"][0] == "Mei Kovacs"
    facts = parse_known_info("You name is Ada Moss and your email is ada.moss12@example.com.")
    assert facts["name"][0] == "Ada Moss" and facts["email"][0] == "ada.moss12@example.com" and "zip_code" not in facts
    facts = parse_known_info(
        "You are Kim Park.\n\nYour user id is kim_park_1200. \n\nYour confirmation number is 7QX2LM."
    )
    assert facts["confirmation_number"] == ("7QX2LM", ("reservation", "confirmation", "booking"))
    assert parse_known_info("orders #W1000001 and W1000002")["order_ids"][0] == "#W1000001 and #W1000002"
    assert parse_unknown_info("You do not remember your email address.") == ("email",)
    assert parse_unknown_info("You do not know the flight number of your May 10 flight") == ("flight number",)
    assert parse_unknown_info(None) == ()
    assert first_person("You received your order and you'd like the agent to call you, if you can.") == (
        "I received my order and I'd like the agent to call me, if I can."
    )
    scenario = load().tasks[0].scenario
    assert scenario.reason_for_call == "I want to cancel my order #W4000101 because I no longer need it."
    assert scenario.unknown_info == ("email",) and "email" not in scenario.known_info
    assert "Reason for the call: You want to cancel" in scenario.instructions
    assert "Task instructions: You are short and to the point." in scenario.instructions


def test_every_fixture_task_is_solved_by_its_gold_actions() -> None:
    domain = load()
    for task in domain.tasks:
        start = domain.base_world()
        final = domain.expected_world(start, task)
        components = grade(domain, task, start, final, list(task.communicate_info), list(task.gold_actions), [])
        assert components["task_reward"] == 1.0, (task.kind, components)
    # and doing nothing fails every task that changes the database or must tell something
    for task in domain.tasks[:5]:
        start = domain.base_world()
        components = grade(domain, task, start, start.copy(), [], [], [])
        assert components["task_reward"] == 0.0, task.kind


def test_action_basis_matches_compare_args_like_tau2() -> None:
    domain = load()
    payment, transfer = domain.tasks[4], domain.tasks[5]
    start = domain.base_world()
    final = domain.expected_world(start, payment)
    # compare_args ["email"]: the lookup must be by that email; the other actions by every argument
    calls = list(payment.gold_actions)
    assert grade(domain, payment, start, final, [], calls, [])["task_reward"] == 1.0
    assert grade(domain, payment, start, final, [], calls[1:], [])["action_reward"] == 0.0
    # compare_args []: the tool name alone
    other = type(transfer.gold_actions[0])("transfer_to_human_agents", {"summary": "anything at all"})
    assert grade(domain, transfer, start, start.copy(), [], [other], [])["task_reward"] == 1.0
    assert grade(domain, transfer, start, start.copy(), [], [], [])["task_reward"] == 0.0


def test_failing_gold_actions_are_left_out_with_a_warning(tmp_path: Path) -> None:
    folder = tmp_path / "retail"
    shutil.copytree(FIXTURE / "retail", folder)
    tasks = json.loads((folder / "tasks.json").read_text())
    tasks[3]["evaluation_criteria"]["actions"].append(
        {"action_id": "3_9", "name": "get_product_details", "arguments": {"product_id": "999"}}
    )
    (folder / "tasks.json").write_text(json.dumps(tasks))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        domain = load_tau2(tmp_path, "retail")
    messages = [str(w.message) for w in caught]
    assert any("gold actions of 1 tasks fail" in m and "task 3: get_product_details: no product" in m for m in messages)
    assert [c.name for c in domain.tasks[3].gold_actions] == ["find_user_id_by_email", "get_order_details"]


def test_seed_i_plays_task_i_whatever_the_split() -> None:
    domain = load()
    for seed, kind in ((0, "task_0"), (4, "task_4"), (7, "task_1")):
        for split in ("train", "test"):
            env = ServiceEnv(domain=domain, split=split)
            _, info = env.reset(seed=seed)
            assert info["task"]["kind"] == kind and info["task"]["domain"] == "tau2-retail"
    obs, info = ServiceEnv(domain=domain).reset(seed=2)
    assert "# Store support policy (test fixture)" in obs and '"name": "modify_pending_order_payment"' in obs
    assert obs.endswith(
        "User: I want the water bottle in my pending order #W4000301 to become the 1000ml steel one, "
        "and I pay any difference with my credit card."
    )
    assert info["user_reply"] == obs.rsplit("User: ", 1)[1]


def test_a_scripted_conversation_solves_a_task() -> None:
    env = ServiceEnv(domain=load())
    env.reset(seed=0)
    obs, *_ = env.step("I can help. What is your email address?")
    assert obs == "User: Sorry, I don't know my email."
    obs, *_ = env.step("Then please tell me your name and zip code.")
    assert obs == "User: My name is Nora Quinn. My zip code is 30412."
    obs, *_ = env.step(call("find_user_id_by_name_zip", first_name="Nora", last_name="Quinn", zip="30412"))
    assert obs == 'Tool result (find_user_id_by_name_zip): "nora_quinn_2281"'
    obs, *_ = env.step(call("get_order_details", order_id="#W4000101"))
    assert '"status": "pending"' in obs
    obs, reward, terminated, _, info = env.step(
        "Order #W4000101 (desk lamp, water bottle, 63.90) is pending. Shall I cancel it as no longer needed?"
    )
    assert obs == "User: Yes, please go ahead." and not terminated
    env.step(call("cancel_pending_order", order_id="#W4000101", reason="no longer needed"))
    obs, reward, terminated, _, info = env.step(
        "It is cancelled; 63.90 goes back to your card in 5 to 7 business days."
    )
    assert STOP in obs and terminated and info["success"] and reward == 1.0
    assert info["reward_components"]["db_reward"] == 1.0 and info["reward_components"]["policy_reward"] == 1.0


def test_a_policy_breaking_write_fails_the_database_check() -> None:
    env = ServiceEnv(domain=load())
    env.reset(seed=3)  # the user asks to cancel a processed order: the agent must refuse
    env.step(call("cancel_pending_order", order_id="#W4000201", reason="no longer needed"))
    *_, info = env.step("done")
    comps = info["reward_components"]
    assert not info["success"] and comps["db_reward"] == 0.0 and comps["policy_reward"] == 0.0
    env.reset(seed=3)
    obs, *_ = env.step("Your email, please?")
    env.step(call("find_user_id_by_email", email="omar.field7@example.com"))
    env.step(call("get_order_details", order_id="#W4000201"))
    obs, reward, terminated, _, info = env.step(
        "Sorry, order #W4000201 is processed, so it can no longer be cancelled."
    )
    assert STOP in obs and terminated and info["success"] and reward == 1.0


def test_the_env_over_a_loaded_domain_keeps_the_contract() -> None:
    domain = load()
    env = ServiceEnv(domain=domain)
    env.reset(seed=1)
    clone = pickle.loads(pickle.dumps(env))
    action = call("get_item_details", item_id="5100000012")
    assert clone.step(action)[0] == env.step(action)[0]
    report = check_env(ServiceEnv(domain=domain), seeds=(0, 1, 5), steps=12)
    assert "pickle_roundtrip" in report.checks


# --------------------------------------------------------------------------- airline
def load_airline(split: str | None = None) -> Tau2AirlineDomain:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        domain = load_tau2(FIXTURE, "airline", split=split)
    assert isinstance(domain, Tau2AirlineDomain)
    return domain


def test_airline_loads_with_tau2_tool_names_and_splits() -> None:
    with pytest.warns(UserWarning, match=r"airline: 1 of 6 tasks grade NL_ASSERTION.*\(tasks 3\)"):
        domain = load_tau2(FIXTURE, "airline")
    assert domain.name == "tau2-airline" and domain.task_ids() == ["0", "1", "2", "3", "4", "5"]
    assert domain.policy.startswith("# Airline support policy (test fixture)")
    assert {t.name for t in domain.tools()} == {
        "book_reservation", "calculate", "cancel_reservation", "get_flight_status", "get_reservation_details",
        "get_user_details", "list_all_airports", "search_direct_flight", "search_onestop_flight", "send_certificate",
        "transfer_to_human_agents", "update_reservation_baggages", "update_reservation_flights",
        "update_reservation_passengers",
    }  # fmt: skip
    assert load_airline("train").task_ids() == ["0", "1", "2", "4"] and load_airline("test").task_ids() == ["3", "5"]


def test_every_airline_fixture_task_is_solved_by_its_gold_actions_and_not_by_nothing() -> None:
    domain = load_airline()
    for task in domain.tasks:
        start = domain.base_world()
        final = domain.expected_world(start, task)
        components = grade(domain, task, start, final, list(task.communicate_info), list(task.gold_actions), [])
        assert components["task_reward"] == 1.0, (task.kind, components)
        changes = final.state_hash() != start.state_hash()
        nothing = grade(domain, task, start, start.copy(), [], [], [])["task_reward"]
        assert (changes, nothing) == ((True, 0.0) if task.kind != "task_3" else (False, 1.0)), task.kind


def run(domain: Tau2AirlineDomain, world: World, name: str, **arguments: object) -> object:
    return domain.run(world, ToolCall(name, arguments))


def test_airline_tools_follow_tau2_semantics() -> None:
    domain = load_airline()
    world = domain.base_world()
    assert run(domain, world, "get_flight_status", flight_number="HAT105", date="2024-05-16") == "delayed"
    assert [a["iata"] for a in run(domain, world, "list_all_airports")] == ["JFK", "ORD", "SEA"]  # type: ignore[union-attr]
    direct = run(domain, world, "search_direct_flight", origin="JFK", destination="SEA", date="2024-05-21")
    assert direct == []  # HAT103 is cancelled that day
    pairs = run(domain, world, "search_onestop_flight", origin="JFK", destination="SEA", date="2024-05-20")
    assert [[f["flight_number"] for f in p] for p in pairs] == [["HAT101", "HAT102"]]  # type: ignore[union-attr]
    # booking: price + $30 insurance + $50 per non-free bag; a certificate is used up, the gift card debited
    lena = "lena_park_4821"
    booking = {
        "user_id": lena, "origin": "JFK", "destination": "ORD", "flight_type": "one_way", "cabin": "business",
        "flights": [{"flight_number": "HAT101", "date": "2024-05-20"}],
        "passengers": [{"first_name": "Lena", "last_name": "Park", "dob": "1985-03-02"}],
        "total_baggages": 2, "nonfree_baggages": 1, "insurance": "yes",
    }  # fmt: skip
    with pytest.raises(ToolError, match=r"add up to \$600; the reservation costs \$690"):
        run(
            domain,
            world,
            "book_reservation",
            payment_methods=[{"payment_id": "credit_card_4100001", "amount": 600}],
            **booking,
        )
    pay = [
        {"payment_id": "certificate_4100003", "amount": 100},
        {"payment_id": "gift_card_4100002", "amount": 200},
        {"payment_id": "credit_card_4100001", "amount": 390},
    ]
    res = run(domain, world, "book_reservation", payment_methods=pay, **booking)
    assert res["reservation_id"] == "HATHAT" and res["status"] is None  # type: ignore[index]
    assert res["created_at"] == "2024-05-15T15:00:00" and res["flights"][0]["price"] == 610  # type: ignore[index]
    methods = world.db["users"][lena]["payment_methods"]
    assert "certificate_4100003" not in methods and methods["gift_card_4100002"]["amount"] == 0
    assert world.db["flights"]["HAT101"]["dates"]["2024-05-20"]["available_seats"]["business"] == 3
    assert world.db["users"][lena]["reservations"] == ["AB12CD", "HATHAT"]
    # cancelling refunds every payment and releases no seat (as tau2-bench)
    cancelled = run(domain, world, "cancel_reservation", reservation_id="HATHAT")
    assert cancelled["status"] == "cancelled" and [p["amount"] for p in cancelled["payment_history"]] == [  # type: ignore[index]
        100,
        200,
        390,
        -100,
        -200,
        -390,
    ]
    assert world.db["flights"]["HAT101"]["dates"]["2024-05-20"]["available_seats"]["business"] == 3
    with pytest.raises(ToolError, match="already cancelled"):
        run(domain, world, "cancel_reservation", reservation_id="HATHAT")
    # a flight change with cabin: the refund of the difference is a negative payment
    changed = run(
        domain, world, "update_reservation_flights", reservation_id="AB12CD", cabin="economy",
        flights=[{"flight_number": "HAT101", "date": "2024-05-20"}, {"flight_number": "HAT102", "date": "2024-05-20"}],
        payment_id="credit_card_4100001",
    )  # fmt: skip
    assert changed["payment_history"][-1] == {"payment_id": "credit_card_4100001", "amount": -30}  # type: ignore[index]
    with pytest.raises(ToolError, match="cancelled: only available flights"):
        run(domain, world, "update_reservation_flights", reservation_id="AB12CD", cabin="economy",
            flights=[{"flight_number": "HAT103", "date": "2024-05-21"}], payment_id="credit_card_4100001")  # fmt: skip
    with pytest.raises(ToolError, match="no payment method 'certificate_4100003'"):  # used up by the booking
        run(domain, world, "update_reservation_baggages", reservation_id="AB12CD", total_baggages=5,
            nonfree_baggages=2, payment_id="certificate_4100003")  # fmt: skip
    assert run(domain, world, "send_certificate", user_id=lena, amount=50) == (
        "Certificate certificate_3221322 added to user lena_park_4821 with amount 50."
    )
    with pytest.raises(ToolError, match="travel certificate"):
        run(domain, world, "update_reservation_baggages", reservation_id="AB12CD", total_baggages=5,
            nonfree_baggages=2, payment_id="certificate_3221322")  # fmt: skip
    with pytest.raises(ToolError, match="number cannot change"):
        run(domain, world, "update_reservation_passengers", reservation_id="AB12CD", passengers=[])
    assert run(domain, world, "transfer_to_human_agents", summary="wants a human") == "Transfer successful"


def test_calculate_is_arithmetic_only() -> None:
    world = World({})
    assert calculate(world, "(320 - 150) * 2 / 4") == "85.0"
    assert calculate(world, "-3 + 10 / 3") == "0.33"
    for bad in ("__import__('os')", "2 ** 10", "", "1 +", "1 / 0", "9" * 300):
        with pytest.raises(ToolError):
            calculate(world, bad)


def test_a_scripted_conversation_solves_an_airline_task() -> None:
    env = ServiceEnv(domain=load_airline())
    obs, info = env.reset(seed=1)
    assert info["task"]["domain"] == "tau2-airline"
    assert obs.endswith("User: I want to cancel my reservation JK56LM because my plans changed.")
    obs, *_ = env.step("I can help. What is your user id?")
    assert "omar_reed_7310" in obs
    env.step(call("get_user_details", user_id="omar_reed_7310"))
    obs, *_ = env.step(call("get_reservation_details", reservation_id="JK56LM"))
    assert '"cabin": "business"' in obs
    obs, reward, terminated, _, info = env.step(
        "JK56LM is in business class, so I can cancel it with a refund of 600 to your card. Shall I go ahead?"
    )
    assert obs == "User: Yes, please go ahead." and not terminated
    env.step(call("cancel_reservation", reservation_id="JK56LM"))
    obs, reward, terminated, _, info = env.step("It is cancelled and 600 goes back to your mastercard.")
    assert STOP in obs and terminated and info["success"] and reward == 1.0


def test_the_env_over_a_loaded_airline_domain_keeps_the_contract() -> None:
    report = check_env(ServiceEnv(domain=load_airline()), seeds=(0, 1, 5), steps=12)
    assert "pickle_roundtrip" in report.checks
