"""WebShop family: catalogue, splits, FTS5 search and its cache, pages, grammar, modes, oracle."""

from __future__ import annotations

import multiprocessing
import pickle
import random
import statistics
from pathlib import Path

import pytest
from envgym.agents.solvers.webshop import Solver, parse_instruction
from envgym.environments.webshop.catalogue import GeneratedCatalogue, asin_of, generate_product, index_of, split_sizes
from envgym.environments.webshop.env import WebShopEnv
from envgym.environments.webshop.search import SearchIndex, default_index_dir

from envgym.errors import InvalidKwargsError
from envgym.testing import check_env

SIZE = 1000


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(tmp_path_factory.mktemp("webshop-cache"))


def make(cache: str, **kw: object) -> WebShopEnv:
    return WebShopEnv(catalogue_size=SIZE, cache_dir=cache, **kw)  # type: ignore[arg-type]


# ----------------------------------------------------------------------------- catalogue
def test_products_are_pure_functions_of_seed_and_index() -> None:
    assert generate_product(0, 17) == generate_product(0, 17)
    assert generate_product(0, 17) != generate_product(1, 17)
    c = GeneratedCatalogue(SIZE)
    p = c.product(3)
    assert p.asin == asin_of(3) and len(p.asin) == 10 and c.index_of_asin(p.asin.lower()) == 3
    assert all(index_of(asin_of(i)) == i for i in (0, 1, 999_999, 4_999_999))
    assert len({c.product(i).asin for i in range(SIZE)}) == SIZE
    assert p.title and p.bullet_points and p.attributes and p.options and p.price > 0


def test_catalogue_is_varied_and_realistic() -> None:
    c = GeneratedCatalogue(SIZE)
    products = [c.product(i) for i in range(SIZE)]
    assert len({p.category for p in products}) == 10
    assert len({p.query for p in products}) >= 45
    ranged = [p for p in products if len(p.pricing) == 2]
    assert 0.1 < len(ranged) / SIZE < 0.3
    assert all(p.pricing[0] <= p.price <= p.pricing[1] for p in ranged)
    assert sum(bool(p.reviews) for p in products) > 0.7 * SIZE
    for p in products[:200]:  # option values of one product never collide across axes or with buttons
        values = [v for vs in p.options.values() for v in vs]
        assert len(values) == len(set(values))
        assert not {"description", "features", "reviews", "buy now", "next >", "< prev"} & set(values)


def test_goals_are_attainable_and_varied() -> None:
    c = GeneratedCatalogue(SIZE)
    goals = [c.goal(i) for i in range(200)]
    assert len({g.instruction.split(" ")[0:3].__str__() for g in goals}) >= 5  # several openings
    for g in goals:
        p = c.product(g.index)
        assert set(g.attributes) <= set(p.attributes)
        assert all(any(o in vs for vs in p.options.values()) for o in g.options)
        assert g.price_upper >= p.price
        if g.price_upper < 1_000_000:
            assert g.instruction.endswith(f"price lower than {g.price_upper:.2f} dollars")
            assert g.price_upper % 10 == 0 and g.price_upper - p.price <= 40
    assert any(not g.attributes for g in goals) and any(len(g.attributes) == 3 for g in goals)


def test_splits_are_fixed_and_disjoint(cache: str) -> None:
    assert split_sizes(10_000) == {"test": (0, 500), "dev": (500, 1500), "train": (1500, 10_000)}
    assert split_sizes(1000) == {"test": (0, 50), "dev": (50, 150), "train": (150, 1000)}
    seen: dict[str, set[str]] = {}
    for split in ("train", "dev", "test"):
        env = make(cache, split=split)
        asins = set()
        for seed in range(120):
            _, info = env.reset(seed=seed)
            assert info["task"]["split"] == split
            asins.add(env.goal.asin)  # type: ignore[union-attr]
        seen[split] = asins
    assert not seen["train"] & seen["test"] and not seen["train"] & seen["dev"] and not seen["dev"] & seen["test"]
    assert len(seen["test"]) > 30  # 120 seeds over the 50 test goals reach most of them


