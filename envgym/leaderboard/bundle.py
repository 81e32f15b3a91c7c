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
import binascii
import gzip
import hashlib
import io
import json
import math
import os
import re
import struct
import zlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any

from envgym._clock import utc_timestamp
from envgym.bench.run import BENCH_FORMAT, load_bench_run
from envgym.core import TerminationReason
from envgym.errors import ConfigError, EnvgymError
from envgym.registration import ENV_ID
from envgym.rollout.records import episode_record
from envgym.rollout.rundir import load_trajectories

__all__ = [
    "BENCH_FORMAT",
    "BUNDLE_FORMAT",
    "BUNDLE_SUFFIX",
    "DEFAULT_LIMITS",
    "Bundle",
    "BundleError",
    "BundleLimits",
    "bundle_bytes",
    "canonical_json",
    "check_agent_name",
    "check_screenshot",
    "content_hash",
    "episodes_key",
    "make_bundle",
    "parse_bundle",
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
    """A bundle or a bench run folder is malformed (not a verification failure: it cannot be read).

    Attributes:
        status: the HTTP status a server answers with: ``400`` (malformed, the default) or ``413``
            (a size cap of :class:`BundleLimits` was exceeded).
    """

    def __init__(self, message: str, *, status: int = 400) -> None:
        super().__init__(message)
        self.status = status

    def __reduce__(self) -> Any:  # the keyword-only status survives pickling (process pool)
        return (_bundle_error, (str(self), self.status))


def _bundle_error(message: str, status: int) -> BundleError:
    return BundleError(message, status=status)


def _too_large(message: str) -> BundleError:
    return BundleError(message, status=413)


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


def episodes_key(suite_id: str, agent_spec: str, episodes: Iterable[Mapping[str, Any]]) -> str:
    """sha256 (hex) of what a run *is*: the suite, the agent spec, and every episode's entry,
    seed, trial, agent id and actions, in a fixed order.

    Two bundles of the same run key alike whatever the agent's display name, metadata, creation
    time or text cap (none of which changes an episode), so the store can refuse to rank the same
    run twice. Computed from fields a stored submission keeps too, so stored rows can be keyed.
    """
    keyed = sorted(
        (
            (
                str(e.get("entry")),
                int(e.get("seed") or 0),
                int(e.get("trial") or 0),
                str(e.get("agent_id") or ""),
                [t.get("action") for t in e.get("turns") or () if isinstance(t, Mapping)],
            )
            for e in episodes
        ),
        key=lambda k: k[:4],
    )
    return hashlib.sha256(canonical_json({"suite": suite_id, "agent": agent_spec, "episodes": keyed})).hexdigest()


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
    if isinstance(text_cap, bool) or not isinstance(text_cap, int) or not 0 <= text_cap <= DEFAULT_LIMITS.max_text_cap:
        raise BundleError(f"text_cap must be an integer from 0 to {DEFAULT_LIMITS.max_text_cap}, got {text_cap!r}.")
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
        bundle = Bundle(manifest, episodes).rehash()
    except ValueError as err:  # allow_nan=False: a NaN somewhere in the run's records
        raise BundleError(f"{root}: the run holds a value JSON cannot carry ({err}).") from err
    # The server's checks, here: a bundle it would refuse (metadata too large, a bad name) is
    # refused before it is uploaded.
    _check_manifest(bundle.manifest)
    return bundle


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


# -- limits ------------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class BundleLimits:
    """Size and range caps a bundle is held to while it is read, each checked before the work or
    the memory it bounds (a line is refused while it streams in, before it is parsed).

    A field over its cap is refused with :class:`BundleError` ``status=413`` and a one-line reason;
    a value out of range or of the wrong type with ``status=400``. The defaults are far above what
    honest bench runs produce (the published bundles use well under a tenth of each).
    """

    max_unpacked_bytes: int = DEFAULT_MAX_UNCOMPRESSED
    """Largest uncompressed bundle (a gzip bomb stops here)."""
    max_manifest_bytes: int = 1024 * 1024
    """Largest manifest line (line 1: suite copy, entries, agent, packages)."""
    max_line_bytes: int = 16 * 1024 * 1024
    """Largest episode line (one episode with all its turns and screenshots)."""
    max_trials: int = 1000
    """Largest ``trials``; the suite's own limit, checked by the verifier, is smaller."""
    max_episodes: int = 1_000_000
    """Largest number of episode lines (``episodes``, and each ``entries[].episodes``)."""
    max_entries: int = 1000
    """Largest number of suite entries."""
    max_text_cap: int = 100_000
    """Largest ``text_cap`` (characters kept of each observation and completion)."""
    max_metadata_bytes: int = 16 * 1024
    """Largest ``agent.metadata`` and ``agent.options``, each as canonical JSON."""
    max_action_chars: int = 256 * 1024
    """Largest action of any environment (the verifier applies each environment's own, smaller cap)."""
    max_turns: int = 10_000
    """Most turns of one episode."""
    max_errors_bytes: int = 64 * 1024
    """Largest ``errors`` list of one episode, as canonical JSON."""
    max_state_bytes: int = 64 * 1024
    """Largest ``final_state`` (an environment's own regrade record) and non-text observation."""
    max_screenshot_bytes: int = 2 * 1024 * 1024
    """Largest screenshot, as PNG bytes."""
    max_screenshot_side: int = 4096
    """Largest screenshot width or height, in pixels (read from the PNG header)."""
    max_screenshot_pixels: int = 4096 * 2048
    """Largest screenshot area (width x height): what a viewer's browser decodes."""
    max_screenshots_bytes: int = 64 * 1024 * 1024
    """Largest sum of the screenshots of a bundle, as PNG bytes."""

    def __post_init__(self) -> None:
        for name, value in vars(self).items():
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"BundleLimits.{name} must be an integer >= 1, got {value!r}.")


