"""The retail domain: tools on a hand-made store, policy checks, tasks solved by their gold calls,
the scripted user, the oracle, splits and determinism, and the env through the contract checker."""

from __future__ import annotations

import json
import random
from collections import Counter
from typing import Any

import pytest
from envgym.agents.solvers.service_retail import Solver
from envgym.environments.service.core import ToolCall, ToolError, World, grade
from envgym.environments.service.env import ServiceEnv
from envgym.environments.service.retail.domain import RetailDomain
from envgym.environments.service.retail.tasks import KINDS, format_address
from envgym.environments.service.retail.tools import POLICY
from envgym.environments.service.user import STOP

from envgym.testing import check_env

DOMAIN = RetailDomain()
ADDRESS = {
    "address1": "1 Oak Street",
    "address2": "Apt 2",
    "city": "Austin",
    "state": "TX",
    "country": "USA",
    "zip": "78701",
}
NEW_ADDRESS = {
    "address1": "9 Elm Drive",
    "address2": "",
    "city": "Denver",
    "state": "CO",
    "country": "USA",
    "zip": "80202",
}


def _item(name: str, pid: str, iid: str, price: float, **options: str) -> dict[str, Any]:
    return {"name": name, "product_id": pid, "item_id": iid, "price": price, "options": options}


def _order(oid: str, status: str, items: list[dict[str, Any]], payer: str) -> dict[str, Any]:
    total = round(sum(i["price"] for i in items), 2)
    return {
        "order_id": oid,
        "user_id": "ann_lee_1000",
        "status": status,
        "address": dict(ADDRESS),
        "items": items,
        "payment_history": [{"transaction_type": "payment", "amount": total, "payment_method_id": payer}],
        "fulfillments": [],
    }


def store() -> World:
    """One user, two products, an order in each status."""
    lamp = {
        "L1": {"item_id": "L1", "options": {"colour": "black"}, "available": True, "price": 40.0},
        "L2": {"item_id": "L2", "options": {"colour": "white"}, "available": True, "price": 45.0},
        "L3": {"item_id": "L3", "options": {"colour": "silver"}, "available": False, "price": 38.0},
    }
    mat = {
        "M1": {"item_id": "M1", "options": {"thickness": "4mm"}, "available": True, "price": 30.0},
        "M2": {"item_id": "M2", "options": {"thickness": "6mm"}, "available": True, "price": 35.5},
    }
    l1, m1 = _item("Desk Lamp", "P1", "L1", 40.0, colour="black"), _item("Yoga Mat", "P2", "M1", 30.0, thickness="4mm")
    orders = {
        "#W0000001": _order("#W0000001", "pending", [dict(l1), dict(m1)], "credit_card_1"),
        "#W0000002": _order("#W0000002", "delivered", [dict(l1), dict(m1)], "credit_card_1"),
        "#W0000003": _order("#W0000003", "processed", [dict(m1)], "gift_card_1"),
        "#W0000004": _order("#W0000004", "cancelled", [dict(l1)], "credit_card_1"),
        "#W0000005": _order("#W0000005", "pending", [dict(m1)], "gift_card_1"),
    }
    user = {
        "user_id": "ann_lee_1000",
        "name": {"first_name": "Ann", "last_name": "Lee"},
        "email": "ann.lee@example.com",
        "address": dict(ADDRESS),
        "payment_methods": {
            "credit_card_1": {"id": "credit_card_1", "source": "credit_card", "brand": "Visa", "last_four": "1111"},
            "credit_card_2": {"id": "credit_card_2", "source": "credit_card", "brand": "Amex", "last_four": "2222"},
            "gift_card_1": {"id": "gift_card_1", "source": "gift_card", "balance": 20.0},
        },
        "orders": sorted(orders),
    }
    products = {
        "P1": {"product_id": "P1", "name": "Desk Lamp", "variants": lamp},
        "P2": {"product_id": "P2", "name": "Yoga Mat", "variants": mat},
    }
    return World({"users": {"ann_lee_1000": user}, "products": products, "orders": orders})


