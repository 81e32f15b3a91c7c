"""Leaderboard bundles: one file holding what an agent did on a benchmark suite.

Format ``envgym-bundle/1``: a gzip-compressed UTF-8 JSON Lines file (``*.envgym.jsonl.gz``;
``zcat FILE | head -1`` shows the manifest). Line 1 is the **manifest**::

    {"format": "envgym-bundle/1",
     "suite": {"id", "name", "version", "sha256"},  "suite_spec": <the run's resolved suite.yaml>,
     "entries": [{"name", "env_id", "env_version", "env_kwargs", "max_turns", "episodes"}],
     "agent": {"spec", "name", "options", "metadata"}, "trials": K,
     "envgym_version", "packages", "git_commit", "created", "bundled_at",
     "episodes": <number of episode lines>, "text_cap": <chars kept of each text>,
     "content_hash": "<sha256 hex>"}

and every further line is one **episode**::

    {"entry", "seed", "trial", "index", "task_id", "scored", "termination_reason", "success",
     "total_reward", "reward_components", "num_turns", "invalid_actions", "truncated_by", "errors",
     "final_observation",
     "turns": [{"action", "reward", "reward_components", "action_valid", "terminated", "truncated",
                "observation", "completion", "format_ok"}]}

**Multi-agent entries** (PettingZoo Parallel env ids, see :mod:`envgym.rollout.multiagent`): the
manifest's entry adds ``"agents"`` (the env's ``possible_agents``, in order) and every agent's
record of a joint episode is its own episode line, adding ``"agent_id"`` and ``"position"`` (the
agent's place in ``agents``); an entry's lines come in (seed, trial, position) order. Lines of
single-agent entries carry neither key, so their bundles are what they were before.

Actions are kept whole (the replay steps them); observations and completions are cut to
``text_cap`` characters (the viewer's copy). Turns of envs whose run recorded screenshots (see
:mod:`envgym.rollout.screenshots`) add ``"screenshot"``, the PNG as a ``data:image/png;base64,``
URI, and such episodes ``"final_screenshot"`` likewise (the viewer shows them; the replay ignores
them). Episodes of infrastructure failures
(``env_error``, ``agent_error``, ``timeout``) are carried with ``"scored": false`` and their
errors, never as a zero.

``content_hash`` is the sha256 of the canonical serialisation (:func:`canonical_json`: sorted
keys, no spaces, UTF-8) of the manifest without ``content_hash``, then of each episode in file
order, each followed by a newline. It names the bundle (a resubmission of the same content is the
same entry) and catches edits made without recomputing it; it is *not* a signature (anyone can
recompute it). Honesty comes from the replay in :mod:`envgym.leaderboard.verify`.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import io
import json
import math
import os
import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from envgym._clock import utc_timestamp
from envgym.bench.run import BENCH_FORMAT, load_bench_run
from envgym.errors import ConfigError, EnvgymError
from envgym.registration import ENV_ID
from envgym.rollout.records import episode_record
from envgym.rollout.rundir import load_trajectories

__all__ = [
    "BENCH_FORMAT",
    "BUNDLE_FORMAT",
    "BUNDLE_SUFFIX",
    "Bundle",
    "BundleError",
    "bundle_bytes",
    "canonical_json",
    "content_hash",
    "make_bundle",
    "read_bundle",
    "write_bundle",
]

BUNDLE_FORMAT = "envgym-bundle/1"
BUNDLE_SUFFIX = ".envgym.jsonl.gz"
#: Characters kept of each observation and completion (the viewer's copy; actions stay whole).
DEFAULT_TEXT_CAP = 2000
#: Largest uncompressed bundle :func:`read_bundle` accepts by default (a gzip bomb stops here).
DEFAULT_MAX_UNCOMPRESSED = 256 * 1024 * 1024


class BundleError(EnvgymError, ValueError):
    """A bundle or a bench run folder is malformed (not a verification failure: it cannot be read)."""


@dataclass
class Bundle:
    """A bundle in memory: the manifest and the episode records, in file order."""

    manifest: dict[str, Any]
    episodes: list[dict[str, Any]] = field(default_factory=list)

    @property
    def content_hash(self) -> str:
        """The hash the manifest claims (see :func:`content_hash` for the recomputed one)."""
        return str(self.manifest.get("content_hash", ""))

    @property
    def suite_id(self) -> str:
        return str(self.manifest["suite"]["id"])

    @property
    def agent_name(self) -> str:
        return str(self.manifest["agent"]["name"])

    def recompute_hash(self) -> str:
        return content_hash(self.manifest, self.episodes)

    def rehash(self) -> Bundle:
        """Set ``content_hash`` to the hash of the current content (after building or editing)."""
        self.manifest["content_hash"] = self.recompute_hash()
        return self


def canonical_json(value: Any) -> bytes:
    """The canonical serialisation hashed into ``content_hash``: sorted keys, no whitespace,
    UTF-8, no NaN or infinity (they are not JSON)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode("utf-8")


