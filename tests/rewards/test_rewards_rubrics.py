"""Rubrics: node arithmetic, the spec grammar, YAML, validation errors, and make(id, reward=...)."""

from __future__ import annotations

import math
import random
from collections.abc import Mapping
from pathlib import Path

import gymnasium
import pytest
from test_rewards_envs import LineWalk

from envgym.core import RewardContext
from envgym.errors import ConfigError, InvalidKwargsError
from envgym.rubric import as_rubric
from envgym.rewards import (
    OPERATORS,
    WRAPPER_CONTEXT_FIELDS,
    AtEnd,
    Clip,
    Compare,
    Const,
    ContextValue,
    Flag,
    Gate,
    Lexicographic,
    Product,
    RubricError,
    StepContext,
    StepRecord,
    Sum,
    Term,
    TextMatches,
    WeightedSum,
    build_condition,
    build_rubric,
    component_metrics,
    dump_rubric,
    episode_totals,
    load_rubric,
    metric_key,
)

COMPONENTS = {"success_reward": 1.0, "progress_reward": 0.25, "invalid_action_reward": -0.1, "step_cost_reward": -0.01}
NAMES = tuple(COMPONENTS)
LINE_ID = "envgymtest/RewardsLineWalk-v0"


def ctx(**overrides: object) -> RewardContext:
    fields = {
        "action_text": "<action>right</action>",
        "turn": 3,
        "action_valid": True,
        "terminated": True,
        "success": True,
        "task": {"goal": "Reach cell 4."},
        "progress": 0.5,
    }
    fields.update(overrides)
    return RewardContext(**fields)  # type: ignore[arg-type]


def double_success(components: Mapping[str, float], context: RewardContext) -> float:
    """A module-level rubric function, importable by the spec grammar."""
    return 2.0 * components["success_reward"]


@pytest.fixture(scope="module", autouse=True)
def _line_walk_id() -> None:
    if LINE_ID not in gymnasium.registry:
        gymnasium.register(id=LINE_ID, entry_point=LineWalk)


# ------------------------------------------------------------------------------- node values
def test_leaves_and_sums() -> None:
    c = ctx()
    assert Term("progress_reward")(COMPONENTS, c) == 0.25
    assert Const(0.5)(COMPONENTS, c) == 0.5
    assert ContextValue("progress")(COMPONENTS, c) == 0.5
    assert ContextValue("progress", default=-1.0)(COMPONENTS, ctx(progress=None)) == -1.0
    assert ContextValue("turn")(COMPONENTS, c) == 3.0
    assert Sum("success_reward", "progress_reward", 0.5)(COMPONENTS, c) == pytest.approx(1.75)
    assert Product("success_reward", 0.5, "progress_reward")(COMPONENTS, c) == pytest.approx(0.125)


def test_weighted_sum_listed_and_rest() -> None:
    c = ctx()
    listed = WeightedSum({"success_reward": 2.0, "invalid_action_reward": 3.0})
    assert listed(COMPONENTS, c) == pytest.approx(2.0 - 0.3)
    rest = WeightedSum({"success_reward": 2.0}, rest=1.0)
    assert rest(COMPONENTS, c) == pytest.approx(2.0 + 0.25 - 0.1 - 0.01)
    nested = WeightedSum([(Term("success_reward") + Term("progress_reward"), 0.5), ("step_cost_reward", 10.0)])
    assert nested(COMPONENTS, c) == pytest.approx(0.625 - 0.1)


def test_operator_sugar_builds_the_same_trees() -> None:
    c = ctx()
    rubric = Term("success_reward") + 2 * Term("progress_reward") - 1
    assert rubric(COMPONENTS, c) == pytest.approx(0.5)
    assert (-Term("success_reward"))(COMPONENTS, c) == -1.0
    assert (Term("success_reward") * Term("progress_reward"))(COMPONENTS, c) == 0.25
    assert (3 - Term("progress_reward"))(COMPONENTS, c) == pytest.approx(2.75)


def test_clip_and_gate() -> None:
    c = ctx()
    assert Clip(Sum("success_reward", 5.0), high=2.0)(COMPONENTS, c) == 2.0
    assert Clip("invalid_action_reward", low=-0.05)(COMPONENTS, c) == -0.05
    assert Clip("progress_reward", low=0.0, high=1.0)(COMPONENTS, c) == 0.25
    gate = Gate(Term("invalid_action_reward") >= 0, then="success_reward", otherwise=-1.0)
    assert gate(COMPONENTS, c) == -1.0
    assert gate({**COMPONENTS, "invalid_action_reward": 0.0}, c) == 1.0
    assert Gate("success", then=1.0)(COMPONENTS, ctx(success=False)) == 0.0


