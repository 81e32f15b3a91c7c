"""The service family's core on a small library domain: tools and schemas, the scripted user, grading, the env."""

from __future__ import annotations

import json
import random
from typing import Any

import jsonschema
import pytest
from envgym.environments.service.core import (
    Domain,
    Scenario,
    ServiceTask,
    Tool,
    ToolCall,
    ToolError,
    World,
    canonical_hash,
    grade,
)
from envgym.environments.service.env import ServiceEnv
from envgym.environments.service.user import STOP

import envgym
from envgym.tools import ToolCallError, validate_arguments

MEMBER = {"type": "object", "properties": {"member_id": {"type": "string"}}, "required": ["member_id"]}
LOAN = {
    "type": "object",
    "properties": {"member_id": {"type": "string"}, "book_id": {"type": "string"}},
    "required": ["member_id", "book_id"],
}


def get_member(world: World, member_id: str) -> Any:
    if member_id not in world.db["members"]:
        raise ToolError(f"no member {member_id!r}")
    return world.db["members"][member_id]


def borrow(world: World, member_id: str, book_id: str) -> Any:
    book = world.db["books"].get(book_id)
    if book is None or book["status"] != "available":
        raise ToolError(f"book {book_id!r} is not available")
    get_member(world, member_id)["loans"].append(book_id)
    book.update(status="loaned", member=member_id)
    return {"book_id": book_id, "due": "in 14 days"}


class Library(Domain):
    name = "library"
    title = "a public library"
    policy = "Members may hold at most 2 books. Ask for the member id before any change."

    def tools(self) -> list[Tool]:
        return [
            Tool("get_member", "A member's record.", MEMBER, get_member),
            Tool("borrow_book", "Lend a book to a member.", LOAN, borrow, writes=True),
        ]

    def make_world(self, rng: random.Random) -> World:
        loans = ["b1"] if rng.random() < 0.5 else ["b1", "b3"]
        books = {f"b{i}": {"title": f"Book {i}", "status": "available", "member": None} for i in range(1, 6)}
        for b in loans:
            books[b].update(status="loaned", member="m1")
        return World({"members": {"m1": {"name": "Ann", "loans": loans}}, "books": books})

    def make_task(self, world: World, rng: random.Random) -> ServiceTask:
        book = rng.choice([b for b, v in world.db["books"].items() if v["status"] == "available"])
        scenario = Scenario(
            persona="Ann, polite",
            reason_for_call=f"Hi, I'd like to borrow {book}.",
            known_info={"member_id": ("m1", ("member id", "card"))},
            instructions=f"Borrow {book}.",
        )
        if len(world.db["members"]["m1"]["loans"]) >= 2:  # over the limit: the agent must refuse
            return ServiceTask("refuse_over_limit", scenario, (), communicate_info=("at most 2 books",))
        return ServiceTask(
            "borrow",
            scenario,
            (ToolCall("borrow_book", {"member_id": "m1", "book_id": book}),),
            communicate_info=("14 days",),
            forbidden=(),
        )

    def violations(self, before: World, call: ToolCall, result: Any) -> list[str]:
        if call.name == "borrow_book" and len(before.db["members"][call.arguments["member_id"]]["loans"]) >= 2:
            return ["lent a third book"]
        return []


def make(seed: int, **kw: Any) -> tuple[ServiceEnv, str]:
    env = ServiceEnv(domain=Library(), **kw)
    obs, _ = env.reset(seed=seed)
    return env, obs


def seed_of(kind: str) -> int:
    for seed in range(200):
        env, _ = make(seed)
        if env.service_task.kind == kind:
            return seed
    raise AssertionError(kind)


def test_schema_validation_names_what_is_wrong() -> None:
    # The validator is envgym.tools' (one owner); a tool's own call turns its error into a ToolError.
    with pytest.raises(ToolCallError, match="missing required argument"):
        validate_arguments(LOAN, {"member_id": "m1"})
    with pytest.raises(ToolCallError, match="unknown argument"):
        validate_arguments(MEMBER, {"member_id": "m1", "x": 1})
    with pytest.raises(ToolCallError, match="expected string"):
        validate_arguments(MEMBER, {"member_id": 5})
    with pytest.raises(ToolCallError, match="expected integer, got a boolean"):
        validate_arguments({"properties": {"n": {"type": "integer"}}}, {"n": True})
    with pytest.raises(ToolCallError, match="one of"):
        validate_arguments({"properties": {"c": {"type": "string", "enum": ["a", "b"]}}}, {"c": "z"})
    assert canonical_hash({"b": 1, "a": [1, 2]}) == canonical_hash({"a": [1, 2], "b": 1})