DEFAULT_LIMITS = BundleLimits()

#: Room a cut text takes past ``text_cap``: the marker ``… [N more characters cut]``.
_CUT_MARK_ROOM = 64
_PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
_PNG_URI = "data:image/png;base64,"
_HEX64 = re.compile(r"[0-9a-f]{64}")
_GIT_COMMIT = re.compile(r"[0-9a-f]{7,64}")
#: A version string: ``0.1.0``, ``1.2.3rc1``, ``0.1.0.dev4+g1a2b3c``: digits first, at most 64 characters.
_VERSION = re.compile(r"[0-9]{1,9}(\.[0-9]{1,9}){0,5}([.+_!-]?[0-9A-Za-z]{1,32}){0,4}")
#: Control characters and bidirectional overrides: never part of a name (they forge what a page
#: or a terminal shows).
_FORGING = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
#: Where an episode ends: the values of :class:`~envgym.core.TerminationReason`.
TERMINATION_REASONS = frozenset(r.value for r in TerminationReason)

MANIFEST_KEYS = frozenset(
    {
        "format", "suite", "suite_spec", "entries", "agent", "trials", "envgym_version", "packages",
        "git_commit", "created", "bundled_at", "episodes", "text_cap", "content_hash",
    }
)  # fmt: skip
ENTRY_KEYS = frozenset({"name", "env_id", "env_version", "env_kwargs", "max_turns", "episodes", "agents"})
AGENT_KEYS = frozenset({"spec", "name", "options", "metadata"})
EPISODE_LINE_KEYS = frozenset({"entry", *EPISODE_KEYS, "final_screenshot", "agent_id", "position", "final_state"})
TURN_KEYS = frozenset(
    {"action", "reward", "reward_components", "action_valid", "terminated", "truncated", "observation",
     "completion", "format_ok", "screenshot"}
)  # fmt: skip


# -- reading ---------------------------------------------------------------------------------------