@pytest.mark.parametrize(
    ("op", "value", "expected"),
    [
        ("<", 0.3, True),
        ("<=", 0.25, True),
        (">", 0.25, False),
        (">=", 0.25, True),
        ("==", 0.25, True),
        ("!=", 0.25, False),
    ],
)
def test_comparisons(op: str, value: float, expected: bool) -> None:
    assert Compare("progress_reward", op, value).holds(COMPONENTS, ctx()) is expected


def test_conditions_combine_and_refuse_truthiness() -> None:
    c = ctx(action_text="<think>hmm</think><action>right</action>", success=False)
    think = TextMatches(r"<think>.+</think>")
    assert think.holds(COMPONENTS, c)
    assert not TextMatches("^right$").holds(COMPONENTS, c)
    assert (think & Flag("action_valid")).holds(COMPONENTS, c)
    assert not (think & Flag("success")).holds(COMPONENTS, c)
    assert (Flag("success") | think).holds(COMPONENTS, c)
    assert (~Flag("success")).holds(COMPONENTS, c)
    with pytest.raises(TypeError, match="Gate"):
        bool(Term("success_reward") > 0)


def test_lexicographic_priorities_and_scalarisation() -> None:
    rubric = Lexicographic(["success_reward", "progress_reward", "step_cost_reward"], epsilon=0.01)
    assert rubric.priorities(COMPONENTS, ctx()) == (1.0, 0.25, -0.01)
    assert rubric(COMPONENTS, ctx()) == pytest.approx(1.0 + 0.01 * 0.25 - 0.0001 * 0.01)


def test_lexicographic_scalarisation_orders_like_the_tuples_below_the_safe_epsilon() -> None:
    # Objectives on a 0.1 grid in [-1, 1]: gap 0.1, bound 1.
    safe = Lexicographic.safe_epsilon(0.1, 1.0)
    grid = [round(-1 + 0.1 * k, 1) for k in range(21)]
    rng = random.Random(0)
    good = Lexicographic(["a", "b", "c"], epsilon=safe * 0.99)
    bad = Lexicographic(["a", "b", "c"], epsilon=0.5)
    bad_orderings = 0
    for _ in range(3000):
        x, y = (tuple(rng.choice(grid) for _ in range(3)) for _ in range(2))
        cx, cy = dict(zip("abc", x)), dict(zip("abc", y))
        sx, sy = good(cx, ctx()), good(cy, ctx())
        assert (x > y) == (sx > sy) and (x == y) == math.isclose(sx, sy, abs_tol=1e-12)
        bad_orderings += (x > y) != (bad(cx, ctx()) > bad(cy, ctx()))
    assert bad_orderings > 0  # the bound is not vacuous: a large epsilon does reorder outcomes


def test_at_end_pays_the_episode_total_once() -> None:
    dense = Term("progress_reward")
    sparse = AtEnd(dense)
    history: list[StepRecord] = []
    paid = []
    values = [0.25, -0.25, 0.25, 0.5]
    for t, value in enumerate(values, start=1):
        last = t == len(values)
        components = {"progress_reward": value}
        context = StepContext(
            action_text="", turn=t, action_valid=True, terminated=last, success=last, task={}, history=tuple(history)
        )
        paid.append(sparse(components, context))
        history.append(StepRecord(components, context))
    assert paid[:-1] == [0.0, 0.0, 0.0] and paid[-1] == pytest.approx(sum(values))


def test_function_rubric_from_spec() -> None:
    rubric = build_rubric(
        {"function": f"{__name__}:double_success", "components": ["success_reward"]}, components=NAMES
    )
    assert rubric(COMPONENTS, ctx()) == 2.0
    assert rubric.to_spec()["function"] == f"{__name__}:double_success"
    with pytest.raises(RubricError, match="cannot import"):
        build_rubric({"function": f"{__name__}:no_such_function"})


