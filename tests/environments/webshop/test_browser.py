"""The WebShop web server (real HTTP on 127.0.0.1) and the browser env (real Chromium via Playwright)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
import time
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np
import pytest
from envgym.agents.solvers.webshop import Solver
from procs import descendants

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from envgym.environments.webshop.env import WebShopEnv, shared_store
from envgym.environments.webshop.server import WebShopSite, start_in_thread

from envgym.errors import InvalidKwargsError
from envgym.rollout import RunConfig, run

SIZE = 1000
ROOT = Path(__file__).resolve().parents[3]
needs_browser = pytest.mark.skipif(
    not os.path.exists("/usr/bin/chromium"), reason="Debian's chromium is not installed (scripts/setup.sh installs it)"
)


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(tmp_path_factory.mktemp("webshop-browser-cache"))


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, ""


# ----------------------------------------------------------------------------- server
def test_server_pages_sessions_and_score(cache: str) -> None:
    store = shared_store(size=SIZE, cache_dir=cache)
    handle = start_in_thread(WebShopSite(store, store.catalogue.split_range("test")))
    try:
        base = handle.url
        assert base.startswith("http://127.0.0.1:")
        goal = store.catalogue.goal(7)
        status, page = get(f"{base}/fixed_7")
        assert status == 200 and "Instruction:" in page and 'id="search_input"' in page
        assert get(f"{base}/fixed_50")[0] == 404  # the test split has 50 goals
        req = urllib.request.Request(f"{base}/api/sessions?goal=7", method="POST")
        sid = json.loads(urllib.request.urlopen(req, timeout=10).read())["session"]
        status, results = get(f"{base}/search/{sid}?q={goal.query.replace(' ', '+')}")
        assert status == 200 and "Page 1 (Total results:" in results
        options = json.dumps(dict(zip(goal.extra["option_axes"], goal.options, strict=True)), separators=(",", ":"))
        status, done = get(f"{base}/done/{sid}/{goal.asin}/{urllib.request.quote(options, safe='')}")
        assert status == 200 and "Your score (min 0.0, max 1.0): 1.0000" in done
        state = json.loads(urllib.request.urlopen(f"{base}/api/sessions/{sid}", timeout=10).read())
        assert state["success"] and state["components"]["webshop_reward"] == 1.0
        assert get(f"{base}/item_page/{sid}/B0NOTTHERE/x/1/%7B%7D")[0] == 404
    finally:
        handle.stop()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_cli_serve(cache: str) -> None:
    port = _free_port()
    env = {**os.environ, "ENVGYM_CACHE_DIR": cache}
    cli = [sys.executable, "-m", "envgym.cli", "webshop", "serve", "--port", str(port), "--catalogue-size", str(SIZE)]
    proc = subprocess.Popen(cli, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                status, page = get(f"http://127.0.0.1:{port}/fixed_0")
                break
            except (urllib.error.URLError, ConnectionError):
                assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
                assert time.monotonic() < deadline, "the server did not come up in 60 s"
                time.sleep(0.2)
        assert (
            status == 200
            and WebShopEnv(catalogue_size=SIZE, cache_dir=cache, split="test")
            .catalogue.goal(0)
            .instruction.replace("'", "&#x27;")
            in page
        )
    finally:
        proc.terminate()
        proc.wait(timeout=20)
    bad = subprocess.run(
        [*cli[:-2], "--split", "valid"], env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert bad.returncode == 2 and "--split" in bad.stderr


# ----------------------------------------------------------------------------- browser env
def _alive(pids: set[int]) -> set[int]:
    """Pids that still exist (running or zombie)."""
    return {p for p in pids if Path(f"/proc/{p}").exists()}


def _wait_gone(pids: set[int], seconds: float = 15) -> set[int]:
    deadline = time.monotonic() + seconds
    while _alive(pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    return _alive(pids)


@pytest.mark.slow  # ~10 s on an idle 2-core machine, 26 s under load
@needs_browser
def test_text_and_browser_envs_give_the_same_rewards(cache: str) -> None:
    """20 seeds: 10 oracle episodes and 10 "open the first result and buy" episodes (partial scores),
    each action sequence played in the text env and replayed in the browser."""
    pytest.importorskip("playwright")
    from envgym.environments.webshop.browser_env import WebShopBrowserEnv

    text = WebShopEnv(catalogue_size=SIZE, cache_dir=cache, split="test")
    browser = WebShopBrowserEnv(catalogue_size=SIZE, cache_dir=cache, split="test")
    scores = []
    try:
        for seed in range(20):
            obs, info = text.reset(seed=seed)
            solver, actions, rewards = Solver("envgym/WebShop-v0", seed), [], []
            while True:
                if seed < 10:
                    action = solver.act(obs, info)
                elif not actions:
                    action = f"search[{info['task']['goal'].split(',')[0]}]"
                elif len(actions) == 1:
                    action = next(a for a in info["admissible_actions"] if a.startswith("click[b0"))
                else:
                    action = "click[buy now]"
                obs, reward, terminated, truncated, info = text.step(action)
                actions.append(action)
                rewards.append(reward)
                if terminated or truncated:
                    break
            b_obs, b_info = browser.reset(seed=seed)
            assert b_info["task"] == text.reset(seed=seed)[1]["task"]
            for action, reward in zip(actions, rewards, strict=True):
                b_obs, b_reward, b_term, _, b_info = browser.step(action)
                assert b_info["action_valid"], (seed, action, b_obs[:300])
                assert b_reward == pytest.approx(reward, abs=1e-12)  # the same float computation
            assert b_term and b_info["reward_components"] == pytest.approx(info["reward_components"], abs=1e-12)
            scores.append(b_info["reward_components"]["webshop_reward"])
    finally:
        browser.close()
    assert len(set(scores)) >= 3  # the sample covers full and partial scores


@needs_browser
def test_browser_env_pages_invalid_steps_and_screenshot(cache: str) -> None:
    pytest.importorskip("playwright")
    from envgym.environments.webshop.browser_env import WebShopBrowserEnv

    env = WebShopBrowserEnv(catalogue_size=SIZE, cache_dir=cache, render_mode="rgb_array")
    try:
        assert not env.render().any()  # before the first reset: a black frame of the viewport's size
        obs, info = env.reset(seed=4)
        assert obs.startswith("WebShop") and info["admissible_actions"] == ["search[<query>]"]
        # one screenshot convention (issue 37): render() with render_mode="rgb_array", as MiniWoB; none in info
        shot = env.render()
        assert shot.shape == (800, 1000, 3) and str(shot.dtype) == "uint8" and shot.std() > 0
        assert "screenshot" not in info
        obs, _, _, _, info = env.step("click[buy now]")
        assert not info["action_valid"] and "nothing to click" in obs
        obs, _, _, _, info = env.step("search[yoga mat]")
        assert (
            info["action_valid"] and "Page 1 (Total results:" in obs and "click[next >]" in info["admissible_actions"]
        )
        obs, _, _, _, info = env.step("search[again]")
        assert not info["action_valid"] and "no search bar" in obs
        obs, _, _, _, info = env.step("CLICK[Next >]")
        assert info["action_valid"] and "Page 2" in obs and "screenshot" not in info
        assert not np.array_equal(env.render(), shot)  # the frame follows the page
    finally:
        env.close()
        env.close()
    with pytest.raises(InvalidKwargsError, match=r"render_mode='rgb_array'"):
        WebShopBrowserEnv(catalogue_size=SIZE, cache_dir=cache, screenshot=True)


@needs_browser
def test_no_browser_processes_left_after_close(cache: str) -> None:
    pytest.importorskip("playwright")
    from envgym.environments.webshop.browser_env import WebShopBrowserEnv

    from envgym.browser import shutdown_browsers

    shutdown_browsers()  # a browser that an earlier test of this worker left lingering would not be new here
    before = set(descendants(os.getpid()))
    first = WebShopBrowserEnv(catalogue_size=SIZE, cache_dir=cache)
    second = WebShopBrowserEnv(catalogue_size=SIZE, cache_dir=cache)
    first.reset(seed=0)
    second.reset(seed=1)  # the same worker: the same browser, another context
    procs = set(descendants(os.getpid())) - before
    cmdlines = {p: Path(f"/proc/{p}/cmdline").read_bytes() for p in _alive(procs)}
    browser = {p for p, c in cmdlines.items() if b"chrom" in c and b"--type=" not in c}  # not a helper process
    assert len(browser) == 1
    first.close()
    assert _alive(browser) == browser  # still in use by the second env (only its context closed)
    assert second.step("search[rug]")[4]["action_valid"]
    second.close()
    assert _wait_gone(procs) == set()  # neither running nor zombie


_CRASH = textwrap.dedent(
    """
    import os, sys
    from envgym.environments.webshop.browser_env import WebShopBrowserEnv
    env = WebShopBrowserEnv(catalogue_size={size}, cache_dir={cache!r})
    env.reset(seed=0)
    print("ready", flush=True)
    sys.stdin.readline()
    os._exit(3)  # a crash: no close(), no atexit handlers
    """
)


@needs_browser
def test_no_browser_processes_left_after_a_crash(cache: str) -> None:
    pytest.importorskip("playwright")
    script = _CRASH.format(size=SIZE, cache=cache)
    proc = subprocess.Popen(
        [sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stdin is not None
    assert proc.stdout.readline().strip() == "ready"
    procs = set(descendants(proc.pid))
    assert len(procs) >= 3 and any(b"chrom" in Path(f"/proc/{p}/cmdline").read_bytes() for p in procs)
    proc.stdin.write("\n")
    proc.stdin.flush()
    assert proc.wait(timeout=30) == 3
    assert _wait_gone(procs) == set()


@needs_browser
def test_a_run_folder_records_the_browser_pages_through_render(cache: str, tmp_path: Path) -> None:
    # what records screenshots (envgym run --out) reads render(): the browser env's pages are recorded too
    pytest.importorskip("playwright")
    config = RunConfig(
        env_id="envgym/WebShop-Browser-v0",
        agent="oracle",
        episodes=1,
        env_kwargs={"catalogue_size": SIZE, "cache_dir": cache, "render_mode": "rgb_array"},
    )
    run_result = run(config, out=tmp_path)
    traj = run_result.trajectories[0]
    assert traj.success and traj.num_turns >= 2
    shots = [turn.screenshot for turn in traj.turns] + [traj.extra["final_screenshot"]]
    assert shots == [f"screenshots/{traj.episode_id}/{k}.png" for k in range(traj.num_turns + 1)]
    assert all((tmp_path / shot).read_bytes().startswith(b"\x89PNG") for shot in shots)