def content_hash(manifest: Mapping[str, Any], episodes: Iterable[Mapping[str, Any]]) -> str:
    """sha256 (hex) of the manifest without ``content_hash`` and every episode, in order."""
    digest = hashlib.sha256()
    digest.update(canonical_json({k: v for k, v in manifest.items() if k != "content_hash"}) + b"\n")
    for episode in episodes:
        digest.update(canonical_json(episode) + b"\n")
    return digest.hexdigest()


# -- building a bundle from a bench run folder -----------------------------------------------------


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise BundleError(f"{path} is missing: is {path.parent} a bench run folder (envgym bench run)?") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise BundleError(f"{path} is not valid JSON ({err}).") from err


#: The keys of an :class:`~envgym.rollout.records.EpisodeRecord` a bundle keeps, in this order,
#: after its ``entry`` (``trial`` is the record's ``member``).
EPISODE_KEYS = (
    "seed",
    "trial",
    "index",
    "task_id",
    "scored",
    "termination_reason",
    "success",
    "total_reward",
    "reward_components",
    "num_turns",
    "invalid_actions",
    "truncated_by",
    "errors",
    "final_observation",
    "turns",
)


def _multiagent(trajectory: Any) -> Mapping[str, Any] | None:
    """The ``extra["multiagent"]`` block of a Parallel env's per-agent record (``None``: single agent)."""
    meta = trajectory.extra.get("multiagent") if isinstance(trajectory.extra, Mapping) else None
    return meta if isinstance(meta, Mapping) else None


def _screenshot_uri(folder: Path, relative: Any) -> str | None:
    """The PNG a run folder recorded at ``relative`` as a ``data:`` URI (``None`` when the path
    is not a PNG inside the folder's ``screenshots/`` or the file is gone)."""
    if not isinstance(relative, str) or not relative.startswith("screenshots/") or not relative.endswith(".png"):
        return None
    root = (folder / "screenshots").resolve()
    path = (folder / relative).resolve()
    if not path.is_relative_to(root) or not path.is_file():
        return None
    data = path.read_bytes()
    if not data.startswith(b"\x89PNG\r\n\x1a\n"):
        return None
    return "data:image/png;base64," + base64.b64encode(data).decode("ascii")


def _embed_screenshots(episode: dict[str, Any], folder: Path) -> None:
    """Replace the screenshot paths of an episode (its turns' and the final one) by the images.

    A bundle is one file: the screens travel in it, for the leaderboard's episode viewer.
    """
    for turn in episode["turns"]:
        if "screenshot" in turn:
            uri = _screenshot_uri(folder, turn["screenshot"])
            if uri is None:
                del turn["screenshot"]
            else:
                turn["screenshot"] = uri
    if "final_screenshot" in episode:
        uri = _screenshot_uri(folder, episode["final_screenshot"])
        if uri is None:
            del episode["final_screenshot"]
        else:
            episode["final_screenshot"] = uri