# ------------------------------------------------------------------------------ spec grammar
SPECS = [
    "success_reward",
    0.5,
    {"success_reward": 2.0, "step_cost_reward": 0.5},
    {"sum": ["success_reward", {"context": "progress"}, -0.2]},
    {"weighted_sum": {"success_reward": 1.0, "progress_reward": 0.5}, "rest": 0.1},
    {"weighted_sum": [{"rubric": {"product": ["success_reward", 0.5]}, "weight": 3.0}]},
    {"clip": {"sum": ["progress_reward", "step_cost_reward"]}, "min": -1.0, "max": 0.2},
    {
        "gate": {"all": [{"context": "success"}, {"component": "invalid_action_reward", ">=": 0}]},
        "then": 1.0,
        "else": -1.0,
    },
    {
        "gate": {"any": [{"not": {"context": "action_valid"}}, {"text_matches": "RIGHT", "ignore_case": True}]},
        "then": 0.3,
    },
    {"gate": {"rubric": {"sum": ["success_reward", "progress_reward"]}, ">": 1.0}, "then": "progress_reward"},
    {"gate": {"context": "progress", ">=": 0.5}, "then": "success_reward"},
    {"lexicographic": ["success_reward", {"sum": ["progress_reward", "step_cost_reward"]}], "epsilon": 0.01},
]


@pytest.mark.parametrize("spec", SPECS, ids=[str(i) for i in range(len(SPECS))])
def test_spec_round_trips_through_dict_and_yaml(spec: object) -> None:
    rubric = build_rubric(spec, components=NAMES)
    again = build_rubric(rubric.to_spec(), components=NAMES)
    loaded = load_rubric(dump_rubric(rubric), components=NAMES)
    for context in (ctx(), ctx(success=False, action_valid=False, progress=0.2)):
        expected = rubric(COMPONENTS, context)
        assert math.isfinite(expected)
        assert again(COMPONENTS, context) == expected == loaded(COMPONENTS, context)
    assert again.to_spec() == rubric.to_spec() == loaded.to_spec()


def test_spec_values_match_hand_computation() -> None:
    c = ctx(success=False, action_valid=True, progress=0.2)
    value = build_rubric(SPECS[7], components=NAMES)
    assert value(COMPONENTS, c) == -1.0
    assert build_rubric(SPECS[4])(COMPONENTS, c) == pytest.approx(1.0 + 0.125 + 0.1 * (-0.11))
    assert build_rubric(SPECS[8])(COMPONENTS, c) == 0.3  # "RIGHT" matches the raw text, ignoring case


def test_plain_weights_mean_what_make_means() -> None:
    """{name: weight} through the reward layer equals the core's numeric-weights rubric."""
    weights = {"success_reward": 3.0, "invalid_action_reward": 2.0}
    core_env = LineWalk(reward=weights)
    layer_env = LineWalk(reward=build_rubric(weights, components=LineWalk.reward_components))
    for env in (core_env, layer_env):
        env.reset(seed=5)
    rng = random.Random(1)
    for _ in range(12):
        action = rng.choice(["left", "right", "wait", "jump"])
        a, b = core_env.step(action), layer_env.step(action)
        assert a[1] == pytest.approx(b[1])
        if a[2] or a[3]:
            break


def test_load_rubric_from_files(tmp_path: Path) -> None:
    path = tmp_path / "rubric.yaml"
    path.write_text("gate: {context: success}\nthen: success_reward\nelse: {sum: [step_cost_reward, -0.5]}\n")
    for source in (path, str(path)):
        rubric = load_rubric(source, components=NAMES)
        assert rubric(COMPONENTS, ctx(success=False)) == pytest.approx(-0.51)
    with pytest.raises(RubricError, match="cannot read the rubric file"):
        load_rubric(tmp_path / "missing.yml")
    with pytest.raises(RubricError, match=r"pass load_rubric\(path\) instead of the path"):
        LineWalk(reward=build_rubric(str(path)))


# ---------------------------------------------------------------------- make(id, reward=...)
def test_make_with_a_structured_reward_end_to_end() -> None:
    env = gymnasium.make(
        LINE_ID,
        reward={
            "gate": {"context": "action_valid"},
            "then": {"sum": ["success_reward", "progress_reward"]},
            "else": -0.5,
        },
    )
    _, info = env.reset(seed=2)
    length = env.unwrapped.length
    _, reward, *_ = env.step("jump")
    assert reward == -0.5
    assert info["reward_components"].keys() == set(LineWalk.reward_components)
    total = 0.0
    for _ in range(length):
        _, reward, terminated, _, info = env.step("right")
        total += reward
    assert terminated and total == pytest.approx(2.0)
    assert info["reward_components"]["success_reward"] == 1.0


