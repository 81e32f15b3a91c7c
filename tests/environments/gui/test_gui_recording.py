"""Screenshots in run folders: ``envgym run --out`` records the frames of ``rgb_array`` envs as
PNG files beside ``episodes.jsonl`` (never inline), for every backend, and only then."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from gui_toy_envs import FRAME_SHAPE, PAINT_DICT_ID, PAINT_ID, frame_colour

from envgym.rollout import RunConfig
from envgym.rollout.records import episode_record, recordable_observation
from envgym.rollout.rundir import load_trajectories
from envgym.rollout.runner import run

Image = pytest.importorskip("PIL.Image", reason="screenshots are PNG files written with Pillow (envgym[gui])")


def _png(path: Path) -> np.ndarray:
    with Image.open(path) as image:
        return np.asarray(image.convert("RGB"))


def _secret(task_id: str) -> int:
    return int(task_id.split("-")[1])


def _check_folder(out: Path, episodes: int) -> None:
    lines = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]
    assert len(lines) == episodes
    for line in lines:
        episode, turns = line["episode_id"], line["turns"]
        secret = _secret(line["task"]["id"])
        last = None
        for k, turn in enumerate(turns):
            # the screen the agent saw before action k: k actions played, the previous guess shown
            assert turn["screenshot"] == f"screenshots/{episode}/{k}.png"
            pixels = _png(out / turn["screenshot"])
            assert pixels.shape == FRAME_SHAPE
            assert (pixels == frame_colour(k, last, secret)).all()
            if turn["action_valid"]:
                last = int(turn["action"])
        final = line["extra"]["final_screenshot"]
        assert final == f"screenshots/{episode}/{len(turns)}.png"
        assert (_png(out / final) == frame_colour(len(turns), last, secret)).all()
        files = sorted(p.name for p in (out / "screenshots" / episode).iterdir())
        assert files == sorted(f"{k}.png" for k in range(len(turns) + 1))  # no partial files left


@pytest.mark.parametrize("backend", ["inproc", "process"])
def test_a_run_folder_records_each_turns_screen_as_a_png(tmp_path: Path, backend: str) -> None:
    config = RunConfig(
        env_id=PAINT_ID,
        agent="random",
        episodes=3,
        env_kwargs={"render_mode": "rgb_array"},
        backend=backend,
        workers=1,
    )
    result = run(config, out=tmp_path)
    _check_folder(tmp_path, 3)
    # the records read back keep the paths, and the episode projection (bundles, --per-episode) too
    trajectories = load_trajectories(tmp_path)
    assert [t.screenshot for t in trajectories[0].turns] == [
        f"screenshots/{trajectories[0].episode_id}/{k}.png" for k in range(trajectories[0].num_turns)
    ]
    record = episode_record(result.trajectories[0])
    assert record["turns"][0]["screenshot"] == f"screenshots/{record['episode_id']}/0.png"
    assert record["final_screenshot"] == f"screenshots/{record['episode_id']}/{record['num_turns']}.png"


def test_no_frames_without_rgb_array_or_without_a_folder(tmp_path: Path) -> None:
    run(RunConfig(env_id=PAINT_ID, agent="random", episodes=2), out=tmp_path / "text")
    text = (tmp_path / "text" / "episodes.jsonl").read_text()
    assert "screenshot" not in text  # records of envs without frames are unchanged
    assert not (tmp_path / "text" / "screenshots").exists()
    in_memory = run(RunConfig(env_id=PAINT_ID, agent="random", episodes=2, env_kwargs={"render_mode": "rgb_array"}))
    assert all(t.screenshot is None for traj in in_memory.trajectories for t in traj.turns)
    assert "screenshot" not in json.dumps(in_memory.trajectories[0].to_dict())


def test_images_inside_observations_are_never_inlined(tmp_path: Path) -> None:
    run(RunConfig(env_id=PAINT_DICT_ID, agent="random", episodes=2), out=tmp_path)
    line = json.loads((tmp_path / "episodes.jsonl").read_text().splitlines()[0])
    assert line["turns"][0]["observation"]["image"] == "<image 12x16x3 uint8>"
    assert line["turns"][0]["observation"]["text"].startswith("Guess the number")
    assert line["final_observation"]["image"] == "<image 12x16x3 uint8>"
    assert (tmp_path / line["turns"][0]["screenshot"]).is_file()
    # only uint8 colour images are replaced: numbers and other arrays stay as they were
    assert recordable_observation({"a": np.zeros((2, 2), np.float32), "b": "x"})["b"] == "x"
    assert recordable_observation(np.zeros((2, 2), np.float32)).shape == (2, 2)
    assert recordable_observation(np.zeros((4, 5, 4), np.uint8)) == "<image 4x5x4 uint8>"


# ---------------------------------------------------------------- envgym play and envgym run


def _invoke(*args: str, input: str | None = None) -> Any:
    from typer.testing import CliRunner

    from envgym.cli import app

    return CliRunner().invoke(app, list(args), input=input)


def test_play_saves_the_screen_of_every_turn_and_prints_its_path(tmp_path: Path) -> None:
    import envgym

    env = envgym.make(PAINT_ID)
    _, info = env.reset(seed=5)
    secret = _secret(info["task"]["id"])
    wrong = 1 if secret != 1 else 2
    result = _invoke(
        "play", PAINT_ID, "--seed", "5", "--kwargs", "render_mode=rgb_array", "--screenshots",
        str(tmp_path / "shots"), input=f"{wrong}\nnonsense\n{secret}\n",
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    paths = re.findall(r"screenshot: (\S+)", result.stdout.replace("\n", " ").replace(" png", "png"))
    assert [Path(p).name for p in paths] == ["turn-0.png", "turn-1.png", "turn-2.png", "turn-3.png"]
    # each file is the screen the person saw after that many actions (the invalid one counts a turn)
    expected = [frame_colour(0, None, secret), frame_colour(1, wrong, secret), frame_colour(2, wrong, secret),
                frame_colour(3, secret, secret)]  # fmt: skip
    for k, colour in enumerate(expected):
        assert (_png(tmp_path / "shots" / f"turn-{k}.png") == colour).all()
    assert "Episode solved." in result.stdout


def test_play_prints_a_dict_observation_part_by_part(tmp_path: Path) -> None:
    result = _invoke("play", PAINT_DICT_ID, "--seed", "1", "--screenshots", str(tmp_path), input=":q\n")
    assert result.exit_code == 0, result.stderr
    assert "[text]\nGuess the number" in result.stdout
    assert "[image] image 16x12 (saved as a screenshot)" in result.stdout
    assert (tmp_path / "turn-0.png").is_file()


def test_play_of_a_text_env_saves_nothing(tmp_path: Path) -> None:
    result = _invoke("play", PAINT_ID, "--seed", "1", "--screenshots", str(tmp_path / "none"), input=":q\n")
    assert result.exit_code == 0, result.stderr
    assert "screenshot:" not in result.stdout and not (tmp_path / "none").exists()


def test_envgym_run_out_records_screenshots(tmp_path: Path) -> None:
    result = _invoke(
        "run", PAINT_ID, "--agent", "random", "--episodes", "2", "--kwargs", "render_mode=rgb_array",
        "--out", str(tmp_path),
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    _check_folder(tmp_path, 2)


# ---------------------------------------------------------------- leaderboard: bundle and viewer

_SUITE = """\
name: painttest
version: 1
description: screenshots in bundles
defaults: {episodes: 2, split: train, trials: 1}
entries:
  - name: paint
    env: envgymtest/Paint-v0
    kwargs: {render_mode: rgb_array}
    seeds: {start: 0, count: 2}
    max_turns: 8