def _lines(data: bytes, limits: BundleLimits) -> Iterator[tuple[int, bytes]]:
    """The non-blank lines of the gzip stream ``data``, numbered from 1, decompressed a chunk at a
    time: the total and each line are held to their caps while they stream in, so an oversized
    line is refused before it is whole, let alone parsed."""
    if data[:2] != b"\x1f\x8b":
        raise BundleError(
            "not a bundle: a bundle is a gzip file (it starts with bytes 1f 8b); "
            f"got {data[:16]!r}. Make one with `envgym leaderboard submit RUN --out FILE`."
        )
    decoder = zlib.decompressobj(16 + zlib.MAX_WBITS)
    tail: bytes = data
    pending = bytearray()
    total = 0
    number = 0
    chunk_size = 1024 * 1024
    while True:
        try:
            chunk = decoder.decompress(tail, chunk_size)
        except zlib.error as err:
            raise BundleError(f"the bundle's gzip stream is damaged ({err}).") from err
        tail = decoder.unconsumed_tail
        total += len(chunk)
        if total > limits.max_unpacked_bytes:
            raise _too_large(
                f"the bundle unpacks to more than {limits.max_unpacked_bytes} bytes, the limit; "
                "split the run or raise it."
            )
        start = 0
        if chunk:
            scan = len(pending)  # the bytes before it hold no newline: search only the new ones
            pending += chunk
            while (end := pending.find(b"\n", max(start, scan))) >= 0:
                line = bytes(pending[start:end])
                start = end + 1
                if line.strip():
                    number += 1
                    _check_line_size(number, len(line), limits)
                    yield number, line
            del pending[:start]
            _check_line_size(number + 1, len(pending), limits)
        if decoder.eof:
            break
        if not chunk and not tail:
            raise BundleError("the bundle's gzip stream is cut short (the file is truncated).")
    if bytes(pending).strip():
        yield number + 1, bytes(pending)


def _check_line_size(number: int, size: int, limits: BundleLimits) -> None:
    cap = limits.max_manifest_bytes if number == 1 else limits.max_line_bytes
    if size > cap:
        what = "the manifest (line 1)" if number == 1 else f"line {number} of the bundle"
        raise _too_large(
            f"{what} is longer than {cap} bytes, the limit; a bundle keeps "
            f"{'the agent metadata small' if number == 1 else 'observations and completions cut to text_cap'}."
        )


def _expect(cond: bool, where: str, what: str, value: Any) -> None:
    if not cond:
        raise BundleError(f"{where}: expected {what}, got {value!r:.120}.")