# ----------------------------------------------------------------------------- search
def test_fast_ranking_equals_fts5_bm25(cache: str) -> None:
    c = GeneratedCatalogue(SIZE)
    index = SearchIndex.for_catalogue(c, cache)
    queries = [parse_instruction(c.goal(i).instruction)[0] for i in range(40)] + ["dog dogs toy", "<q> shampoo"]
    for q in queries:
        assert index.search(q) == index.search_fts5(q), q
    hits = index.search("shampoo")
    assert 0 < len(hits) <= 50 and all("shampoo" in c.product(i).search_text() for i in hits)
    assert index.search("the and of") == [] and index.search("zzzzqqq") == []
    # backdoors are plain words: "<r>" is the word "r", not 50 random products
    assert index.search("<r>") == index.search("r")
    assert len(index.search("pack")) == 50


def test_index_is_built_once_and_cached(cache: str, tmp_path: Path) -> None:
    c = GeneratedCatalogue(40, seed=5)
    folder = default_index_dir(c, tmp_path)
    SearchIndex.for_catalogue(c, tmp_path)
    stamp = (folder / "index.sqlite").stat().st_mtime_ns
    assert SearchIndex.for_catalogue(c, tmp_path).search("rug") == SearchIndex(folder).search("rug")
    assert (folder / "index.sqlite").stat().st_mtime_ns == stamp  # reused, not rebuilt
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    (folder / "meta.json").write_text("{}")  # damaged: rebuilt
    assert SearchIndex.for_catalogue(c, tmp_path).search("rug") == SearchIndex.for_catalogue(c, tmp_path).search("rug")
    clone = pickle.loads(pickle.dumps(SearchIndex(folder)))
    assert clone.search("rug") == SearchIndex(folder).search("rug")


def _build(args: tuple[str, int]) -> list[int]:
    folder, size = args
    return SearchIndex.for_catalogue(GeneratedCatalogue(size, seed=9), folder).search("coffee table")