def test_a_full_conversation_succeeds_and_is_graded() -> None:
    env, obs = make(seed_of("borrow"))
    assert "# Policy" in obs and '"name": "borrow_book"' in obs and obs.endswith(env.user.opening())
    book = env.service_task.gold_actions[0].arguments["book_id"]
    obs, reward, terminated, _, info = env.step("What is your member id?")
    assert obs == "User: My member id is m1." and reward == 0.0 and not terminated
    obs, *_ = env.step(json.dumps({"tool": "get_member", "arguments": {"member_id": "m1"}}))
    assert obs.startswith("Tool result (get_member): {")
    obs, *_ = env.step(f"Shall I lend you {book}?")
    assert obs == "User: Yes, please go ahead."
    env.step(f'<action>{{"tool": "borrow_book", "arguments": {{"member_id": "m1", "book_id": "{book}"}}}}</action>')
    obs, reward, terminated, _, info = env.step(f"Done: {book} is yours, due in 14 days.")
    assert STOP in obs and terminated and info["success"] and reward == 1.0
    assert info["reward_components"]["db_reward"] == info["reward_components"]["communicate_reward"] == 1.0


def test_a_change_without_the_users_yes_breaks_the_policy() -> None:
    env, _ = make(seed_of("borrow"))
    book = env.service_task.gold_actions[0].arguments["book_id"]
    env.step("What is your member id?")  # the user's last words: "My member id is m1." (not a yes)
    env.step(json.dumps({"tool": "borrow_book", "arguments": {"member_id": "m1", "book_id": book}}))
    assert env.violations == ["borrow_book: a change made without the user's explicit yes"]
    *_, info = env.step(f"Done: {book} is yours, due in 14 days.")
    comps = info["reward_components"]
    assert comps["db_reward"] == 1.0 and comps["policy_reward"] == 0.0 and not info["success"]


def test_wrong_state_missing_information_and_violations_fail() -> None:
    env, _ = make(seed_of("borrow"))
    book = env.service_task.gold_actions[0].arguments["book_id"]
    other = next(b for b, v in env.world.db["books"].items() if v["status"] == "available" and b != book)
    env.step(json.dumps({"tool": "borrow_book", "arguments": {"member_id": "m1", "book_id": other}}))
    *_, terminated, _, info = env.step("done")
    assert terminated and not info["success"] and info["reward_components"]["db_reward"] == 0.0
    env, _ = make(seed_of("borrow"))
    env.step(json.dumps({"tool": "borrow_book", "arguments": {"member_id": "m1", "book_id": book}}))
    *_, info = env.step("done")  # the state is right but the due date was never told
    assert info["reward_components"]["db_reward"] == 1.0 and info["reward_components"]["communicate_reward"] == 0.0
    env, _ = make(seed_of("refuse_over_limit"))
    free = next(b for b, v in env.world.db["books"].items() if v["status"] == "available")
    env.step(json.dumps({"tool": "borrow_book", "arguments": {"member_id": "m1", "book_id": free}}))
    *_, info = env.step("done")
    comps = info["reward_components"]
    assert comps["policy_reward"] == 0.0 and comps["db_reward"] == 0.0 and comps["task_reward"] == 0.0
    env, _ = make(seed_of("refuse_over_limit"))
    obs, reward, terminated, _, info = env.step("Sorry, members may hold at most 2 books.")
    assert terminated and info["success"] and reward == 1.0 and STOP in obs


def test_bad_actions_are_invalid_steps_and_tool_errors_count() -> None:
    env, _ = make(seed_of("borrow"), max_errors=2)
    for bad, why in (
        ('{"tool": "burn_books", "arguments": {}}', "unknown tool"),
        ('{"tool": "get_member", "arguments": {"member_id": 3}}', "expected string"),
        ('{"tool": "get_member"', "not valid JSON"),
        ("[1, 2]", "call 0: expected a JSON object"),  # an array is tool calls (docs/tools.md)
        ("(1, 2)", None),
        ("", "empty action"),
    ):
        obs, _, terminated, _, info = env.step(bad)
        if why is None:  # text that does not start with { or [ is a message to the user
            assert info["action_valid"] and obs.startswith("User:")
            continue
        assert not info["action_valid"] and why in obs and not terminated
    env.step('{"tool": "get_member", "arguments": {"member_id": "m9"}}')
    obs, _, terminated, _, info = env.step('{"tool": "get_member", "arguments": {"member_id": "m8"}}')
    assert terminated and not info["success"] and "Too many tool errors" in obs and info["tool_errors"] == 2