def _bundle_episode(entry: str, trajectory: Any, cap: int, folder: Path | None = None) -> dict[str, Any]:
    record: dict[str, Any] = dict(episode_record(trajectory, text_cap=cap))
    record["trial"] = record["member"]
    episode = {"entry": entry, **{key: record[key] for key in EPISODE_KEYS}}
    if "final_screenshot" in record:
        episode["final_screenshot"] = record["final_screenshot"]
    if folder is not None:
        _embed_screenshots(episode, folder)
    meta = _multiagent(trajectory)
    if meta is not None:  # one agent's record of a joint episode
        episode["agent_id"] = str(meta["agent_id"])
        episode["position"] = int(meta["position"])
    return episode


def make_bundle(
    run_dir: str | os.PathLike[str],
    *,
    name: str | None = None,
    metadata: Mapping[str, Any] | None = None,
    text_cap: int = DEFAULT_TEXT_CAP,
) -> Bundle:
    """Build the bundle of the bench run folder ``run_dir``.

    Args:
        run_dir: a folder written by ``envgym bench run`` (``bench.json``, ``suite.yaml``,
            ``entries/<name>/`` run folders).
        name: the agent name shown on the leaderboard (default: the agent spec).
        metadata: free ``key -> value`` facts about the agent (model, scaffold, authors, flags).
        text_cap: characters kept of each observation and completion.
    """
    if not isinstance(text_cap, int) or text_cap < 0:
        raise BundleError(f"text_cap must be an integer >= 0, got {text_cap!r}.")
    root = Path(run_dir)
    if not root.is_dir():
        raise BundleError(f"{root} is not a folder; pass the folder of a bench run (envgym bench run --out DIR).")
    try:
        run = load_bench_run(root)  # the bench owns its folder format; this checks it
        suite_spec = run.suite_document()
    except (ConfigError, OSError) as err:
        raise BundleError(str(err)) from err
    bench, suite, names, trials = run.meta, run.meta["suite"], run.entry_names, run.trials

    entries: list[dict[str, Any]] = []
    episodes: list[dict[str, Any]] = []
    last_finished = ""
    for entry in names:
        folder = run.entry_dir(entry)
        try:
            config = run.entry_config(entry)
        except ConfigError as err:
            raise BundleError(str(err)) from err
        env_id = config.get("env_id")
        match = ENV_ID.match(env_id) if isinstance(env_id, str) else None
        if match is None:
            raise BundleError(
                f"{folder / 'config.json'}: 'env_id' must be an id like 'envgym/Name-v0', got {env_id!r}."
            )
        try:
            trajectories = load_trajectories(folder)
        except (EnvgymError, ValueError) as err:
            raise BundleError(f"{folder}: cannot read the episodes ({err}).") from err
        item = {
            "name": entry,
            "env_id": env_id,
            "env_version": int(match["version"]),
            "env_kwargs": config.get("env_kwargs") or {},
            "max_turns": config.get("max_turns"),
            "episodes": len(trajectories),
        }
        metas = [m for m in map(_multiagent, trajectories) if m is not None]
        if metas:  # a Parallel entry: its agents, as every record names them
            item["agents"] = [str(a) for a in metas[0]["agents"]]
        entries.append(item)
        episodes += [_bundle_episode(entry, t, text_cap, folder) for t in trajectories]
        last_finished = max([last_finished, *(str(t.finished_at or "") for t in trajectories)])
    order = {n: i for i, n in enumerate(names)}
    episodes.sort(
        key=lambda e: (
            order[e["entry"]],
            e["seed"] if isinstance(e["seed"], int) else 0,
            e["trial"],
            e.get("position", 0),
        )
    )
    agent_spec = str(bench.get("agent") or "agent")
    git = bench.get("git_commit")
    manifest: dict[str, Any] = {
        "format": BUNDLE_FORMAT,
        "suite": {
            "id": str(suite["id"]),
            "name": str(suite["name"]),
            "version": str(suite.get("version", "")),
            "sha256": str(suite["sha256"]),
        },
        "suite_spec": suite_spec,
        "entries": entries,
        "agent": {
            "spec": agent_spec,
            "name": name or agent_spec,
            "options": dict(bench.get("agent_options") or {}),
            "metadata": {str(k): v for k, v in (metadata or {}).items()},
        },
        "trials": trials,
        "envgym_version": str(bench.get("envgym_version", "")),
        "packages": dict(bench.get("packages") or {}),
        "git_commit": git.get("commit") if isinstance(git, Mapping) else git,
        "created": str(bench.get("created", "")),
        # The run's last recorded episode, not the clock: bundling the same run (same name,
        # metadata and text cap) twice gives the same bundle, so a resubmission is the same entry.
        "bundled_at": last_finished or utc_timestamp("seconds"),
        "episodes": len(episodes),
        "text_cap": text_cap,
    }
    try:
        return Bundle(manifest, episodes).rehash()
    except ValueError as err:  # allow_nan=False: a NaN somewhere in the run's records
        raise BundleError(f"{root}: the run holds a value JSON cannot carry ({err}).") from err