def _is_num(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _is_int(value: Any, low: int, high: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high


def _is_text(value: Any, high: int, low: int = 0) -> bool:
    return isinstance(value, str) and low <= len(value) <= high


def _json_size(value: Any) -> int:
    return len(canonical_json(value))


def _cap_json(value: Any, cap: int, where: str) -> None:
    size = _json_size(value)
    if size > cap:
        raise _too_large(f"{where} is {size} bytes as JSON, more than the {cap} allowed; keep it short.")


def _unknown(record: Mapping[str, Any], known: frozenset[str], where: str) -> None:
    if record.keys() <= known:
        return
    extra = sorted(k for k in record if k not in known)
    if extra:
        raise BundleError(
            f"{where}: unknown field(s) {', '.join(repr(k[:40]) for k in extra[:5])}; "
            f"expected only {', '.join(sorted(known))}."
        )


def _check_date(value: Any, where: str) -> None:
    ok = _is_text(value, 40, 10)
    if ok:
        try:
            datetime.fromisoformat(value)
        except ValueError:
            ok = False
    _expect(ok, where, "an ISO 8601 date and time such as '2026-11-26T15:39:49+00:00'", value)


def _check_name(value: Any, where: str, high: int, low: int = 1) -> None:
    _expect(_is_text(value, high, low), where, f"text of {low} to {high} characters", value)
    match = _FORGING.search(value)
    if match is not None:
        raise BundleError(
            f"{where}: control or bidirectional-override character {match.group()!r} at position {match.start()}; "
            "names are plain text (remove it)."
        )


def check_agent_name(value: Any) -> str:
    """``value`` if it can name an agent on the board (as a bundle's ``manifest.agent.name``:
    plain text of 1 to 200 characters), else :class:`BundleError` saying why."""
    _check_name(value, "agent name", 200)
    return str(value)


def _check_manifest(m: Any, limits: BundleLimits = DEFAULT_LIMITS) -> None:
    _expect(isinstance(m, dict), "manifest (line 1)", "a JSON object", m)
    _expect(m.get("format") == BUNDLE_FORMAT, "manifest", f"format {BUNDLE_FORMAT!r}", m.get("format"))
    _unknown(m, MANIFEST_KEYS, "manifest")
    suite = m.get("suite")
    _expect(
        isinstance(suite, dict)
        and set(suite) == {"id", "name", "version", "sha256"}
        and _is_text(suite["id"], 100, 1)
        and _is_text(suite["name"], 100, 1)
        and _is_text(suite["version"], 20)
        and isinstance(suite["sha256"], str)
        and _HEX64.fullmatch(suite["sha256"]) is not None,
        "manifest.suite",
        "an object with text id, name, version (up to 100, 100 and 20 characters) and a sha256 (64 hex digits)",
        suite,
    )
    spec = m.get("suite_spec")
    _expect(isinstance(spec, dict), "manifest.suite_spec", "the run's suite (an object)", spec)
    trials = m.get("trials")
    _expect(_is_int(trials, 1, limits.max_trials), "manifest.trials", f"int >= 1 (at most {limits.max_trials})", trials)
    announced = m.get("episodes")
    _expect(
        _is_int(announced, 0, limits.max_episodes),
        "manifest.episodes",
        f"the number of episode lines (0 to {limits.max_episodes})",
        announced,
    )
    entries = m.get("entries")
    _expect(
        isinstance(entries, list) and 0 < len(entries) <= limits.max_entries,
        "manifest.entries",
        f"a non-empty list (at most {limits.max_entries} entries)",
        entries,
    )
    counted = 0
    for i, entry in enumerate(entries):
        where = f"manifest.entries[{i}]"
        ok = (
            isinstance(entry, dict)
            and _is_text(entry.get("name"), 200, 1)
            and _is_text(entry.get("env_id"), 200)
            and ENV_ID.match(entry["env_id"]) is not None
            and _is_int(entry.get("env_version"), 0, 1_000_000)
            and isinstance(entry.get("env_kwargs"), dict)
            and (entry.get("max_turns") is None or _is_int(entry.get("max_turns"), 1, limits.max_turns))
        )
        _expect(
            ok,
            where,
            "name, env_id (like 'envgym/Name-v0'), env_version (int), env_kwargs (object), "
            f"max_turns (null or 1 to {limits.max_turns})",
            entry,
        )
        _unknown(entry, ENTRY_KEYS, where)
        if "episodes" in entry:
            _expect(
                _is_int(entry["episodes"], 0, announced),
                f"{where}.episodes",
                f"the entry's episode lines (0 to the manifest's {announced})",
                entry["episodes"],
            )
            counted += entry["episodes"]
        if "agents" in entry:
            agents = entry["agents"]
            _expect(
                isinstance(agents, list) and 0 < len(agents) <= 256 and all(_is_text(a, 200, 1) for a in agents),
                f"{where}.agents",
                "a non-empty list of agent ids (text, at most 256 of them)",
                agents,
            )
    if all("episodes" in e for e in entries) and counted != announced:
        raise BundleError(
            f"manifest: the entries hold {counted} episodes in all but the manifest announces {announced}; "
            "the manifest was edited."
        )
    agent = m.get("agent")
    _expect(
        isinstance(agent, dict)
        and isinstance(agent.get("spec"), str)
        and isinstance(agent.get("name"), str)
        and isinstance(agent.get("metadata", {}), dict)
        and isinstance(agent.get("options", {}), dict),
        "manifest.agent",
        "an object with a text spec (up to 500 characters), a name (1 to 200) and a metadata object",
        agent,
    )
    _unknown(agent, AGENT_KEYS, "manifest.agent")
    _check_name(agent["name"], "manifest.agent.name", 200)
    _check_name(agent["spec"], "manifest.agent.spec", 500, 0)
    for key in ("metadata", "options"):
        _cap_json(agent.get(key, {}), limits.max_metadata_bytes, f"manifest.agent.{key}")
    _expect(
        isinstance(m.get("content_hash"), str) and _HEX64.fullmatch(m["content_hash"]) is not None,
        "manifest.content_hash",
        "a sha256 hex string (64 hex digits)",
        m.get("content_hash"),
    )
    if "text_cap" in m:
        _expect(
            _is_int(m["text_cap"], 0, limits.max_text_cap),
            "manifest.text_cap",
            f"an integer from 0 to {limits.max_text_cap}",
            m["text_cap"],
        )
    if "envgym_version" in m:
        version = m["envgym_version"]
        _expect(
            _is_text(version, 64) and _VERSION.fullmatch(version) is not None,
            "manifest.envgym_version",
            "a version such as '0.1.0' (digits first, at most 64 characters)",
            version,
        )
    if "packages" in m:
        packages = m["packages"]
        _expect(
            isinstance(packages, dict)
            and len(packages) <= 2000
            and all(_is_text(k, 200, 1) and _is_text(v, 100) for k, v in packages.items()),
            "manifest.packages",
            "an object of package name -> version text (at most 2000, short texts)",
            packages,
        )
    if "git_commit" in m and m["git_commit"] is not None:
        commit = m["git_commit"]
        _expect(
            isinstance(commit, str) and _GIT_COMMIT.fullmatch(commit) is not None,
            "manifest.git_commit",
            "null or a commit hash (7 to 64 lowercase hex digits)",
            commit,
        )
    for key in ("created", "bundled_at"):
        if key in m:
            _check_date(m[key], f"manifest.{key}")


def check_screenshot(uri: Any, where: str, limits: BundleLimits = DEFAULT_LIMITS) -> int:
    """Check a screenshot (a ``data:image/png;base64,`` URI) and return its size in PNG bytes.

    Refused: not such a URI or not base64 (400), not a PNG (magic bytes, an ``IHDR`` header
    first), or wider, taller or larger in area or bytes than ``limits`` allow (413). The
    dimensions come from the PNG header: nothing is decoded to pixels here.
    """
    _expect(isinstance(uri, str) and uri.startswith(_PNG_URI), where, f"a {_PNG_URI}... URI", uri)
    encoded = uri[len(_PNG_URI) :]
    if len(encoded) > 4 * (limits.max_screenshot_bytes // 3 + 1):
        raise _too_large(
            f"{where}: the screenshot is {len(encoded) * 3 // 4} bytes, more than the "
            f"{limits.max_screenshot_bytes} allowed."
        )
    try:
        png = base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError) as err:
        raise BundleError(f"{where}: the screenshot is not valid base64 ({err}).") from err
    if len(png) > limits.max_screenshot_bytes:
        raise _too_large(
            f"{where}: the screenshot is {len(png)} bytes, more than the {limits.max_screenshot_bytes} allowed."
        )
    if not png.startswith(_PNG_MAGIC) or png[8:16] != b"\x00\x00\x00\x0dIHDR" or len(png) < 33:
        raise BundleError(
            f"{where}: the screenshot is not a PNG (expected the PNG signature and an IHDR header), got {png[:16]!r}."
        )
    width, height = struct.unpack(">II", png[16:24])
    if not (1 <= width <= limits.max_screenshot_side and 1 <= height <= limits.max_screenshot_side):
        raise _too_large(
            f"{where}: the screenshot is {width}x{height} pixels; each side must be 1 to {limits.max_screenshot_side}."
        )
    if width * height > limits.max_screenshot_pixels:
        raise _too_large(
            f"{where}: the screenshot is {width}x{height} = {width * height} pixels, more than the "
            f"{limits.max_screenshot_pixels} allowed."
        )
    return len(png)


def _check_text(value: Any, cap: int, where: str, limits: BundleLimits, *, records: bool = True) -> None:
    """An observation or completion: ``None``, text within ``cap`` characters (``text_cap`` plus its
    cut marker) or, for observations of non-text envs (``records``), a small JSON object."""
    if value is None:
        return
    if isinstance(value, str):
        if len(value) > cap:
            raise _too_large(
                f"{where} is {len(value)} characters, more than the manifest's text_cap allows ({cap} with the cut "
                "marker); bundles cut texts to text_cap."
            )
        return
    _expect(records and isinstance(value, dict), where, "text or null", value)
    _cap_json(value, limits.max_state_bytes, where)


def _check_episode(
    e: Any, line: int, limits: BundleLimits = DEFAULT_LIMITS, manifest: Mapping[str, Any] | None = None
) -> int:
    """Check one episode line; returns the PNG bytes of its screenshots."""
    manifest = manifest or {}
    trials = manifest.get("trials", limits.max_trials)
    text_cap = manifest.get("text_cap", limits.max_text_cap) + _CUT_MARK_ROOM
    where = f"episode on line {line}"
    _expect(isinstance(e, dict), where, "a JSON object", e)
    _unknown(e, EPISODE_LINE_KEYS, where)
    _expect(_is_text(e.get("entry"), 200, 1), f"{where}: entry", "text (1 to 200 characters)", e.get("entry"))
    _expect(_is_int(e.get("seed"), -(2**63), 2**63 - 1), f"{where}: seed", "an integer (64-bit)", e.get("seed"))
    _expect(
        _is_int(e.get("trial"), 0, trials - 1),
        f"{where}: trial",
        f"an integer from 0 to trials - 1 ({trials - 1})",
        e.get("trial"),
    )
    if e.get("index") is not None:
        _expect(_is_int(e["index"], 0, 2**63 - 1), f"{where}: index", "an integer >= 0", e["index"])
    if e.get("task_id") is not None:
        _expect(_is_text(e["task_id"], 500), f"{where}: task_id", "text (up to 500 characters)", e["task_id"])
    _expect(isinstance(e.get("scored"), bool), f"{where}: scored", "true or false", e.get("scored"))
    _expect(isinstance(e.get("success"), bool), f"{where}: success", "true or false", e.get("success"))
    if "agent_id" in e or "position" in e:  # one agent's record of a multi-agent episode
        _expect(_is_text(e.get("agent_id"), 200, 1), f"{where}: agent_id", "text", e.get("agent_id"))
        position = e.get("position")
        _expect(_is_int(position, 0, 255), f"{where}: position", "an integer >= 0", position)
    _expect(
        e.get("termination_reason") in TERMINATION_REASONS,
        f"{where}: termination_reason",
        f"one of {', '.join(sorted(TERMINATION_REASONS))}",
        e.get("termination_reason"),
    )
    _expect(_is_num(e.get("total_reward")), f"{where}: total_reward", "a number", e.get("total_reward"))
    _check_components(e.get("reward_components", {}), f"{where}: reward_components")
    if e.get("invalid_actions") is not None:
        invalid = e["invalid_actions"]
        _expect(_is_int(invalid, 0, limits.max_turns), f"{where}: invalid_actions", "an integer >= 0", invalid)
    if e.get("truncated_by") is not None:
        _expect(_is_text(e["truncated_by"], 64), f"{where}: truncated_by", "null or short text", e["truncated_by"])
    errors = e.get("errors", [])
    texts = isinstance(errors, list) and all(isinstance(x, str) for x in errors)
    _expect(texts, f"{where}: errors", "a list of text", errors)
    _cap_json(errors, limits.max_errors_bytes, f"{where}: errors")
    if "final_state" in e:
        _cap_json(e["final_state"], limits.max_state_bytes, f"{where}: final_state")
    _check_text(e.get("final_observation"), text_cap, f"{where}: final_observation", limits)
    shots = 0
    if "final_screenshot" in e:
        shots += check_screenshot(e["final_screenshot"], f"{where}: final_screenshot", limits)
    turns = e.get("turns")
    _expect(isinstance(turns, list), f"{where}: turns", "a list", turns)
    if len(turns) > limits.max_turns:
        raise _too_large(f"{where}: {len(turns)} turns, more than the {limits.max_turns} an episode may have.")
    _expect(
        e.get("num_turns") == len(turns),
        f"{where}: num_turns",
        f"the number of turns ({len(turns)})",
        e.get("num_turns"),
    )
    for i, turn in enumerate(turns):
        if not _plain_turn_ok(turn, text_cap, limits.max_action_chars):  # the exact reason, or a screenshot
            shots += _check_turn(turn, f"{where}, turn {i}", text_cap, limits)
    return shots


def _plain_turn_ok(turn: Any, text_cap: int, max_action: int) -> bool:
    """The fast path of :func:`_check_turn`: a turn without a screenshot or non-text observation
    that passes every check (no message is built for the thousands of good turns)."""
    if not isinstance(turn, dict) or not turn.keys() <= TURN_KEYS or "screenshot" in turn:
        return False
    action, observation, completion = turn.get("action"), turn.get("observation"), turn.get("completion")
    components = turn.get("reward_components")
    return (
        isinstance(action, str)
        and len(action) <= max_action
        and _is_num(turn.get("reward"))
        and type(turn.get("action_valid")) is bool
        and type(turn.get("terminated")) is bool
        and type(turn.get("truncated")) is bool
        and (turn.get("format_ok") is None or type(turn["format_ok"]) is bool)
        and (observation is None or (isinstance(observation, str) and len(observation) <= text_cap))
        and (completion is None or (isinstance(completion, str) and len(completion) <= text_cap))
        and isinstance(components, dict)
        and len(components) <= 64
        and all(type(k) is str and 0 < len(k) <= 128 and _is_num(v) for k, v in components.items())
    )


def _check_turn(turn: Any, tw: str, text_cap: int, limits: BundleLimits) -> int:
    """Check one turn, raising with the exact reason; returns its screenshot's PNG bytes."""
    _expect(isinstance(turn, dict), tw, "a JSON object", turn)
    _unknown(turn, TURN_KEYS, tw)
    action = turn.get("action")
    _expect(isinstance(action, str), f"{tw}: action", "text", action)
    if len(action) > limits.max_action_chars:
        raise _too_large(
            f"{tw}: the action is {len(action)} characters, more than the {limits.max_action_chars} allowed."
        )
    _expect(_is_num(turn.get("reward")), f"{tw}: reward", "a number", turn.get("reward"))
    _check_components(turn.get("reward_components"), f"{tw}: reward_components")
    for key in ("action_valid", "terminated", "truncated"):
        _expect(isinstance(turn.get(key), bool), f"{tw}: {key}", "true or false", turn.get(key))
    _expect(
        turn.get("format_ok") is None or isinstance(turn["format_ok"], bool),
        f"{tw}: format_ok",
        "true, false or null",
        turn.get("format_ok"),
    )
    _check_text(turn.get("observation"), text_cap, f"{tw}: observation", limits)
    _check_text(turn.get("completion"), text_cap, f"{tw}: completion", limits, records=False)
    if "screenshot" in turn:
        return check_screenshot(turn["screenshot"], f"{tw}: screenshot", limits)
    return 0


def _check_components(components: Any, where: str) -> None:
    _expect(
        isinstance(components, dict)
        and len(components) <= 64
        and all(_is_text(k, 128, 1) and _is_num(v) for k, v in components.items()),
        where,
        "an object of numbers (at most 64, names up to 128 characters)",
        components,
    )


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
        value = json.loads(text, parse_constant=_refuse_constant, parse_float=_finite_float, parse_int=_bounded_int)
        if "\\u" in text and re.search(r"\\u[dD][89a-fA-F]", text):
            # a \uD800-\uDFFF escape: pairs are text, a lone surrogate is not (pages and JSON answers
            # could not encode it), so the record is re-encoded to find out
            json.dumps(value, ensure_ascii=False).encode("utf-8")
        return value
    except UnicodeEncodeError as err:
        raise BundleError(
            f"{where} holds a lone UTF-16 surrogate escape (\\ud800-\\udfff); text must be Unicode."
        ) from err
    except RecursionError:
        # Raised by the parser on arrays or objects nested ~1000 deep; the traceback is of no use.
        raise BundleError(f"{where} nests arrays or objects too deeply to parse; bundles nest a few levels.") from None
    except json.JSONDecodeError as err:
        raise BundleError(f"{where} is not valid JSON ({err}).") from err
    except ValueError as err:  # raised by the parse_* hooks above
        raise BundleError(f"{where} is not valid bundle JSON ({err}).") from err


def _parse_records(lines: Iterable[tuple[int, bytes]], limits: BundleLimits) -> Bundle:
    """Parse and check numbered lines one at a time: the manifest first (its counts bound what
    follows), then each episode as it arrives, so a bad or oversized record stops the read there."""
    manifest: dict[str, Any] | None = None
    episodes: list[dict[str, Any]] = []
    shots = 0
    for number, line in lines:
        record = _parse_line(line, number)
        if manifest is None:
            _check_manifest(record, limits)
            manifest = record
            continue
        if len(episodes) >= manifest["episodes"]:
            raise BundleError(
                f"the manifest announces {manifest['episodes']} episodes but the bundle holds more (line {number}): "
                "the file was edited."
            )
        shots += _check_episode(record, number, limits, manifest)
        if shots > limits.max_screenshots_bytes:
            raise _too_large(
                f"the screenshots up to line {number} take {shots} bytes, more than the {limits.max_screenshots_bytes} "
                "a bundle may carry."
            )
        episodes.append(record)
    if manifest is None:
        raise BundleError("the bundle is empty: expected a manifest line and one line per episode.")
    if manifest["episodes"] != len(episodes):
        raise BundleError(
            f"the manifest announces {manifest['episodes']} episodes but the bundle holds {len(episodes)}: "
            "the file is truncated or was edited."
        )
    return Bundle(manifest, episodes)


def parse_bundle(text: bytes, *, limits: BundleLimits = DEFAULT_LIMITS) -> Bundle:
    """Parse uncompressed bundle lines, checking the structure and the caps of every record.

    Refused (:class:`BundleError`): invalid UTF-8, invalid JSON, ``NaN``/``Infinity`` literals,
    floats that overflow to infinity, integers longer than :data:`MAX_INT_DIGITS` digits, nesting
    too deep for the parser, and anything over a cap of ``limits`` (``status=413``).
    """
    numbered = enumerate((line for line in text.split(b"\n") if line.strip()), start=1)

    def sized() -> Iterator[tuple[int, bytes]]:
        for number, line in numbered:
            _check_line_size(number, len(line), limits)
            yield number, line

    return _parse_records(sized(), limits)


def read_bundle(
    source: str | os.PathLike[str] | bytes,
    *,
    max_bytes: int | None = None,
    limits: BundleLimits | None = None,
) -> Bundle:
    """Read a bundle from a file path or from its bytes.

    The file is unpacked a chunk at a time and each line is parsed and checked as it arrives
    (manifest first): the read stops at the first line over its cap, before the rest is unpacked.

    Args:
        max_bytes: largest uncompressed size (default ``limits.max_unpacked_bytes``, 256 MiB).
        limits: the caps (default :data:`DEFAULT_LIMITS`).

    Raises:
        BundleError: not gzip, damaged or truncated, larger than ``max_bytes`` once unpacked, not
            UTF-8 JSON Lines (see :func:`parse_bundle`), a record without the fields the format
            requires or over a cap (the message, one line, names the line; ``status`` is 413 for
            a cap, else 400).
    """
    limits = limits or DEFAULT_LIMITS
    if max_bytes is not None:
        limits = replace(limits, max_unpacked_bytes=max_bytes)
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
    return _parse_records(_lines(data, limits), limits)


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
