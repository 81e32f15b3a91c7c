"""The travel (airline) domain: tools on a hand-made world, policy violations, generated tasks and their
gold calls, the scripted user, the oracle, splits, determinism and the env contract."""

from __future__ import annotations

import collections
import json
from typing import Any

import pytest
from envgym.agents.solvers.service_travel import Solver, parse_policy, parse_request
from envgym.environments.service.core import ServiceTask, ToolCall, ToolError, World, grade
from envgym.environments.service.env import ServiceEnv
from envgym.environments.service.travel.domain import TravelDomain
from envgym.environments.service.travel.tasks import KINDS
from envgym.environments.service.travel.tools import POLICY
from envgym.environments.service.user import STOP

import envgym
from envgym.rollout import RandomAgent, run_episodes
from envgym.testing import check_env

ENV_ID = "envgym/Service-Travel-v0"
DOMAIN = TravelDomain()


# ----------------------------------------------------------------------------- a hand-made world
def _day(status: str, prices: tuple[int, int, int], seats: int = 9) -> dict[str, Any]:
    return {
        "status": status,
        "prices": dict(zip(("basic_economy", "economy", "business"), prices, strict=True)),
        "available_seats": {"basic_economy": seats, "economy": seats, "business": seats},
    }


def _flight(number: str, origin: str, destination: str, time: str, dates: dict[str, Any]) -> dict[str, Any]:
    return {
        "flight_number": number,
        "origin": origin,
        "destination": destination,
        "departure_time": time,
        "arrival_time": "23:00:00",
        "dates": dates,
    }


def _res(rid: str, user: str, cabin: str, segments: list[tuple[str, str, str, str, int]], pax: int, **kw: Any) -> dict:
    flights = [
        {"flight_number": n, "origin": o, "destination": d, "date": day, "price": p} for n, o, d, day, p in segments
    ]
    people = [{"first_name": f"P{i}", "last_name": "Lee", "dob": "1990-01-01"} for i in range(pax)]
    out = {
        "reservation_id": rid,
        "user_id": user,
        "origin": flights[0]["origin"],
        "destination": flights[0]["destination"],
        "flight_type": "round_trip" if len(flights) == 2 else "one_way",
        "cabin": cabin,
        "flights": flights,
        "passengers": people,
        "payment_history": [],
        "created_at": "2024-05-01 10:00:00",
        "total_baggages": 0,
        "nonfree_baggages": 0,
        "insurance": "no",
        "status": "active",
    }
    out.update(kw)
    return out


def world() -> World:
    """Ann (regular): AAA111 economy, booked long ago; BBB222 basic economy round trip booked this
    morning, insured, paid by gift card; CCC333 already flown. Bob (gold): DDD444 business on
    today's delayed flight."""
    flights = {
        "HAT001": _flight(
            "HAT001",
            "JFK",
            "LAX",
            "08:00:00",
            {
                "2024-05-14": _day("landed", (90, 200, 500)),
                "2024-05-15": _day("delayed", (90, 200, 500)),
                "2024-05-16": _day("available", (95, 210, 520)),
                "2024-05-17": _day("cancelled", (95, 210, 520)),
            },
        ),
        "HAT002": _flight(
            "HAT002",
            "JFK",
            "LAX",
            "12:00:00",
            {
                "2024-05-16": _day("available", (100, 230, 560)),
                "2024-05-17": _day("available", (80, 180, 450), seats=1),
            },
        ),
        "HAT003": _flight("HAT003", "LAX", "JFK", "09:00:00", {"2024-05-20": _day("available", (100, 220, 480))}),
    }
    users = {
        "ann_lee_1000": {
            "user_id": "ann_lee_1000",
            "name": {"first_name": "Ann", "last_name": "Lee"},
            "dob": "1990-01-01",
            "membership": "regular",
            "reservations": ["AAA111", "BBB222", "CCC333"],
            "payment_methods": {
                "credit_card_1": {"id": "credit_card_1", "source": "credit_card", "brand": "visa", "last_four": "1111"},
                "gift_card_1": {"id": "gift_card_1", "source": "gift_card", "amount": 100},
                "certificate_1": {"id": "certificate_1", "source": "certificate", "amount": 50},
            },
        },
        "bob_ray_2000": {
            "user_id": "bob_ray_2000",
            "name": {"first_name": "Bob", "last_name": "Ray"},
            "dob": "1980-02-02",
            "membership": "gold",
            "reservations": ["DDD444"],
            "payment_methods": {
                "credit_card_2": {"id": "credit_card_2", "source": "credit_card", "brand": "amex", "last_four": "2222"}
            },
        },
    }
    reservations = {
        "AAA111": _res(
            "AAA111",
            "ann_lee_1000",
            "economy",
            [("HAT001", "JFK", "LAX", "2024-05-16", 200)],
            1,
            total_baggages=1,
            payment_history=[{"payment_id": "credit_card_1", "amount": 200}],
        ),
        "BBB222": _res(
            "BBB222",
            "ann_lee_1000",
            "basic_economy",
            [("HAT002", "JFK", "LAX", "2024-05-16", 100), ("HAT003", "LAX", "JFK", "2024-05-20", 100)],
            2,
            created_at="2024-05-15 10:00:00",
            insurance="yes",
            payment_history=[{"payment_id": "gift_card_1", "amount": 400}],
        ),
        "CCC333": _res("CCC333", "ann_lee_1000", "economy", [("HAT001", "JFK", "LAX", "2024-05-14", 200)], 1),
        "DDD444": _res("DDD444", "bob_ray_2000", "business", [("HAT001", "JFK", "LAX", "2024-05-15", 500)], 2),
    }
    return World(
        {
            "airports": {"JFK": "New York", "LAX": "Los Angeles"},
            "flights": flights,
            "users": users,
            "reservations": reservations,
        }
    )