def call(world: World, name: str, **arguments: Any) -> Any:
    return DOMAIN.run(world, ToolCall(name, arguments))


def write(world: World, name: str, **arguments: Any) -> tuple[Any, list[str]]:
    """Run a write call and return its result with the policy rules it broke."""
    before = world.copy()
    result = call(world, name, **arguments)
    return result, DOMAIN.violations(before, ToolCall(name, arguments), result)


# --------------------------------------------------------------------------- tools
def test_lookup_tools_find_users_orders_and_products() -> None:
    w = store()
    assert call(w, "find_user_id_by_email", email=" Ann.Lee@example.com") == "ann_lee_1000"
    assert call(w, "find_user_id_by_name_zip", first_name="ann", last_name="LEE", zip="78701") == "ann_lee_1000"
    assert call(w, "get_user_details", user_id="ann_lee_1000")["payment_methods"]["gift_card_1"]["balance"] == 20.0
    assert call(w, "get_order_details", order_id="#W0000002")["status"] == "delivered"
    assert set(call(w, "get_product_details", product_id="P1")["variants"]) == {"L1", "L2", "L3"}
    assert call(w, "list_all_product_types") == {"Desk Lamp": "P1", "Yoga Mat": "P2"}
    assert call(w, "calculate", expression="(40 + 35.5) * 2 - 1/4") == 150.75
    for name, args, message in (
        ("find_user_id_by_email", {"email": "nobody@example.com"}, "no user with email"),
        (
            "find_user_id_by_name_zip",
            {"first_name": "Ann", "last_name": "Lee", "zip": "00000"},
            "no user named Ann Lee",
        ),
        ("get_user_details", {"user_id": "ann"}, "no user with id 'ann'"),
        ("get_order_details", {"order_id": "W0000001"}, "order ids start with '#W'"),
        ("get_product_details", {"product_id": "P9"}, "no product with id 'P9'"),
        ("calculate", {"expression": "__import__('os')"}, "only numbers"),
        ("calculate", {"expression": "1/0"}, "division by zero"),
        ("calculate", {"expression": "2 +"}, "cannot read"),
    ):
        with pytest.raises(ToolError, match=message):
            call(w, name, **args)


def test_cancel_refunds_every_payment_and_gift_cards_at_once() -> None:
    w = store()
    order, broken = write(w, "cancel_pending_order", order_id="#W0000005", reason="ordered by mistake")
    assert broken == [] and order["status"] == "cancelled" and order["cancel_reason"] == "ordered by mistake"
    assert order["payment_history"][-1] == {
        "transaction_type": "refund",
        "amount": 30.0,
        "payment_method_id": "gift_card_1",
    }
    assert w.db["users"]["ann_lee_1000"]["payment_methods"]["gift_card_1"]["balance"] == 50.0
    with pytest.raises(ToolError, match="already cancelled|is cancelled"):
        call(w, "cancel_pending_order", order_id="#W0000005", reason="no longer needed")
    with pytest.raises(ToolError, match="expected one of 'no longer needed', 'ordered by mistake'"):
        call(w, "cancel_pending_order", order_id="#W0000001", reason="too expensive")