def test_two_processes_building_at_once_both_get_a_whole_index(tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(2) as pool:
        a, b = pool.map(_build, [(str(tmp_path), 300), (str(tmp_path), 300)])
    assert a == b and a
    assert [p.name for p in tmp_path.iterdir()] == [GeneratedCatalogue(300, seed=9).fingerprint]


# ----------------------------------------------------------------------------- pages and grammar
def test_an_episode_through_every_page(cache: str) -> None:
    env = make(cache, split="test")
    obs, info = env.reset(seed=0, options={"goal_index": 4})
    goal = env.goal
    assert goal is not None
    assert obs == f"WebShop [SEP] Instruction: [SEP] {goal.instruction} [SEP] Search"
    assert info["admissible_actions"] == ["search[<query>]"]
    obs, _, _, _, info = env.step(f"search[{goal.query}]")
    assert "Page 1 (Total results: " in obs and info["action_valid"]
    assert info["admissible_actions"][:2] == ["click[back to search]", "click[next >]"]
    asin = info["admissible_actions"][2]
    obs, _, _, _, info = env.step(asin.upper().replace("CLICK", "click"))  # clicks ignore case
    assert "click[buy now]" in info["admissible_actions"] and "Price: $" in obs
    obs, _, _, _, info = env.step("click[features]")
    assert info["admissible_actions"] == ["click[back to search]", "click[< prev]"]
    env.step("click[< prev]")
    obs, _, _, _, info = env.step("click[< prev]")
    assert "Page 1 (Total results" in obs
    env.step("click[next >]")
    obs, _, _, _, info = env.step("click[< prev]")
    assert "Page 1 (Total results" in obs
    obs, _, _, _, info = env.step("click[back to search]")
    assert obs.startswith("WebShop [SEP]")


def test_invalid_actions_are_invalid_steps_with_feedback(cache: str) -> None:
    env = make(cache)
    env.reset(seed=1)
    for bad, words in [
        ("click[buy now]", "nothing to click"),
        ("search[]", "needs words"),
        ("buy it", "expected search[<query>] or click[<button>]"),
    ]:
        obs, reward, terminated, _, info = env.step(bad)
        assert not info["action_valid"] and words in obs and reward == 0.0 and not terminated
    env.step("search[shampoo]")
    obs, _, _, _, info = env.step("search[shampoo]")
    assert not info["action_valid"] and "no search bar" in obs


def test_buying_the_target_with_its_options_scores_one(cache: str) -> None:
    env = make(cache, split="dev")
    _, info = env.reset(seed=3)
    goal = env.goal
    assert goal is not None
    env.page = env.page.__class__("item", product=goal.index)  # jump to the target's item page
    for value in goal.options:
        assert env.step(f"click[{value}]")[4]["action_valid"]
    obs, reward, terminated, _, info = env.step("click[buy now]")
    assert terminated and info["success"] and info["termination_reason"] == "success"
    assert reward == pytest.approx(1.0, abs=1e-12)
    comps = info["reward_components"]
    assert comps["webshop_reward"] == pytest.approx(1.0, abs=1e-12) and comps["success_reward"] == 1.0
    total = comps["attribute_reward"] + comps["option_reward"] + comps["price_reward"]
    assert total == pytest.approx(1.0, abs=1e-12) and "Your score (min 0.0, max 1.0): 1.0000" in obs


def test_observation_modes(cache: str) -> None:
    texts = {}
    for mode in ("text", "text_rich", "html"):
        env = make(cache, observation_mode=mode)
        env.reset(seed=2)
        env.step("search[yoga mat]")
        texts[mode] = env.step("click[next >]")[0]
    assert " [SEP] " in texts["text"] and "[button]" not in texts["text"]
    rich = texts["text_rich"].splitlines()
    assert rich[0] == "You have clicked next >." and "[button] < Prev [button_]" in rich
    html = texts["html"]
    assert html.startswith("<!DOCTYPE html>") and 'class="product-link"' in html
    assert "/search_results/" in html and "/item_page/" in html


def test_bad_kwargs_fail_clearly(cache: str) -> None:
    with pytest.raises(InvalidKwargsError, match="observation_mode"):
        make(cache, observation_mode="pixels")
    with pytest.raises(InvalidKwargsError, match="split"):
        make(cache, split="valid")
    with pytest.raises(InvalidKwargsError, match="catalogue_size"):
        WebShopEnv(catalogue_size=5)
    with pytest.raises(InvalidKwargsError, match="goal_index"):
        make(cache, split="test").reset(seed=0, options={"goal_index": 50})


def test_contract_on_a_small_catalogue(cache: str) -> None:
    for mode in ("text", "text_rich", "html"):
        report = check_env(make(cache, observation_mode=mode))
        assert "pickle_roundtrip" in report.checks and "bad_input_fuzz" in report.checks


# ----------------------------------------------------------------------------- agents
def _play(env: WebShopEnv, seed: int, policy: object) -> dict[str, object]:
    obs, info = env.reset(seed=seed)
    while True:
        obs, _, terminated, truncated, info = env.step(policy(obs, info))  # type: ignore[operator]
        if terminated or truncated:
            return info


def test_oracle_and_random_on_a_ci_sample(cache: str) -> None:
    # CI sample: 60 test-split episodes of the 1,000-product catalogue (the >= 100-seed figures on
    # the 10,000-product catalogue are in benchmarks/perf/webshop.py and the README)
    env = make(cache, split="test")
    scores, wins = [], []
    for seed in range(60):
        info = _play(env, seed, Solver("envgym/WebShop-v0", seed).act)
        scores.append(info["reward_components"]["webshop_reward"])
        wins.append(info["success"])
    assert statistics.fmean(scores) >= 0.85 and statistics.fmean(wins) >= 0.7
    rand = []
    for seed in range(60):
        rng = random.Random(seed)
        info = _play(env, seed, lambda o, i, rng=rng: rng.choice(i["admissible_actions"]))
        rand.append(info["reward_components"]["webshop_reward"])
    assert statistics.fmean(rand) < 0.1


# ----------------------------------------------------------------------------- WebShop's own files
FIXTURES = Path(__file__).parent / "fixtures"


def test_parse_pricing_as_webshop() -> None:
    from envgym.environments.webshop.loader import parse_pricing

    assert parse_pricing("$12.99") == (12.99,)
    assert parse_pricing("$10.99 - $15.99") == (10.99, 15.99)
    assert parse_pricing("$1,299.00") == (1299.0,)
    assert parse_pricing(None) == (100.0,) and parse_pricing("") == (100.0,)


def test_load_webshop_files_and_play_them(tmp_path: Path) -> None:
    from envgym.environments.webshop.loader import load_webshop

    cat = load_webshop(
        FIXTURES / "items_shuffle.json", FIXTURES / "items_ins_v2.json", FIXTURES / "items_human_ins.json"
    )
    assert [cat.product(i).asin for i in range(len(cat))] == ["B07TESTA01", "B07TESTA02", "B07TESTA03", "B07TESTA05"]
    tea = cat.product(0)
    assert tea.options["flavor name"] == ("mint", "lemon | ginger") and tea.attributes == ("caffeine free", "organic")
    shoes = cat.product(1)
    assert shoes.bullet_points == ("Rubber sole; lace up",) and 39.99 <= shoes.price <= 59.99
    assert cat.product(2).pricing == (100.0,) and cat.product(2).attributes == ("DUMMY_ATTR",)
    assert cat.n_goals() == 5  # the instruction for an unknown ASIN is dropped
    goals = [cat.goal(i) for i in range(5)]
    assert all(g.instruction.endswith(f", and price lower than {g.price_upper:.2f} dollars") for g in goals)
    assert all(not g.instruction.split(", and price")[0].endswith(".") for g in goals)
    assert {r: cat.split_range(r) for r in ("test", "dev", "train")} == {"test": (0, 1), "dev": (1, 2), "train": (2, 5)}
    # play a goal to the end through the env: search, open the target, pick its options, buy
    env = WebShopEnv(catalogue=cat, cache_dir=str(tmp_path), split="train")
    for i in range(3):
        _, info = env.reset(seed=0, options={"goal_index": i})
        goal = env.goal
        assert goal is not None
        env.step(f"search[{goal.name}]")
        obs, _, _, _, info = env.step(f"click[{goal.asin.lower()}]")
        assert info["action_valid"], obs
        for value in goal.options:
            assert env.step(f"click[{value}]")[4]["action_valid"]
        obs, reward, terminated, _, info = env.step("click[buy now]")
        assert terminated and info["success"] and reward == pytest.approx(1.0, abs=1e-12)


@pytest.mark.parametrize("mode", ["text_rich", "html"])
def test_the_oracle_reads_every_observation_mode(cache: str, mode: str) -> None:
    # The same goals give the same purchases whatever the page looks like.
    base, other = make(cache, split="test"), make(cache, split="test", observation_mode=mode)
    for seed in range(15):
        a = _play(base, seed, Solver("envgym/WebShop-v0", seed).act)
        b = _play(other, seed, Solver("envgym/WebShop-v0", seed).act)
        assert b["reward_components"] == a["reward_components"], (mode, seed)


def test_reward_weights_leave_the_score_alone_in_both_envs() -> None:
    from envgym.environments.webshop.env import DIAGNOSTIC_COMPONENTS, reward_weights

    assert reward_weights(None) == dict.fromkeys(DIAGNOSTIC_COMPONENTS, 0.0)
    # A partial mapping keeps the diagnostics at 0 unless it names them (text and browser env alike).
    assert reward_weights({"webshop_reward": 2.0, "price_reward": 0.5}) == {
        **dict.fromkeys(DIAGNOSTIC_COMPONENTS, 0.0),
        "webshop_reward": 2.0,
        "price_reward": 0.5,
    }
    rubric = object()
    assert reward_weights(rubric) is rubric