def call(w: World, name: str, **arguments: Any) -> Any:
    return DOMAIN.run(w, ToolCall(name, arguments))


def broken(w: World, name: str, **arguments: Any) -> list[str]:
    """The policy rules a (successful) write breaks on ``w``."""
    before = w.copy()
    c = ToolCall(name, arguments)
    return DOMAIN.violations(before, c, DOMAIN.run(w, c))


# ----------------------------------------------------------------------------- tools
def test_read_tools_return_copies_and_name_bad_ids() -> None:
    w = world()
    user = call(w, "get_user_details", user_id="ann_lee_1000")
    assert user["membership"] == "regular" and user["reservations"] == ["AAA111", "BBB222", "CCC333"]
    user["membership"] = "gold"
    assert w.db["users"]["ann_lee_1000"]["membership"] == "regular"
    assert call(w, "get_reservation_details", reservation_id="BBB222")["flight_type"] == "round_trip"
    flight = call(w, "get_flight_details", flight_number="HAT001", date="2024-05-15")
    assert (
        flight["status"] == "delayed" and flight["prices"]["business"] == 500 and flight["departure_time"] == "08:00:00"
    )
    with pytest.raises(ToolError, match="no user with id 'ann'"):
        call(w, "get_user_details", user_id="ann")
    with pytest.raises(ToolError, match="no reservation with id 'ZZZ999'"):
        call(w, "get_reservation_details", reservation_id="ZZZ999")
    with pytest.raises(ToolError, match="no flight number 'HAT9'"):
        call(w, "get_flight_details", flight_number="HAT9", date="2024-05-15")
    with pytest.raises(ToolError, match="dates run from 2024-05-14 to 2024-05-17"):
        call(w, "get_flight_details", flight_number="HAT001", date="2024-06-01")


def test_search_lists_only_available_flights_by_departure() -> None:
    w = world()
    assert [
        f["flight_number"] for f in call(w, "search_direct_flight", origin="JFK", destination="LAX", date="2024-05-16")
    ] == [
        "HAT001",
        "HAT002",
    ]
    assert [
        f["flight_number"] for f in call(w, "search_direct_flight", origin="JFK", destination="LAX", date="2024-05-17")
    ] == ["HAT002"]  # HAT001 is cancelled that day
    assert call(w, "search_direct_flight", origin="LAX", destination="JFK", date="2024-05-16") == []
    with pytest.raises(ToolError, match="unknown airport code"):
        call(w, "search_direct_flight", origin="XXX", destination="LAX", date="2024-05-16")