def test_make_with_a_yaml_rubric_object() -> None:
    rubric = load_rubric("lexicographic: [success_reward, progress_reward]\nepsilon: 0.1\n")
    env = gymnasium.make(LINE_ID, reward=rubric)
    env.reset(seed=0)
    _, reward, *_ = env.step("right")
    assert reward == pytest.approx(0.1 / env.unwrapped.length)


def test_one_rubric_object_serves_many_envs() -> None:
    rubric = build_rubric({"sum": ["success_reward", {"weighted_sum": {"progress_reward": 2.0}}]})
    envs = [LineWalk(reward=rubric) for _ in range(2)]
    solo = LineWalk(reward=rubric)
    for env in (*envs, solo):
        env.reset(seed=4)
    interleaved: list[float] = []
    alone: list[float] = []
    for action in ["right", "wait", "right", "right", "right", "right", "right"]:
        for env in envs:
            result = env.step(action)
            if env is envs[0]:
                interleaved.append(result[1])
        alone.append(solo.step(action)[1])
        if solo.turn >= solo.length + 1:
            break
    assert interleaved == alone


# --------------------------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    ("reward", "match"),
    [
        ({"sum": ["sucess_reward"]}, r"reward\.sum\[0\]: .*'sucess_reward'.*Did you mean 'success_reward'"),
        (
            {"gate": {"component": "format_reward", ">=": 0}, "then": 1.0},
            r"'format_reward', which LineWalk does not emit",
        ),
        (
            {"sum": ["success_reward", {"weighted_sum": {"progress_reward": float("nan")}}]},
            r"reward\.sum\[1\]\.weighted_sum\.progress_reward: .*finite",
        ),
        ({"success_reward": float("inf"), "progress_reward": {"x": 1}}, r"reward\.success_reward: .*got inf"),
        (
            {"success_reward": 1.0, "progress_reward": {"x": 1}},
            r"reward\.progress_reward: expected a finite number \(the weight",
        ),
        ({"weighted_sum": {"progress_reward": "1e-3"}}, r"YAML reads exponents"),
        ({"weighted_sum": {"progress_reward": True}}, r"expected a finite number, got True"),
        ({"gates": {"context": "success"}, "then": 1}, r"Did you mean 'gate'"),
        ({"sum": ["success_reward"], "product": ["progress_reward"]}, r"one operator per mapping"),
        ({"clip": "success_reward", "mn": 0}, r"unknown option 'mn'.*Did you mean 'min'"),
        ({"clip": "success_reward", "min": 1, "max": 0}, r"min must not exceed max"),
        ({"clip": "success_reward"}, r"at least one of min/max"),
        ({"gate": {"context": "success"}}, r"needs `then:`"),
        ({"gate": {"context": "sucess"}, "then": 1}, r"Did you mean 'success'"),
        ({"gate": {"component": "success_reward"}, "then": 1}, r"exactly one comparison"),
        ({"gate": {"component": "success_reward", "=>": 1}, "then": 1}, r"unknown key"),
        ({"lexicographic": ["success_reward"], "epsilon": 2}, r"epsilon: expected a number in \(0, 1\)"),
        ({"lexicographic": []}, r"non-empty list"),
        ({"context": "succes"}, r"Did you mean"),
        ({"sum": []}, r"non-empty list"),
        ({"at_end": "success_reward"}, r"AtEnd reads 'history'.*ApplyRubric"),
        ({"sum": ["success_reward", {"inner": True}]}, r"Inner reads 'base_reward'"),
        ({"gate": {"context": "truncated"}, "then": 1}, r"Flag reads 'truncated'"),
    ],
)
def test_bad_rubrics_fail_at_make_time(reward: object, match: str) -> None:
    with pytest.raises(RubricError, match=match):
        gymnasium.make(LINE_ID, reward=reward)


def test_rubric_errors_are_config_and_kwargs_errors() -> None:
    with pytest.raises(InvalidKwargsError):
        LineWalk(reward={"sum": ["nope_reward"]})
    with pytest.raises(ConfigError):
        LineWalk(reward={"sum": ["nope_reward"]})
    with pytest.raises(ValueError):
        build_rubric({"sum": "success_reward"})
    with pytest.raises(RubricError, match="expected component weights or one operator"):
        build_rubric({})