def test_gold_calls_solve_every_task() -> None:
    domain = Library()
    for seed in range(30):
        rng = random.Random(seed)
        world = domain.make_world(rng)
        task = domain.make_task(world, rng)
        final = domain.expected_world(world, task)
        components = grade(domain, task, world, final, list(task.communicate_info), list(task.gold_actions), [])
        assert components["task_reward"] == 1.0, (seed, task.kind, components)


def test_validate_tasks_proves_every_task_solvable_and_names_a_broken_one() -> None:
    from envgym.environments.service.env import validate_tasks

    for domain in ("retail", "travel", "telecom"):
        assert validate_tasks(domain, range(25), split="test") == [], domain
    assert validate_tasks(Library(), range(10), split="train") == []

    class Broken(Library):  # annotation errors: the gold call lends a book the member already has
        def make_task(self, world: World, rng: random.Random) -> ServiceTask:
            task = super().make_task(world, rng)
            if task.kind != "borrow":
                return task
            gold = (ToolCall("borrow_book", {"member_id": "m1", "book_id": "b1"}),)  # b1 is on loan
            return ServiceTask(task.kind, task.scenario, gold, communicate_info=task.communicate_info)

    problems = validate_tasks(Broken(), range(10), split="train")
    assert problems and all("is not available" in p for p in problems)

    class OverLimit(Library):  # the gold solution breaks the policy (a third book)
        def make_task(self, world: World, rng: random.Random) -> ServiceTask:
            task = super().make_task(world, rng)
            if task.kind != "refuse_over_limit":
                return task
            free = next(b for b, v in world.db["books"].items() if v["status"] == "available")
            gold = (ToolCall("borrow_book", {"member_id": "m1", "book_id": free}),)
            return ServiceTask(task.kind, task.scenario, gold, communicate_info=task.communicate_info)

    problems = validate_tasks(OverLimit(), range(20), split="train")
    assert problems and all("policy_reward" in p and "third book" in p for p in problems)


# --------------------------------------------------------------------------- the dialect (docs/tools.md)
def call(name: str, **arguments: object) -> str:
    return json.dumps({"name": name, "arguments": arguments})


def test_info_tools_are_valid_function_schemas_shared_across_steps() -> None:
    env, _ = make(seed_of("borrow"))
    _, info0 = env.reset(seed=seed_of("borrow"))
    *_, info1 = env.step("What is your member id?")
    assert info0["tools"] is info1["tools"] is env.tool_schemas  # one list, not a copy per step
    assert info0["parallel_tool_calls"] is True and "deprecation" not in info1
    assert [s["function"]["name"] for s in info0["tools"]] == ["get_member", "borrow_book"]
    for schema in info0["tools"]:
        assert schema["type"] == "function" and schema["function"]["description"]
        jsonschema.Draft202012Validator.check_schema(schema["function"]["parameters"])
        assert schema["function"]["parameters"]["additionalProperties"] is False


@pytest.mark.parametrize(
    "env_id", ["envgym/Service-Retail-v0", "envgym/Service-Travel-v0", "envgym/Service-Telecom-v0"]
)
def test_every_domains_tools_validate_against_the_metaschema_and_the_card_lists_them(env_id: str) -> None:
    env = envgym.make(env_id)
    _, info = env.reset(seed=0)
    names = [s["function"]["name"] for s in info["tools"]]
    assert len(names) == len(set(names)) >= 8
    for schema in info["tools"]:
        jsonschema.Draft202012Validator.check_schema(schema["function"]["parameters"])
    from envgym.cli._catalog import _card, load_entry_point

    spec = envgym.spec(env_id)
    text = _card(load_entry_point(spec), spec)  # the card `envgym info` shows
    assert "**Tools.**" in text
    assert all(f"``{name}(" in text for name in names)
    env.close()


def test_the_new_dialect_runs_tools_and_the_prompt_teaches_it() -> None:
    env, obs = make(seed_of("borrow"))
    assert '{"name": "<tool>", "arguments": {...}}' in obs and '{"tool"' not in obs
    obs, _, _, _, info = env.step(call("get_member", member_id="m1"))
    assert info["action_valid"] and obs.startswith("Tool result (get_member): {") and "deprecation" not in info
    book = env.service_task.gold_actions[0].arguments["book_id"]
    env.step(f"Shall I lend you {book}?")
    # OpenAI's wire shape (arguments as a JSON string) is read too
    wire = {
        "type": "function",
        "function": {"name": "borrow_book", "arguments": json.dumps({"member_id": "m1", "book_id": book})},
    }
    obs, _, _, _, info = env.step(json.dumps(wire))
    assert info["action_valid"] and obs.startswith("Tool result (borrow_book):")
    obs, reward, terminated, _, info = env.step(f"Done: {book} is yours, due in 14 days.")
    assert terminated and info["success"] and reward == 1.0