def test_cancel_refunds_to_the_original_method_and_frees_seats() -> None:
    w = world()
    out = call(w, "cancel_reservation", reservation_id="BBB222")
    assert out == {
        "reservation_id": "BBB222",
        "status": "cancelled",
        "total_refund": 400,
        "refunds": [{"payment_id": "gift_card_1", "amount": 400}],
    }
    assert w.db["users"]["ann_lee_1000"]["payment_methods"]["gift_card_1"]["amount"] == 500
    assert w.db["reservations"]["BBB222"]["payment_history"][-1] == {"payment_id": "gift_card_1", "amount": -400}
    assert w.db["flights"]["HAT002"]["dates"]["2024-05-16"]["available_seats"]["basic_economy"] == 11
    with pytest.raises(ToolError, match="BBB222 is cancelled"):
        call(w, "cancel_reservation", reservation_id="BBB222")


def test_change_flights_charges_the_difference_and_refuses_the_impossible() -> None:
    w = world()
    out = call(
        w,
        "update_reservation_flights",
        reservation_id="AAA111",
        flights=[{"flight_number": "HAT002", "date": "2024-05-17"}],
        payment_id="credit_card_1",
    )
    assert out["price_difference"] == -20  # economy 180 instead of 200: refunded
    res = w.db["reservations"]["AAA111"]
    assert res["flights"][0]["flight_number"] == "HAT002" and res["flights"][0]["price"] == 180
    assert res["payment_history"][-1] == {"payment_id": "credit_card_1", "amount": -20}
    assert w.db["flights"]["HAT002"]["dates"]["2024-05-17"]["available_seats"]["economy"] == 0
    assert w.db["flights"]["HAT001"]["dates"]["2024-05-16"]["available_seats"]["economy"] == 10
    w = world()
    for flights, pay, why in (
        ([], "credit_card_1", "give every one of them"),
        ([{"flight_number": "HAT001", "date": "2024-05-17"}], "credit_card_1", "is cancelled: only available"),
        ([{"flight_number": "HAT002", "date": "2024-05-16"}], "certificate_1", "travel certificate"),
        ([{"flight_number": "HAT002", "date": "2024-05-16"}], "credit_card_2", "has no payment method"),
    ):
        with pytest.raises(ToolError, match=why):
            call(w, "update_reservation_flights", reservation_id="AAA111", flights=flights, payment_id=pay)
    with pytest.raises(ToolError, match="1 basic_economy seat"):  # two passengers, one seat left
        call(
            w,
            "update_reservation_flights",
            reservation_id="BBB222",
            flights=[
                {"flight_number": "HAT002", "date": "2024-05-17"},
                {"flight_number": "HAT003", "date": "2024-05-20"},
            ],
            payment_id="credit_card_1",
        )
    assert w.state_hash() == world().state_hash()  # refused calls change nothing


def test_cabin_bags_passengers_and_certificates() -> None:
    w = world()
    out = call(w, "update_reservation_cabin", reservation_id="BBB222", cabin="economy", payment_id="credit_card_1")
    assert out["price_difference"] == (230 - 100 + 220 - 100) * 2
    assert [s["price"] for s in w.db["reservations"]["BBB222"]["flights"]] == [230, 220]
    with pytest.raises(ToolError, match="already in economy"):
        call(w, "update_reservation_cabin", reservation_id="BBB222", cabin="economy", payment_id="credit_card_1")
    with pytest.raises(ToolError, match=r"gift card gift_card_1 has \$100 left; \$320 is needed"):
        call(w, "update_reservation_cabin", reservation_id="AAA111", cabin="business", payment_id="gift_card_1")
    out = call(
        w,
        "update_reservation_baggages",
        reservation_id="AAA111",
        total_baggages=3,
        nonfree_baggages=2,
        payment_id="gift_card_1",
    )
    assert out["fee"] == 100 and w.db["users"]["ann_lee_1000"]["payment_methods"]["gift_card_1"]["amount"] == 0
    with pytest.raises(ToolError, match="bags can only be added"):
        call(
            w,
            "update_reservation_baggages",
            reservation_id="AAA111",
            total_baggages=1,
            nonfree_baggages=0,
            payment_id="credit_card_1",
        )
    with pytest.raises(ToolError, match="the number cannot change"):
        call(w, "update_reservation_passengers", reservation_id="AAA111", passengers=[])
    with pytest.raises(ToolError, match="dob must be YYYY-MM-DD"):
        call(
            w,
            "update_reservation_passengers",
            reservation_id="AAA111",
            passengers=[{"first_name": "A", "last_name": "B", "dob": "01/02/1990"}],
        )
    call(
        w,
        "update_reservation_passengers",
        reservation_id="AAA111",
        passengers=[{"first_name": "Anne", "last_name": "Lee", "dob": "1990-01-01"}],
    )
    assert w.db["reservations"]["AAA111"]["passengers"][0]["first_name"] == "Anne"
    assert call(w, "send_certificate", user_id="bob_ray_2000", amount=100)["payment_id"] == "certificate_issued_1"
    assert call(w, "send_certificate", user_id="bob_ray_2000", amount=100)["payment_id"] == "certificate_issued_2"
    with pytest.raises(ToolError, match="positive"):
        call(w, "send_certificate", user_id="bob_ray_2000", amount=0)