def test_rubric_instances_are_validated_at_construction() -> None:
    with pytest.raises(RubricError, match=r"reward\.sum\[1\]\.gate\.component: .*'format_reward'"):
        LineWalk(reward=Term("success_reward") + Gate(Term("format_reward") >= 0, then=1.0))
    with pytest.raises(RubricError, match="AtEnd"):
        gymnasium.make(LINE_ID, reward=AtEnd("success_reward"))


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("sum: [success_reward, progress_reward\n", r"line 2, column 1"),
        ("gate: {context: success\nthen: 1", r"malformed YAML"),
        ("", r"is empty"),
        ("- success_reward\n- progress_reward\n", r"a bare list is not a rubric"),
        ("weighted_sum: {progress_reward: 1e-3}", r"write 1\.0e-3"),
    ],
)
def test_malformed_yaml_is_a_clear_error(text: str, match: str) -> None:
    with pytest.raises(RubricError, match=match):
        load_rubric(text, components=NAMES)


def test_every_operator_is_documented_and_buildable() -> None:
    import envgym.rubric as module

    for op in OPERATORS:
        assert f"``{op}``" in (module.__doc__ or ""), op
    with pytest.raises(RubricError, match="condition"):
        build_condition(42)


# ----------------------------------------------------------------------------------- metrics
def test_component_metrics_from_episode_totals() -> None:
    steps = [
        [{"success_reward": 0.0, "format_reward": -0.1}, {"success_reward": 1.0, "format_reward": 0.0}],
        [{"success_reward": 0.0, "format_reward": -0.1}, {"success_reward": 0.0, "format_reward": -0.1}],
        [{"success_reward": 1.0, "format_reward": 0.0, "shaping_reward": 0.5}],
    ]
    episodes = [episode_totals(s) for s in steps]
    assert episodes[1] == {"success_reward": 0.0, "format_reward": pytest.approx(-0.2)}
    metrics = component_metrics(episodes)
    assert list(metrics) == ["rewards/format/mean", "rewards/shaping/mean", "rewards/success/mean"]
    assert metrics["rewards/success/mean"] == pytest.approx(2 / 3)
    assert metrics["rewards/format/mean"] == pytest.approx(-0.1)
    assert metrics["rewards/shaping/mean"] == 0.5  # mean over the episodes that report it
    assert component_metrics([]) == {}
    assert metric_key("step_cost_reward") == "rewards/step_cost/mean"
    with pytest.raises(ConfigError, match="finite"):
        component_metrics([{"success_reward": float("nan")}])
    with pytest.raises(ConfigError, match="without '/'"):
        metric_key("a/b")


def test_every_rubric_class_has_a_spec() -> None:
    nodes = [
        Term("a"),
        Const(1),
        ContextValue("turn"),
        Sum("a", 1),
        WeightedSum({"a": 1}),
        Product("a", 2),
        Clip("a", low=0),
        Gate("success", then="a"),
        Lexicographic(["a"]),
        AtEnd("a"),
    ]
    for node in nodes:
        rebuilt = build_rubric(node.to_spec(), context=WRAPPER_CONTEXT_FIELDS)
        assert type(rebuilt) is type(node) and rebuilt.to_spec() == node.to_spec()
        assert repr(node).startswith(type(node).__name__)


def test_node_constructors_take_objects_and_specs_go_through_the_builder() -> None:
    """Python constructors take rubrics, names, numbers and callables; a spec mapping is the
    builder's (one direction of dependency: spec imports nodes, never the reverse)."""
    with pytest.raises(RubricError, match=r"sum\[1\]: got a spec mapping .*build_rubric"):
        Sum("success_reward", {"weighted_sum": {"format_reward": 0.5}})
    with pytest.raises(RubricError, match=r"gate: got a spec mapping .*build_condition"):
        Gate({"context": "success"}, then=1.0)
    built = build_rubric({"sum": ["success_reward", {"weighted_sum": {"format_reward": 0.5}}]})
    assert built.to_spec() == Sum("success_reward", WeightedSum({"format_reward": 0.5})).to_spec()
    assert as_rubric({"gate": {"context": "success"}, "then": 1.0}).to_spec() == Gate("success", then=1.0).to_spec()