# -- writing and reading ---------------------------------------------------------------------------


def bundle_bytes(bundle: Bundle) -> bytes:
    """The bundle file's bytes (gzip with a zero timestamp: the same bundle gives the same bytes)."""
    raw = io.BytesIO()
    with gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, compresslevel=6) as gz:
        gz.write(canonical_json(bundle.manifest) + b"\n")
        for episode in bundle.episodes:
            gz.write(canonical_json(episode) + b"\n")
    return raw.getvalue()


def write_bundle(bundle: Bundle, path: str | os.PathLike[str]) -> Path:
    """Write ``bundle`` to ``path`` atomically (a temporary file, then a rename); return the path."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(target.name + ".tmp")
    tmp.write_bytes(bundle_bytes(bundle))
    os.replace(tmp, target)
    return target


def _decompress(data: bytes, max_bytes: int) -> bytes:
    if data[:2] != b"\x1f\x8b":
        raise BundleError(
            "not a bundle: a bundle is a gzip file (it starts with bytes 1f 8b); "
            f"got {data[:16]!r}. Make one with `envgym leaderboard submit RUN --out FILE`."
        )
    decoder = zlib.decompressobj(16 + zlib.MAX_WBITS)
    out = bytearray()
    try:
        chunk = decoder.decompress(data, max_bytes + 1)
        out += chunk
        while decoder.unconsumed_tail and len(out) <= max_bytes:
            out += decoder.decompress(decoder.unconsumed_tail, max_bytes + 1 - len(out))
    except zlib.error as err:
        raise BundleError(f"the bundle's gzip stream is damaged ({err}).") from err
    if len(out) > max_bytes:
        raise BundleError(f"the bundle unpacks to more than {max_bytes} bytes, the limit; split the run or raise it.")
    if not decoder.eof:
        raise BundleError("the bundle's gzip stream is cut short (the file is truncated).")
    return bytes(out)


def _expect(cond: bool, where: str, what: str, value: Any) -> None:
    if not cond:
        raise BundleError(f"{where}: expected {what}, got {value!r:.120}.")


def _is_num(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _check_manifest(m: Any) -> None:
    _expect(isinstance(m, dict), "manifest (line 1)", "a JSON object", m)
    _expect(m.get("format") == BUNDLE_FORMAT, "manifest", f"format {BUNDLE_FORMAT!r}", m.get("format"))
    suite = m.get("suite")
    _expect(
        isinstance(suite, dict) and all(isinstance(suite.get(k), str) for k in ("id", "name", "version", "sha256")),
        "manifest.suite",
        "an object with text id, name, version and sha256",
        suite,
    )
    entries = m.get("entries")
    _expect(isinstance(entries, list) and bool(entries), "manifest.entries", "a non-empty list", entries)
    for i, entry in enumerate(entries):
        ok = (
            isinstance(entry, dict)
            and isinstance(entry.get("name"), str)
            and isinstance(entry.get("env_id"), str)
            and isinstance(entry.get("env_version"), int)
            and isinstance(entry.get("env_kwargs"), dict)
            and (entry.get("max_turns") is None or isinstance(entry.get("max_turns"), int))
        )
        _expect(ok, f"manifest.entries[{i}]", "name, env_id, env_version (int), env_kwargs (object), max_turns", entry)
        if "agents" in entry:
            agents = entry["agents"]
            _expect(
                isinstance(agents, list) and bool(agents) and all(isinstance(a, str) for a in agents),
                f"manifest.entries[{i}].agents",
                "a non-empty list of agent ids (text)",
                agents,
            )
    agent = m.get("agent")
    _expect(
        isinstance(agent, dict)
        and isinstance(agent.get("spec"), str)
        and isinstance(agent.get("name"), str)
        and 0 < len(agent["name"]) <= 200
        and len(agent["spec"]) <= 500
        and isinstance(agent.get("metadata", {}), dict),
        "manifest.agent",
        "an object with a text spec (up to 500 characters), a name (1 to 200) and a metadata object",
        agent,
    )
    trials = m.get("trials")
    _expect(
        isinstance(trials, int) and not isinstance(trials, bool) and trials >= 1, "manifest.trials", "int >= 1", trials
    )
    _expect(
        isinstance(m.get("content_hash"), str), "manifest.content_hash", "a sha256 hex string", m.get("content_hash")
    )
    _expect(isinstance(m.get("episodes"), int), "manifest.episodes", "the number of episode lines", m.get("episodes"))


def _check_episode(e: Any, line: int) -> None:
    where = f"episode on line {line}"
    _expect(isinstance(e, dict), where, "a JSON object", e)
    _expect(isinstance(e.get("entry"), str), f"{where}: entry", "text", e.get("entry"))
    for key in ("seed", "trial"):
        value = e.get(key)
        _expect(isinstance(value, int) and not isinstance(value, bool), f"{where}: {key}", "an integer", value)
    _expect(isinstance(e.get("scored"), bool), f"{where}: scored", "true or false", e.get("scored"))
    _expect(isinstance(e.get("success"), bool), f"{where}: success", "true or false", e.get("success"))
    if "agent_id" in e or "position" in e:  # one agent's record of a multi-agent episode
        _expect(isinstance(e.get("agent_id"), str), f"{where}: agent_id", "text", e.get("agent_id"))
        position = e.get("position")
        _expect(
            isinstance(position, int) and not isinstance(position, bool) and position >= 0,
            f"{where}: position",
            "an integer >= 0",
            position,
        )
    _expect(
        isinstance(e.get("termination_reason"), str),
        f"{where}: termination_reason",
        "text",
        e.get("termination_reason"),
    )
    _expect(_is_num(e.get("total_reward")), f"{where}: total_reward", "a number", e.get("total_reward"))
    turns = e.get("turns")
    _expect(isinstance(turns, list), f"{where}: turns", "a list", turns)
    _expect(
        e.get("num_turns") == len(turns),
        f"{where}: num_turns",
        f"the number of turns ({len(turns)})",
        e.get("num_turns"),
    )
    for i, turn in enumerate(turns):
        tw = f"{where}, turn {i}"
        _expect(isinstance(turn, dict), tw, "a JSON object", turn)
        _expect(isinstance(turn.get("action"), str), f"{tw}: action", "text", turn.get("action"))
        _expect(_is_num(turn.get("reward")), f"{tw}: reward", "a number", turn.get("reward"))
        components = turn.get("reward_components")
        _expect(
            isinstance(components, dict) and all(_is_num(v) for v in components.values()),
            f"{tw}: reward_components",
            "an object of numbers",
            components,
        )
        for key in ("action_valid", "terminated", "truncated"):
            _expect(isinstance(turn.get(key), bool), f"{tw}: {key}", "true or false", turn.get(key))


#: Longest integer literal a bundle may hold, in digits (seeds, counts and rewards need few; a
#: longer one is refused before Python's own limit on int parsing, whose message suggests
#: raising a process-wide setting).
MAX_INT_DIGITS = 100


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number; write finite numbers only")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"the number {text:.40} is too large for a float (it reads as infinity)")
    return value


def _bounded_int(text: str) -> int:
    digits = len(text.lstrip("-"))
    if digits > MAX_INT_DIGITS:
        raise ValueError(f"an integer of {digits} digits is longer than the {MAX_INT_DIGITS} digits a bundle may use")
    return int(text)


def _parse_line(line: bytes, number: int) -> Any:
    """One JSON Lines record; every way it can fail is a :class:`BundleError` with a one-line reason."""
    where = f"line {number} of the bundle"
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as err:
        raise BundleError(f"{where} is not valid UTF-8 ({err}); bundles are UTF-8 JSON Lines.") from err
    try:
        return json.loads(text, parse_constant=_refuse_constant, parse_float=_finite_float, parse_int=_bounded_int)
    except RecursionError:
        # Raised by the parser on arrays or objects nested ~1000 deep; the traceback is of no use.
        raise BundleError(f"{where} nests arrays or objects too deeply to parse; bundles nest a few levels.") from None
    except json.JSONDecodeError as err:
        raise BundleError(f"{where} is not valid JSON ({err}).") from err
    except ValueError as err:  # raised by the parse_* hooks above
        raise BundleError(f"{where} is not valid bundle JSON ({err}).") from err


def parse_bundle(text: bytes) -> Bundle:
    """Parse uncompressed bundle lines, checking the structure of every record.

    Refused (:class:`BundleError`): invalid UTF-8, invalid JSON, ``NaN``/``Infinity`` literals,
    floats that overflow to infinity, integers longer than :data:`MAX_INT_DIGITS` digits and
    nesting too deep for the parser.
    """
    lines = [line for line in text.split(b"\n") if line.strip()]
    if not lines:
        raise BundleError("the bundle is empty: expected a manifest line and one line per episode.")
    records = [_parse_line(line, number) for number, line in enumerate(lines, start=1)]
    manifest, episodes = records[0], records[1:]
    _check_manifest(manifest)
    for number, episode in enumerate(episodes, start=2):
        _check_episode(episode, number)
    if manifest["episodes"] != len(episodes):
        raise BundleError(
            f"the manifest announces {manifest['episodes']} episodes but the bundle holds {len(episodes)}: "
            "the file is truncated or was edited."
        )
    return Bundle(manifest, episodes)


def read_bundle(source: str | os.PathLike[str] | bytes, *, max_bytes: int = DEFAULT_MAX_UNCOMPRESSED) -> Bundle:
    """Read a bundle from a file path or from its bytes.

    Raises:
        BundleError: not gzip, damaged or truncated, larger than ``max_bytes`` once unpacked, not
            UTF-8 JSON Lines (see :func:`parse_bundle`), or a record without the fields the format
            requires (the message, one line, names the line).
    """
    if isinstance(source, (bytes, bytearray, memoryview)):
        data = bytes(source)
    else:
        path = Path(source)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            raise BundleError(f"{path} does not exist; make a bundle with `envgym leaderboard submit RUN`.") from None
        except IsADirectoryError:
            raise BundleError(
                f"{path} is a folder; to bundle a bench run use `envgym leaderboard submit {path}`."
            ) from None
    return parse_bundle(_decompress(data, max_bytes))


def episode_key(episode: Mapping[str, Any]) -> tuple[str, int, int]:
    """``(entry, seed, trial)``: what identifies an episode (a joint one, for several agents)."""
    return (episode["entry"], episode["seed"], episode["trial"])


def record_key(episode: Mapping[str, Any]) -> tuple[str, int, int, str | None]:
    """``(entry, seed, trial, agent_id)``: what identifies an episode line of a bundle
    (``agent_id`` is ``None`` for a single-agent episode)."""
    return (episode["entry"], episode["seed"], episode["trial"], episode.get("agent_id"))


def describe(keys: Sequence[tuple[Any, ...]], limit: int = 5) -> str:
    """``entry 'x' seed 3 trial 0[ agent 'agent_1'], ...`` for messages (at most ``limit`` shown);
    keys are :func:`episode_key` or :func:`record_key` tuples."""

    def one(key: tuple[Any, ...]) -> str:
        text = f"entry {key[0]!r} seed {key[1]} trial {key[2]}"
        return text + (f" agent {key[3]!r}" if len(key) > 3 and key[3] is not None else "")

    shown = ", ".join(one(k) for k in list(keys)[:limit])
    more = len(keys) - limit
    return shown + (f" and {more} more" if more > 0 else "")