def test_modify_items_charges_the_difference_and_marks_the_order() -> None:
    w = store()
    order, broken = write(
        w,
        "modify_pending_order_items",
        order_id="#W0000001",
        item_ids=["M1", "L1"],
        new_item_ids=["M2", "L2"],
        payment_method_id="gift_card_1",
    )
    assert broken == [] and order["status"] == "pending (item modified)"
    assert [i["item_id"] for i in order["items"]] == ["L2", "M2"] and order["items"][1]["price"] == 35.5
    assert order["payment_history"][-1] == {
        "transaction_type": "payment",
        "amount": 10.5,
        "payment_method_id": "gift_card_1",
    }
    assert w.db["users"]["ann_lee_1000"]["payment_methods"]["gift_card_1"]["balance"] == 9.5
    _, broken = write(
        w,
        "modify_pending_order_items",
        order_id="#W0000001",
        item_ids=["L2"],
        new_item_ids=["L1"],
        payment_method_id="credit_card_1",
    )
    assert broken and "only once" in broken[0]  # a second modification breaks the policy (the tool allows it)
    w = store()
    for item_ids, new_ids, method, message in (
        (["L1"], ["M2"], "credit_card_1", "is a Yoga Mat, not a Desk Lamp"),
        (["L1"], ["L3"], "credit_card_1", "out of stock"),
        (["L1"], ["L1"], "credit_card_1", "already in the order"),
        (["L1", "M1"], ["L2"], "credit_card_1", "give one new id per item"),
        (["X1"], ["L2"], "credit_card_1", "not in order #W0000001"),
        (["L1", "L1"], ["L2", "L2"], "credit_card_1", "listed twice"),
        ([], [], "credit_card_1", "item_ids is empty"),
        (["L1"], ["L9"], "credit_card_1", "no item with id 'L9'"),
        (["L1"], ["L2"], "paypal_9", "has no payment method 'paypal_9'"),
    ):
        with pytest.raises(ToolError, match=message):
            call(
                w,
                "modify_pending_order_items",
                order_id="#W0000001",
                item_ids=item_ids,
                new_item_ids=new_ids,
                payment_method_id=method,
            )
    w.db["users"]["ann_lee_1000"]["payment_methods"]["gift_card_1"]["balance"] = 4.0
    with pytest.raises(ToolError, match="holds 4.00, less than the 5.00"):
        call(
            w,
            "modify_pending_order_items",
            order_id="#W0000001",
            item_ids=["L1"],
            new_item_ids=["L2"],
            payment_method_id="gift_card_1",
        )
    assert w.db["orders"] == store().db["orders"]  # refused calls change nothing


def test_cheaper_variant_refunds_the_difference() -> None:
    w = store()
    w.db["orders"]["#W0000001"]["items"][0].update(item_id="L2", price=45.0)
    order = call(
        w,
        "modify_pending_order_items",
        order_id="#W0000001",
        item_ids=["L2"],
        new_item_ids=["L1"],
        payment_method_id="credit_card_1",
    )
    assert order["payment_history"][-1] == {
        "transaction_type": "refund",
        "amount": 5.0,
        "payment_method_id": "credit_card_1",
    }


def test_return_and_exchange_requests() -> None:
    w = store()
    order, broken = write(
        w, "return_delivered_order_items", order_id="#W0000002", item_ids=["M1", "L1"], payment_method_id="gift_card_1"
    )
    assert broken == [] and order["status"] == "return requested"
    assert order["return_items"] == ["L1", "M1"] and order["return_payment_method_id"] == "gift_card_1"
    with pytest.raises(ToolError, match="is cancelled"):
        call(
            w, "return_delivered_order_items", order_id="#W0000004", item_ids=["L1"], payment_method_id="credit_card_1"
        )
    w = store()
    order, broken = write(
        w,
        "exchange_delivered_order_items",
        order_id="#W0000002",
        item_ids=["M1", "L1"],
        new_item_ids=["M2", "L2"],
        payment_method_id="credit_card_2",
    )
    assert broken == [] and order["status"] == "exchange requested"
    assert order["exchange_items"] == ["L1", "M1"] and order["exchange_new_items"] == ["L2", "M2"]
    assert order["exchange_price_difference"] == 10.5 and order["exchange_payment_method_id"] == "credit_card_2"
    # Any order of the same pairs reaches the same state (the grader compares hashes).
    other = store()
    call(
        other,
        "exchange_delivered_order_items",
        order_id="#W0000002",
        item_ids=["L1", "M1"],
        new_item_ids=["L2", "M2"],
        payment_method_id="credit_card_2",
    )
    assert other.state_hash() == w.state_hash()