# ----------------------------------------------------------------------------- policy
def test_violations_name_the_rule_a_write_broke() -> None:
    assert broken(world(), "cancel_reservation", reservation_id="BBB222") == []  # booked this morning
    assert broken(world(), "cancel_reservation", reservation_id="DDD444") == []  # business
    assert "booked over 24 hours ago" in broken(world(), "cancel_reservation", reservation_id="AAA111")[0]
    assert "after one of its flights was flown" in broken(world(), "cancel_reservation", reservation_id="CCC333")[0]
    basic = [{"flight_number": "HAT001", "date": "2024-05-16"}, {"flight_number": "HAT003", "date": "2024-05-20"}]
    assert (
        "basic economy"
        in broken(
            world(), "update_reservation_flights", reservation_id="BBB222", flights=basic, payment_id="credit_card_1"
        )[0]
    )
    route = [{"flight_number": "HAT003", "date": "2024-05-20"}]
    assert (
        "changed JFK-LAX to LAX-JFK"
        in broken(
            world(), "update_reservation_flights", reservation_id="AAA111", flights=route, payment_id="credit_card_1"
        )[0]
    )
    assert (
        broken(
            world(),
            "update_reservation_flights",
            reservation_id="AAA111",
            flights=[{"flight_number": "HAT002", "date": "2024-05-16"}],
            payment_id="credit_card_1",
        )
        == []
    )
    with pytest.raises(ToolError, match="is landed"):  # a flown flight is landed: the tool itself refuses a new cabin
        broken(
            world(), "update_reservation_cabin", reservation_id="CCC333", cabin="business", payment_id="credit_card_1"
        )
    # regular economy: 1 free bag per passenger, so 3 bags are 2 paid ones
    assert (
        broken(
            world(),
            "update_reservation_baggages",
            reservation_id="AAA111",
            total_baggages=3,
            nonfree_baggages=2,
            payment_id="credit_card_1",
        )
        == []
    )
    assert (
        "need 2 non-free, not 1"
        in broken(
            world(),
            "update_reservation_baggages",
            reservation_id="AAA111",
            total_baggages=3,
            nonfree_baggages=1,
            payment_id="credit_card_1",
        )[0]
    )
    # Bob (gold, business, 2 passengers) on a delayed flight: $50 x 2; Ann has nothing to claim
    assert broken(world(), "send_certificate", user_id="bob_ray_2000", amount=100) == []
    assert "allows [100]" in broken(world(), "send_certificate", user_id="bob_ray_2000", amount=200)[0]
    assert "allows none" in broken(world(), "send_certificate", user_id="ann_lee_1000", amount=100)[0]


def test_policy_document_states_the_rules_the_tools_do_not_enforce() -> None:
    for rule in (
        "user id",
        "explicit confirmation",
        "within the last 24 hours",
        "Basic economy flights cannot be changed",
        "Never offer compensation",
        "not eligible",
        "$50",
        "$100 per passenger",
    ):
        assert rule in POLICY, rule
    figures = parse_policy(POLICY)
    assert figures["free_bags"]["silver"] == {"basic_economy": 1, "economy": 2, "business": 3}
    assert figures["bag_fee"] == 50 and figures["compensation"] == {"cancelled": 100, "delayed": 50}
    card = TravelDomain.__doc__ or ""
    assert all(f"``{kind}``" in card for kind in KINDS)