def test_several_calls_in_one_turn_run_in_order_each_with_its_result() -> None:
    env, _ = make(seed_of("borrow"))
    two = json.dumps(
        [
            {"name": "get_member", "arguments": {"member_id": "m1"}},
            {"name": "get_member", "arguments": {"member_id": "m9"}},
        ]
    )
    obs, _, terminated, _, info = env.step(two)
    first, second = obs.split("\n\n")
    assert first.startswith("Tool result (get_member): {") and "Ann" in first
    assert second == "Tool result (get_member): Tool error: no member 'm9'"
    assert info["action_valid"] and info["tool_errors"] == 1 and not terminated and info["turn"] == 1
    # one bad call refuses the whole turn: nothing of it runs
    bad = json.dumps(
        [{"name": "get_member", "arguments": {"member_id": "m9"}}, {"name": "get_member", "arguments": {}}]
    )
    obs, _, _, _, info = env.step(bad)
    assert not info["action_valid"] and info["tool_errors"] == 1
    assert "Tool error (get_member): arguments: missing required argument(s) ['member_id']." in obs


def test_the_max_errors_th_error_in_an_array_ends_the_episode_there() -> None:
    env, _ = make(seed_of("borrow"), max_errors=2)
    calls = [{"name": "get_member", "arguments": {"member_id": m}} for m in ("m1", "m8", "m9", "m1")]
    obs, _, terminated, _, info = env.step(json.dumps(calls))
    assert terminated and not info["success"] and info["tool_errors"] == 2
    assert obs.count("Tool result (get_member)") == 2 and obs.endswith("Too many tool errors (2): the episode ends.")


def test_schema_errors_are_invalid_steps_phrased_as_the_tools_result() -> None:
    env, _ = make(seed_of("borrow"))
    for bad, expected in (
        (call("get_member", member_id=3), "Tool error (get_member): arguments.member_id: expected string, got int 3."),
        (call("get_member"), "Tool error (get_member): arguments: missing required argument(s) ['member_id']."),
        (
            call("get_membr", member_id="m1"),
            "Tool error: unknown tool 'get_membr'; tools: borrow_book, get_member. Did you mean 'get_member'?",
        ),
        ('{"name": "get_member", "arguments": {"member_id": NaN}}', "Tool error: not valid JSON"),
        ("[" * 100 + "]" * 100, "Tool error: the call nests arrays/objects more than 32 deep."),
    ):
        obs, _, terminated, _, info = env.step(bad)
        assert not info["action_valid"] and not terminated and expected in obs, obs
    assert env.errors == 0 and env.calls == []


def test_the_old_dialect_still_works_with_a_deprecation_note_and_its_old_error_words() -> None:
    env, _ = make(seed_of("borrow"))
    obs, _, _, _, info = env.step('{"tool": "get_member", "arguments": {"member_id": "m1"}}')
    assert info["action_valid"] and obs.startswith("Tool result (get_member): {")
    assert '{"name": "get_member", "arguments": {"member_id": ...}}' in info["deprecation"]
    *_, info = env.step("Anything else?")
    assert "deprecation" not in info  # the note is about the step that used the old form
    # schema errors of old-form calls read as they did (published bundles replay these words)
    obs, *_, info = env.step('{"tool": "get_member", "arguments": {"member_id": 3}}')
    assert "get_member arguments.member_id: expected string, got int 3." in obs and "deprecation" in info
    *_, terminated, _, info = env.step('{"tool": "done"}')
    assert terminated and "deprecation" in info


def test_random_actions_and_the_oracle_speak_the_new_dialect() -> None:
    from envgym.agents.solvers.service_retail import Solver

    env = envgym.make("envgym/Service-Retail-v0").unwrapped
    obs, info = env.reset(seed=3)
    rng = random.Random(0)
    sampled = [env.sample_action(rng) for _ in range(40)]
    calls = [a for a in sampled if a.startswith("{")]
    assert len(calls) > 10 and all(json.loads(a).keys() == {"name", "arguments"} for a in calls)
    solver, acted = Solver("envgym/Service-Retail-v0", 3), []
    terminated = truncated = False
    while not (terminated or truncated):
        action = solver.act(obs, info)
        acted.append(action)
        obs, _, terminated, truncated, info = env.step(action)
        assert "deprecation" not in info
    assert info["success"] and any(json.loads(a).keys() == {"name", "arguments"} for a in acted if a.startswith("{"))