def test_address_changes() -> None:
    w = store()
    order, broken = write(w, "modify_pending_order_address", order_id="#W0000001", **NEW_ADDRESS)
    assert broken == [] and order["address"] == NEW_ADDRESS
    user, broken = write(w, "modify_user_address", user_id="ann_lee_1000", **NEW_ADDRESS)
    assert broken == [] and user["address"] == NEW_ADDRESS
    with pytest.raises(ToolError, match="needs city"):
        call(w, "modify_user_address", user_id="ann_lee_1000", **{**NEW_ADDRESS, "city": " "})
    with pytest.raises(ToolError, match="missing required argument"):
        call(w, "modify_user_address", user_id="ann_lee_1000", address1="x")


# --------------------------------------------------------------------------- policy
@pytest.mark.parametrize(
    ("name", "arguments", "rule"),
    [
        (
            "cancel_pending_order",
            {"order_id": "#W0000002", "reason": "no longer needed"},
            "only pending orders can be cancelled",
        ),
        ("cancel_pending_order", {"order_id": "#W0000003", "reason": "no longer needed"}, "status is 'processed'"),
        ("modify_pending_order_address", {"order_id": "#W0000002", **NEW_ADDRESS}, "only pending orders can change"),
        (
            "modify_pending_order_items",
            {"order_id": "#W0000002", "item_ids": ["L1"], "new_item_ids": ["L2"], "payment_method_id": "credit_card_1"},
            "only pending orders can be modified",
        ),
        (
            "return_delivered_order_items",
            {"order_id": "#W0000001", "item_ids": ["L1"], "payment_method_id": "credit_card_1"},
            "only delivered orders",
        ),
        (
            "exchange_delivered_order_items",
            {"order_id": "#W0000003", "item_ids": ["M1"], "new_item_ids": ["M2"], "payment_method_id": "credit_card_1"},
            "only delivered orders",
        ),
        (
            "return_delivered_order_items",
            {"order_id": "#W0000002", "item_ids": ["L1"], "payment_method_id": "credit_card_2"},
            "refunds go only to the original payment method or a gift card",
        ),
    ],
)
def test_writes_that_break_the_policy_are_flagged(name: str, arguments: dict[str, Any], rule: str) -> None:
    _, broken = write(store(), name, **arguments)
    assert len(broken) == 1 and rule in broken[0]


def test_policy_names_the_rules_the_tools_do_not_enforce() -> None:
    for rule in (
        "authenticate",
        "explicit yes",
        "Only orders whose status is exactly `pending` can be cancelled",
        "original payment method or to a gift card",
        "modified only once",
        "total refund",
        "naming the order's current status",
    ):
        assert rule in " ".join(POLICY.split()), rule
    card = RetailDomain.__doc__ or ""
    for kind in KINDS:
        assert f"``{kind}``" in card, kind
    schemas = {t.name: t.schema() for t in DOMAIN.tools()}
    assert schemas["cancel_pending_order"]["function"]["parameters"]["properties"]["reason"]["enum"] == [
        "no longer needed",
        "ordered by mistake",
    ]
    assert {t.name for t in DOMAIN.tools() if t.writes} == {
        "cancel_pending_order",
        "modify_pending_order_address",
        "modify_pending_order_items",
        "return_delivered_order_items",
        "exchange_delivered_order_items",
        "modify_user_address",
    }


# --------------------------------------------------------------------------- tasks
def _replay(env: ServiceEnv) -> dict[str, float]:
    """Grade the episode's task as if an agent made exactly its gold calls and said its information."""
    task, start = env.service_task, env.start
    world, broken = start.copy(), []
    for c in task.gold_actions:
        before = world.copy()
        result = DOMAIN.run(world, c)
        if DOMAIN.tool_map()[c.name].writes:
            broken += DOMAIN.violations(before, c, result)
    return grade(DOMAIN, task, start, world, list(task.communicate_info), list(task.gold_actions), broken)