# ----------------------------------------------------------------------------- generated tasks
#: Seeds drawn per split, once for the module: generating a world is what tasks cost (a test task
#: takes five draws on average, four of them train tasks thrown away).
SEEDS = 400


@pytest.fixture(scope="module")
def generated() -> dict[str, list[tuple[World, ServiceTask]]]:
    """The start world and task of ``reset(seed=s)`` for each split and seed ``s < SEEDS``."""
    out: dict[str, list[tuple[World, ServiceTask]]] = {}
    for split in ("train", "test"):
        env = ServiceEnv(domain=DOMAIN, split=split)
        out[split] = []
        for seed in range(SEEDS):
            env.reset(seed=seed)
            out[split].append((env.start, env.service_task))
    return out


@pytest.mark.slow
@pytest.mark.parametrize("split", ["train", "test"])
def test_every_tasks_gold_calls_solve_it_without_breaking_policy(
    split: str, generated: dict[str, list[tuple[World, ServiceTask]]]
) -> None:
    kinds: collections.Counter[str] = collections.Counter()
    for start, task in generated[split][:200]:
        world_ = start.copy()
        violations = []
        for c in task.gold_actions:
            before = world_.copy()
            violations += DOMAIN.violations(before, c, DOMAIN.run(world_, c))
        assert violations == [], (task.kind, violations)
        comps = grade(DOMAIN, task, start, world_, list(task.communicate_info), list(task.gold_actions), [])
        assert comps["task_reward"] == 1.0, (split, task.kind, comps)
        changes = world_.state_hash() != start.state_hash()
        assert changes == (task.kind.startswith(("cancel_", "change_", "add_", "update_", "compensation_"))), task.kind
        kinds[task.kind] += 1
    assert set(kinds) == set(KINDS), sorted(set(KINDS) - set(kinds))


def test_tasks_are_deterministic_per_seed_and_split() -> None:
    a, b = ServiceEnv(domain="travel"), ServiceEnv(domain="travel")
    for seed in (0, 7, 123):
        obs_a, info_a = a.reset(seed=seed)
        obs_b, info_b = b.reset(seed=seed)
        assert obs_a == obs_b and info_a["task"] == info_b["task"]
        assert a.service_task.fingerprint() == b.service_task.fingerprint()
        assert a.start.state_hash() == b.start.state_hash()
    a.reset(seed=1)
    b.reset(seed=2)
    assert a.service_task.fingerprint() != b.service_task.fingerprint()


@pytest.mark.slow
def test_splits_are_disjoint_and_hold_hundreds_of_distinct_tasks(
    generated: dict[str, list[tuple[World, ServiceTask]]],
) -> None:
    prints = {}
    for split in ("train", "test"):
        prints[split] = {task.fingerprint() for _, task in generated[split]}
        assert len(prints[split]) >= 300, (split, len(prints[split]))
    assert not prints["train"] & prints["test"]


# ----------------------------------------------------------------------------- scripted user
def _seed_of(kind: str, split: str = "train") -> tuple[ServiceEnv, str]:
    for seed in range(300):
        env = ServiceEnv(domain="travel", split=split)
        obs, _ = env.reset(seed=seed)
        if env.service_task.kind == kind:
            return env, obs
    raise AssertionError(kind)


def test_user_answers_reasonable_phrasing_and_restates_otherwise() -> None:
    env, obs = _seed_of("refuse_cancel")
    facts = env.service_task.scenario.known_info
    assert facts["user_id"][0] not in obs  # the opening never gives the user id
    obs, *_ = env.step("Hello! May I have your User ID, please?")
    assert obs == f"User: My user id is {facts['user_id'][0]}."
    obs, *_ = env.step("Thanks. And what's the reservation number?")
    if "reservation_id" in facts:
        assert facts["reservation_id"][0] in obs
    else:
        assert "don't know my reservation id" in obs
    obs, *_ = env.step("Lovely weather today.")
    assert obs.startswith("User: I'm not sure what you mean.") and "cancel" in obs