"""


def test_bundles_carry_the_screens_and_the_episode_viewer_shows_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import base64
    import io

    from envgym.bench.run import run_suite
    from envgym.leaderboard.bundle import make_bundle, read_bundle, write_bundle
    from envgym.leaderboard.pages import episode_page
    from envgym.leaderboard.store import Store
    from envgym.leaderboard.verify import verify_bundle

    suites = tmp_path / "suites"
    suites.mkdir()
    (suites / "painttest-v1.yaml").write_text(_SUITE)
    monkeypatch.setenv("ENVGYM_BENCHMARKS", str(suites))
    run_suite(suites / "painttest-v1.yaml", "random", out=tmp_path / "run", num_envs=2)
    bundle = read_bundle(write_bundle(make_bundle(tmp_path / "run"), tmp_path / "b.envgym.jsonl.gz"))
    first = bundle.episodes[0]
    uri = first["turns"][0]["screenshot"]
    assert uri.startswith("data:image/png;base64,")
    with Image.open(io.BytesIO(base64.b64decode(uri.split(",", 1)[1]))) as image:
        assert np.asarray(image.convert("RGB")).shape == FRAME_SHAPE
    assert first["final_screenshot"].startswith("data:image/png;base64,")

    verified = verify_bundle(bundle)  # the replay ignores the screens
    with Store(tmp_path / "lb.db") as store:
        submission, _ = store.add(verified)
        episode = store.episode(submission["id"], 0)
        assert episode is not None
        page = episode_page(submission, episode, store.episodes(submission["id"]), lambda link: link)
    assert page.count("<figure class='screenshot'><img src='data:image/png;base64,") == first["num_turns"] + 1

    # a record pointing anywhere but at an inline PNG shows no image
    hostile = dict(episode, turns=[dict(episode["turns"][0], screenshot="https://example.com/x.png' onerror='x")])
    hostile["final_screenshot"] = "javascript:alert(1)"
    page = episode_page(submission, hostile, [hostile], lambda link: link)
    assert "<figure class='screenshot'>" not in page and "example.com" not in page


def test_encode_png_round_trips_and_refuses_what_is_not_an_rgb_image() -> None:
    import io

    from envgym.rollout.screenshots import encode_png

    rng = np.random.default_rng(0)
    for shape in ((1, 1, 3), (7, 13, 3), (360, 480, 3)):
        frame = rng.integers(0, 256, shape, dtype=np.uint8)
        with Image.open(io.BytesIO(encode_png(frame))) as image:
            assert image.mode == "RGB" and image.size == (shape[1], shape[0])
            np.testing.assert_array_equal(np.asarray(image), frame)
    for bad in (np.zeros((4, 4), np.uint8), np.zeros((4, 4, 3), np.float32), np.zeros((0, 4, 3), np.uint8)):
        with pytest.raises(ValueError, match="H x W x 3 uint8"):
            encode_png(bad)