@pytest.mark.slow
def test_every_task_is_solved_by_its_gold_calls() -> None:
    kinds: Counter[str] = Counter()
    for split in ("train", "test"):
        env = ServiceEnv(domain=DOMAIN, split=split)
        for seed in range(200):
            env.reset(seed=seed)
            components = _replay(env)
            assert components["task_reward"] == 1.0, (split, seed, env.service_task.kind, components)
            kinds[env.service_task.kind] += 1
    assert set(kinds) == set(KINDS), set(KINDS) - set(kinds)
    assert min(kinds.values()) >= 8, kinds


def _seed_of(kind: str, split: str = "train", pred: Any = None) -> tuple[ServiceEnv, str]:
    env = ServiceEnv(domain="retail", split=split)
    for seed in range(500):
        obs, _ = env.reset(seed=seed)
        if env.service_task.kind == kind and (pred is None or pred(env.service_task)):
            return env, obs
    raise AssertionError(kind)


def test_refusal_and_declined_tasks_keep_the_database_and_grade_a_wrong_write() -> None:
    env, _ = _seed_of("refuse_cancel")
    task = env.service_task
    assert not any(DOMAIN.tool_map()[c.name].writes for c in task.gold_actions)
    assert task.communicate_info[0] in ("processed", "delivered")
    oid = task.forbidden[0].arguments["order_id"]
    env.step(json.dumps({"tool": "cancel_pending_order", "arguments": {"order_id": oid, "reason": "no longer needed"}}))
    *_, info = env.step("done")
    comps = info["reward_components"]
    assert comps["db_reward"] == comps["policy_reward"] == comps["task_reward"] == 0.0 and not info["success"]
    env, _ = _seed_of("declined_cancel")
    assert env.service_task.reward_basis == ("DB", "ACTION", "POLICY") and not env.service_task.scenario.confirm
    *_, info = env.step("done")  # nothing changed, but the order was never looked up
    assert info["reward_components"]["db_reward"] == 1.0 and info["reward_components"]["action_reward"] == 0.0
    assert not info["success"]


def test_tasks_cover_identification_and_unknown_order_ids() -> None:
    env = ServiceEnv(domain="retail")
    unknown: Counter[str] = Counter()
    for seed in range(150):
        env.reset(seed=seed)
        s = env.service_task.scenario
        assert "full name" in s.known_info and "zip code" in s.known_info
        assert "@" not in s.reason_for_call  # the user identifies only when asked
        unknown.update(s.unknown_info)
    assert unknown["email"] >= 20 and unknown["order id"] >= 10, unknown


# --------------------------------------------------------------------------- the scripted user
def test_scripted_user_answers_natural_questions_and_ends_the_call() -> None:
    env, obs = _seed_of(
        "return_items", pred=lambda t: "email" in t.scenario.known_info and "order id" in t.scenario.known_info
    )
    task = env.service_task
    write_call = task.gold_actions[-1]
    oid, items, method = (
        write_call.arguments["order_id"],
        write_call.arguments["item_ids"],
        write_call.arguments["payment_method_id"],
    )
    obs, *_ = env.step("Hello! Could you share the email on your account so I can look you up?")
    email = task.scenario.known_info["email"][0]
    assert f"My email is {email}." in obs
    obs, *_ = env.step("Thanks. What's the order number?")
    assert oid in obs
    obs, *_ = env.step("Which item(s) are you sending back, and where should your refund go?")
    assert "My request is to return" in obs or "request" not in task.scenario.known_info
    assert "My refund preference is" in obs
    obs, *_ = env.step("Let me check the weather.")
    assert obs.startswith("User: I'm not sure what you mean.") and task.scenario.reason_for_call in obs
    obs, *_ = env.step(f"To be sure: I'll return {', '.join(items)} from {oid}. Shall I go ahead?")
    assert "Yes, please go ahead." in obs and STOP not in obs
    obs, *_ = env.step(
        json.dumps(
            {
                "tool": "return_delivered_order_items",
                "arguments": {"order_id": oid, "item_ids": items, "payment_method_id": method},
            }
        )
    )
    obs, reward, terminated, _, info = env.step("All set: the return is requested.")
    assert not terminated  # the refund total was not told yet
    obs, reward, terminated, _, info = env.step(f"Your refund will be ${task.communicate_info[0]}.")
    assert STOP in obs and terminated and info["success"] and reward == 1.0