def test_refusal_needs_no_write_and_the_reason() -> None:
    env, _ = _seed_of("refuse_cancel")
    rid, uid = env.service_task.extra["reservation_id"], env.service_task.scenario.known_info["user_id"][0]
    env.step(json.dumps({"tool": "cancel_reservation", "arguments": {"reservation_id": rid}}))
    *_, info = env.step("done")
    comps = info["reward_components"]
    assert comps["db_reward"] == 0.0 and comps["policy_reward"] == 0.0 and not info["success"]
    env, _ = _seed_of("refuse_cancel")
    env.step(json.dumps({"tool": "get_user_details", "arguments": {"user_id": uid}}))
    obs, reward, terminated, _, info = env.step(
        "Sorry, it was booked more than 24 hours ago, so it can't be cancelled."
    )
    assert STOP in obs and terminated and info["success"] and reward == 1.0
    env, _ = _seed_of("refuse_cancel")  # the right words without authenticating the user
    *_, info = env.step("Sorry, it was booked more than 24 hours ago, so it can't be cancelled.")
    assert info["reward_components"]["action_reward"] == 0.0 and not info["success"]


def test_a_user_who_changes_their_mind_ends_the_call_unchanged() -> None:
    env, _ = _seed_of("user_declines")
    uid = env.service_task.scenario.known_info["user_id"][0]
    obs, *_ = env.step("Could you confirm your user id?")  # a question about the id is not the action
    assert "No, please don't do that." in obs and STOP not in obs
    env.step(json.dumps({"tool": "get_user_details", "arguments": {"user_id": uid}}))
    obs, _, terminated, _, info = env.step("I can do that for you. Shall I proceed?")
    assert "No, please don't do that." in obs and STOP in obs and terminated and info["success"]


# ----------------------------------------------------------------------------- agents
def play(env: ServiceEnv, seed: int) -> dict[str, Any]:
    obs, info = env.reset(seed=seed)
    solver = Solver()
    terminated = truncated = False
    while not (terminated or truncated):
        obs, _, terminated, truncated, info = env.step(solver.act(obs, info))
    return info


@pytest.mark.parametrize("split", ["train", "test"])
def test_oracle_solves_at_least_95_percent(split: str) -> None:
    env = ServiceEnv(domain="travel", split=split)
    infos = [play(env, seed) for seed in range(30)]
    rate = sum(i["success"] for i in infos) / len(infos)
    assert rate >= 0.95, (split, rate, [(i["task"]["kind"], i["reward_components"]) for i in infos if not i["success"]])
    assert all(i["termination_reason"] == "success" for i in infos if i["success"])  # the user ended the call


def test_oracle_reads_the_opening_and_the_policy() -> None:
    req = parse_request(
        "Hi, I'd like to move my flight from Boston (BOS) to Seattle (SEA) on 2024-05-20 to "
        "2024-05-22, on the cheapest flight that day."
    )
    assert req == {
        "intent": "change_flight",
        "origin": "BOS",
        "destination": "SEA",
        "date": "2024-05-20",
        "new_date": "2024-05-22",
        "preference": "cheapest",
    }
    assert (
        parse_request(
            "Hi, I'd like to add 3 more checked bags to my reservation with the flight from "
            "Boston (BOS) to Seattle (SEA) on 2024-05-20."
        )["bags"]
        == 3
    )
    assert (
        parse_request(
            "Hello, I'd like to upgrade my reservation with the flight from Boston (BOS) to "
            "Seattle (SEA) on 2024-05-20 to basic economy."
        )["cabin"]
        == "basic_economy"
    )
    with pytest.raises(ValueError, match="policy text changed"):
        parse_policy("no figures here")


def test_random_agent_almost_never_succeeds() -> None:
    results = run_episodes(ENV_ID, RandomAgent(seed=0), episodes=20, seed=0)
    assert sum(r.success for r in results) == 0


def test_env_passes_the_contract_checker() -> None:
    report = check_env(ENV_ID)
    assert "seeded_determinism" in report.checks and "pickle_roundtrip" in report.checks
    env = envgym.make(ENV_ID)
    obs, info = env.reset(seed=0)
    assert "# Airline customer service policy" in obs and '"name": "update_reservation_baggages"' in obs
    assert info["task"]["domain"] == "travel" and info["task"]["kind"] in KINDS