def test_declining_user_stops_only_at_the_cancellation_question() -> None:
    env, _ = _seed_of("declined_cancel")
    oid = env.service_task.forbidden[0].arguments["order_id"]
    obs, _, terminated, *_ = env.step("Do you want me to cancel an order? Which one?")
    assert not terminated and "No, please don't do that." in obs
    env.step(json.dumps({"tool": "get_order_details", "arguments": {"order_id": oid}}))
    obs, reward, terminated, _, info = env.step(f"Do you confirm: cancel order {oid}?")
    assert terminated and "No, please don't do that." in obs and STOP in obs and info["success"] and reward == 1.0


def test_address_facts_are_said_in_one_readable_line() -> None:
    env, _ = _seed_of("change_default_address", pred=lambda t: "new address" in t.scenario.known_info)
    new = env.service_task.gold_actions[-1].arguments
    obs, *_ = env.step("What is the new address?")
    expected = {k: v for k, v in new.items() if k != "user_id"}
    assert f"My new address is {format_address(expected)}." in obs


# --------------------------------------------------------------------------- the oracle, splits, the env
def play_oracle(env: ServiceEnv, seed: int) -> dict[str, Any]:
    obs, info = env.reset(seed=seed)
    solver = Solver("envgym/Service-Retail-v0", seed)
    for _ in range(40):
        obs, _, terminated, truncated, info = env.step(solver.act(obs, info))
        if terminated or truncated:
            break
    return info


@pytest.mark.parametrize("split", ["train", "test"])
def test_oracle_solves_at_least_95_percent(split: str) -> None:
    env = ServiceEnv(domain="retail", split=split)
    infos = [play_oracle(env, seed) for seed in range(30)]
    wins = sum(i["success"] for i in infos)
    assert wins >= 29, [(s, i["task"]["kind"]) for s, i in enumerate(infos) if not i["success"]]
    assert all(i["tool_errors"] == 0 for i in infos)


def test_oracle_dispatch_through_the_family_solver() -> None:
    from envgym.agents.solvers.service import Solver as FamilySolver

    env = ServiceEnv(domain="retail")
    obs, info = env.reset(seed=3)
    solver = FamilySolver("envgym/Service-Retail-v0", 3)
    for _ in range(40):
        obs, _, terminated, truncated, info = env.step(solver.act(obs, info))
        if terminated or truncated:
            break
    assert info["success"]


@pytest.mark.slow
def test_splits_are_disjoint_and_hold_hundreds_of_tasks() -> None:
    fingerprints = {}
    for split in ("train", "test"):
        env = ServiceEnv(domain="retail", split=split)
        seen = set()
        for seed in range(1000):
            env.reset(seed=seed)
            seen.add(env.service_task.fingerprint())
        fingerprints[split] = seen
        assert len(seen) >= 300, (split, len(seen))
    assert not fingerprints["train"] & fingerprints["test"]


def test_same_seed_same_task_and_world() -> None:
    a, b = ServiceEnv(domain="retail"), ServiceEnv(domain="retail")
    obs_a, _ = a.reset(seed=11)
    obs_b, _ = b.reset(seed=11)
    assert obs_a == obs_b and a.service_task.fingerprint() == b.service_task.fingerprint()
    assert a.start.state_hash() == b.start.state_hash()
    a.reset(seed=12)
    assert a.service_task.fingerprint() != b.service_task.fingerprint()
    world = DOMAIN.make_world(random.Random(5))
    assert world.copy().state_hash() == world.state_hash() and world.copy().db is not world.db
    before = world.state_hash()
    DOMAIN.make_task(world, random.Random(6))
    assert world.state_hash() == before  # drawing a task never changes the world


def test_env_passes_the_contract_checker() -> None:
    report = check_env("envgym/Service-Retail-v0")
    assert {"seeded_determinism", "bad_input_fuzz", "pickle_roundtrip"} <= set(report.checks)
