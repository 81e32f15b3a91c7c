"""The prompting layer: environment observations in, chat messages out, and replies back to actions.

Chat agents (``Agent.chat == True``: a transformers model, an OpenAI-compatible server) read a
list of ``{"role", "content"}`` messages and answer in free text. A :class:`Conversation` holds
one episode's chat state under a :class:`PromptConfig`:

* the system message, from a template with ``{env_name}``, ``{env_id}``, ``{env_summary}``,
  ``{goal}`` and ``{action_format}`` placeholders;
* one user message per observation (plus the valid actions when the list is short, and a note
  on the expected format after a reply that did not follow it);
* the history policy (``full``, ``last_k``, ``summary``, ``none``), always with roles that
  alternate user/assistant after the system message, as chat templates such as ChatML require;
* the reply parser (:meth:`Conversation.parse`): the last ``<action>...</action>`` block, or,
  for an env with tools (``info["tools"]``), the reply's ``<tool_call>`` blocks as the env's
  tool-call action (:mod:`envgym.rollout.toolcalls`);
* the reply limits every agent is held to: the stop strings (``</action>`` with
  ``stop_at_action``) and the per-reply token cap (``max_new_tokens``, lowered to what is left of
  the episode's completion-token budget ``token_budget``).

Typical use by a runner::

    conv = Conversation(config, env_id, obs, info)
    while not done:
        item = AgentInput(..., messages=conv.messages(), max_new_tokens=conv.max_new_tokens, stop=conv.stop)
        reply = agent.act([item])[0]
        parsed = conv.parse(reply.text)
        obs, reward, terminated, truncated, info = env.step(parsed.action)
        conv.record(reply.text, parsed, obs, info, completion_tokens=len(reply.token_ids or ()) or None)
"""

from __future__ import annotations

import dataclasses
import importlib
import logging
import re
import string
import threading
import warnings
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from envgym.core import extract_action
from envgym.errors import ConfigError, EnvgymError, suggest
from envgym.registration import ENV_ID, spec
from envgym.rollout.toolcalls import TOOL_CALL_OPEN, find_tool_calls, tool_action, tools_of

__all__ = [
    "DEFAULT_SYSTEM_PROMPT",
    "HISTORY_KINDS",
    "PLACEHOLDERS",
    "SUMMARY_MAX_TURNS",
    "Conversation",
    "ParsedReply",
    "PromptConfig",
    "env_description",
]

logger = logging.getLogger(__name__)

#: History policies understood by :class:`PromptConfig`.
HISTORY_KINDS: tuple[str, ...] = ("full", "last_k", "summary", "none")
#: Placeholders a system-prompt template may use.
PLACEHOLDERS: tuple[str, ...] = ("env_name", "env_id", "env_summary", "goal", "action_format")
#: The system prompt used when ``PromptConfig.system_prompt`` is ``None``. A line whose
#: placeholders all expand to empty text is left out (an env without a goal gets no "Your goal:").
DEFAULT_SYSTEM_PROMPT = (
    "You are an agent acting in {env_name}, a text environment, one turn at a time: each turn you "
    "read an observation and reply with your next action.\n"
    "About the environment: {env_summary}\n"
    "Your goal: {goal}\n"
    "{action_format}"
)
#: The built-in summary lists at most this many of the latest dropped turns (and counts the rest),
#: so neither the prompt nor the work of building it grows without bound in a long episode.
SUMMARY_MAX_TURNS = 50
#: Prefix of the user message that carries the summary of dropped turns (``history="summary"``).
SUMMARY_PREFIX = "Summary of earlier turns: "

_TAG_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*\Z")
_IMPORT_PATH = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*\Z")


def _help(text: str) -> dict[str, str]:
    return {"help": text}


@dataclass(frozen=True, kw_only=True)
class PromptConfig:
    """How observations become chat messages for chat agents, and replies become actions.

    Each field's ``metadata["help"]`` (listed under Attributes below) is the CLI help text.
    """

    system_prompt: str | None = field(
        default=None,
        metadata=_help(
            "System-prompt template; None uses the default. Placeholders: {env_name} (e.g. FrozenLake), "
            "{env_id}, {env_summary} (first line of the env class docstring), {goal} (info['task']['goal']) "
            "and {action_format} (how to write the action). Write literal braces as {{ and }}. A line whose "
            "placeholders all expand to empty text is left out; an empty prompt sends no system message."
        ),
    )
    history: str = field(
        default="full",
        metadata=_help(
            "Which earlier turns the agent sees: 'full' (all), 'last_k' (the last last_k turns), "
            "'summary' (a summary of older turns plus the last last_k turns) or 'none' (only the latest "
            "observation)."
        ),
    )
    last_k: int = field(default=4, metadata=_help("Turns kept verbatim with history='last_k' or 'summary' (>= 1)."))
    summarizer: str | None = field(
        default=None,
        metadata=_help(
            "'module:function' import path of the summary hook for history='summary': "
            "f(dropped_messages: list[dict]) -> str, called on the user/assistant messages older than the "
            "last last_k turns. None uses the built-in summary: the earlier actions (the latest 50), each "
            "marked when it was invalid or written without the action tags."
        ),
    )
    action_tags: tuple[str, ...] = field(
        default=("action",),
        metadata=_help(
            "Tag names the reply's action goes in (<action>...</action>); the last complete block of any "
            "of them is the action. An empty list means the whole reply is the action."
        ),
    )
    format_feedback: bool = field(
        default=True,
        metadata=_help(
            "After a reply without a complete action block, start the next user message with a "
            "short note on the expected format."
        ),
    )
    show_admissible: bool = field(
        default=True,
        metadata=_help(
            "Append 'Valid actions: ...' to each user message when info['admissible_actions'] has at "
            "most max_admissible entries."
        ),
    )
    max_admissible: int = field(
        default=30, metadata=_help("Longest admissible-action list shown with show_admissible (>= 1).")
    )
    goal_reminder: bool = field(
        default=False,
        metadata=_help(
            "End each user message with 'Your goal: <goal>' (info['task']['goal']; nothing when the task "
            "has none): the instruction stands right before the reply, where small models attend most."
        ),
    )
    max_turns: int | None = field(
        default=None,
        metadata=_help(
            "End the episode (truncated, reason max_turns) after this many turns; None keeps the "
            "environment's own limit."
        ),
    )
    token_budget: int | None = field(
        default=None,
        metadata=_help(
            "Completion tokens per episode; once spent the episode is truncated. What is left is "
            "each turn's max_new_tokens. None: no budget."
        ),
    )
    max_new_tokens: int | None = field(
        default=None,
        metadata=_help(
            "Most completion tokens of one reply, for every agent alike (a turn gets the smaller of this and "
            "what is left of token_budget; the agent's own limit still applies). None: the agent's own limit."
        ),
    )
    stop_at_action: bool = field(
        default=True,
        metadata=_help(
            "With action tags, end each reply at the first closing tag (</action>): the harness sends the "
            "closing tags as stop strings, so a model does not keep talking after its action."
        ),
    )

    def __post_init__(self) -> None:
        if self.system_prompt is not None:
            if not isinstance(self.system_prompt, str):
                raise ConfigError(f"system_prompt must be a template string or None, got {self.system_prompt!r}.")
            _check_template(self.system_prompt)
        if not isinstance(self.history, str) or self.history not in HISTORY_KINDS:
            raise ConfigError(
                f"history must be one of {', '.join(map(repr, HISTORY_KINDS))}, got {self.history!r}."
                f"{suggest(str(self.history), HISTORY_KINDS)}"
            )
        _check_int("last_k", self.last_k)
        _check_int("max_admissible", self.max_admissible)
        _check_int("max_turns", self.max_turns, optional=True)
        _check_int("token_budget", self.token_budget, optional=True)
        _check_int("max_new_tokens", self.max_new_tokens, optional=True)
        for name in ("format_feedback", "show_admissible", "goal_reminder", "stop_at_action"):
            value = getattr(self, name)
            if not isinstance(value, bool):
                raise ConfigError(f"{name} must be true or false, got {value!r}.")
        if self.summarizer is not None:
            if not isinstance(self.summarizer, str) or not _IMPORT_PATH.match(self.summarizer):
                raise ConfigError(
                    f"summarizer must be an import path 'package.module:function' or None, got {self.summarizer!r}."
                )
            if self.history != "summary":
                warnings.warn(
                    f"summarizer={self.summarizer!r} is only used with history='summary' "
                    f"(history is {self.history!r}); it is ignored.",
                    stacklevel=3,
                )
        tags = self.action_tags
        if isinstance(tags, str):
            raise ConfigError(f"action_tags must be a list of tag names, got the string {tags!r}; write ({tags!r},).")
        try:
            tags = tuple(tags)
        except TypeError:
            raise ConfigError(f"action_tags must be a list of tag names, got {self.action_tags!r}.") from None
        for tag in tags:
            if not isinstance(tag, str) or not _TAG_NAME.match(tag):
                raise ConfigError(
                    f"each action tag must be a simple name (a letter or _, then letters, digits, _ or -) "
                    f"written without angle brackets, got {tag!r} in action_tags={self.action_tags!r}."
                )
        if len({t.lower() for t in tags}) != len(tags):
            raise ConfigError(f"action_tags must not repeat a name (tags match case-insensitively), got {tags!r}.")
        object.__setattr__(self, "action_tags", tags)  # a list from a config file becomes a hashable tuple

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable dict (``action_tags`` as a list) that :meth:`from_dict` reads back."""
        data = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        data["action_tags"] = list(self.action_tags)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PromptConfig:
        """Build a config from a dict (a parsed config file); unknown keys raise :class:`ConfigError`."""
        if not isinstance(data, Mapping):
            raise ConfigError(f"a prompt config must be a mapping of field names to values, got {data!r}.")
        names = [f.name for f in dataclasses.fields(cls)]
        for key in data:
            if key not in names:
                raise ConfigError(
                    f"unknown prompt config key {key!r}; known keys: {', '.join(names)}.{suggest(str(key), names)}"
                )
        return cls(**data)

    def with_defaults(self, defaults: Mapping[str, Any], *, explicit: Iterable[str] | None = None) -> PromptConfig:
        """A copy in which ``defaults`` (field name -> value; e.g. the prompt a LoRA adapter was
        trained with) replace every field that was not set explicitly.

        Args:
            defaults: field values, checked as :meth:`from_dict` checks them.
            explicit: the fields that were set on purpose and keep their value. ``None``: the
                fields whose value differs from the class default (``system_prompt`` is set
                when it is not ``None``).
        """
        if not defaults:
            return self
        merged = PromptConfig.from_dict(defaults)  # unknown keys and bad values fail here, named
        names = [f.name for f in dataclasses.fields(self)]
        if explicit is None:
            blank = PromptConfig()
            kept = {name for name in names if getattr(self, name) != getattr(blank, name)}
        else:
            kept = set(explicit)
            unknown = sorted(kept - set(names))
            if unknown:
                raise ConfigError(f"unknown prompt config field(s) {unknown}; known fields: {', '.join(names)}.")
        changes = {name: getattr(merged, name) for name in defaults if name not in kept}
        return dataclasses.replace(self, **changes) if changes else self

    def load_summarizer(self) -> Callable[[list[dict[str, str]]], str] | None:
        """Import the ``summarizer`` hook (cached), or ``None`` when the built-in summary is used.

        Runners may call it once before a run so a bad path fails before any model time is spent.
        """
        if self.summarizer is None:
            return None
        return _import_hook(self.summarizer)


def _check_int(name: str, value: object, *, optional: bool = False) -> None:
    if value is None and optional:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        expected = "an integer >= 1 or None" if optional else "an integer >= 1"
        raise ConfigError(f"{name} must be {expected}, got {value!r}.")


def _check_template(template: str) -> None:
    """Raise :class:`ConfigError` unless ``template`` formats with exactly the known placeholders."""
    try:
        fields = [name for _, name, _, _ in string.Formatter().parse(template) if name is not None]
    except ValueError as err:
        raise ConfigError(
            f"system_prompt is not a valid template ({err}): {template!r}. Write literal braces as {{{{ and }}}}."
        ) from err
    for name in fields:
        if name not in PLACEHOLDERS:
            shown = "{" + name + "}"
            raise ConfigError(
                f"system_prompt uses the unknown placeholder {shown!r}; known placeholders: "
                f"{', '.join('{' + p + '}' for p in PLACEHOLDERS)}. Write literal braces as {{{{ and }}}}."
                f"{suggest(name, PLACEHOLDERS)}"
            )
    try:
        template.format(**dict.fromkeys(PLACEHOLDERS, ""))
    except (ValueError, TypeError) as err:  # e.g. a format spec that does not apply to text
        raise ConfigError(f"system_prompt does not format ({err}): {template!r}.") from err


# --------------------------------------------------------------------------------------------
# Caches shared by every Conversation: one is built per episode, so nothing here may be slow.

_cache_lock = threading.Lock()
_ENV_DESCRIPTIONS: dict[str, tuple[str, str]] = {}
_TEMPLATE_LINES: dict[str, tuple[tuple[str, frozenset[str]], ...]] = {}
_HOOKS: dict[str, Callable[[list[dict[str, str]]], str]] = {}
_COMPLETE_BLOCK: dict[tuple[str, ...], re.Pattern[str]] = {}


def env_description(env_id: str) -> tuple[str, str]:
    """``(env_name, env_summary)`` of a registered id, cached per id.

    The name is the id without namespace and version (``FrozenLake``); the summary is the first
    line of the environment class's own docstring, else the registry's one-line summary, else
    empty (an id the registry does not know gets an empty summary and a logged warning).
    """
    found = _ENV_DESCRIPTIONS.get(env_id)
    if found is not None:
        return found
    match = ENV_ID.match(env_id)
    name = match["name"] if match else env_id
    summary = ""
    try:
        env_spec = spec(env_id)
        summary = env_spec.summary
        doc = env_spec.load().__dict__.get("__doc__")  # not inspect.getdoc: TextEnv's own text is no summary
        if isinstance(doc, str) and doc.strip():
            summary = doc.strip().splitlines()[0].strip()
    except (EnvgymError, ImportError, AttributeError) as err:
        logger.warning("envgym: no environment summary for %r (%s); the system prompt goes without one.", env_id, err)
    with _cache_lock:
        _ENV_DESCRIPTIONS[env_id] = (name, summary)
    return name, summary


def _template_lines(template: str) -> tuple[tuple[str, frozenset[str]], ...]:
    lines = _TEMPLATE_LINES.get(template)
    if lines is None:
        formatter = string.Formatter()
        lines = tuple(
            (line, frozenset(name for _, name, _, _ in formatter.parse(line) if name)) for line in template.split("\n")
        )
        with _cache_lock:
            _TEMPLATE_LINES[template] = lines
    return lines


def _render(template: str, values: Mapping[str, str]) -> str:
    """Format ``template`` line by line, leaving out lines whose placeholders are all empty."""
    out = []
    for line, names in _template_lines(template):
        if names and not any(values[n] for n in names):
            continue
        out.append(line.format_map(values))
    return "\n".join(out).strip()


def _import_hook(path: str) -> Callable[[list[dict[str, str]]], str]:
    hook = _HOOKS.get(path)
    if hook is not None:
        return hook
    module_name, _, qualname = path.partition(":")
    try:
        obj: Any = importlib.import_module(module_name)
    except ImportError as err:
        raise ConfigError(
            f"summarizer {path!r}: cannot import module {module_name!r} ({err}); check the path and that the "
            f"module is on sys.path."
        ) from err
    for part in qualname.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            members = [m for m in dir(obj) if not m.startswith("_")]
            raise ConfigError(
                f"summarizer {path!r}: {module_name!r} has no attribute {qualname!r}.{suggest(part, members)}"
            ) from None
    if not callable(obj):
        raise ConfigError(f"summarizer {path!r} must name a function f(messages) -> str, got {obj!r}.")
    with _cache_lock:
        _HOOKS[path] = obj
    return obj


def _action_format(tags: tuple[str, ...]) -> str:
    if not tags:
        return "Reply with the action only, and nothing else."
    first, *others = (f"<{t}>...</{t}>" for t in tags)
    alternatives = f" (or {', '.join(others)})" if others else ""
    return f"Think briefly, then give exactly one action as {first}{alternatives}."


def _complete_block(tags: tuple[str, ...]) -> re.Pattern[str]:
    pattern = _COMPLETE_BLOCK.get(tags)
    if pattern is None:
        names = "|".join(re.escape(t) for t in tags)
        # The closing tag must name the same tag as the opening one (\1 matches case-insensitively).
        pattern = re.compile(rf"<\s*({names})\s*>(.*?)<\s*/\s*\1\s*>", re.IGNORECASE | re.DOTALL)
        with _cache_lock:
            _COMPLETE_BLOCK[tags] = pattern
    return pattern


def _goal(info: Mapping[str, Any]) -> str:
    task = info.get("task")
    goal = task.get("goal") if isinstance(task, Mapping) else getattr(task, "goal", None)
    return str(goal).strip() if goal else ""


# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ParsedReply:
    """The action found in a chat reply.

    Attributes:
        action: the text sent to ``env.step``.
        format_ok: whether the reply had a complete action block (always ``True`` when the config's
            ``action_tags`` is empty, since then the whole reply is the action).
        tool_calls: the tool calls the action runs, ``{"id", "name", "arguments"}`` each, when the
            env has tools and the reply called them as ``<tool_call>`` blocks
            (:mod:`envgym.rollout.toolcalls`); empty otherwise.
        dropped_calls: calls of the reply left out because the env runs one per turn.
    """

    action: str
    format_ok: bool
    tool_calls: tuple[dict[str, Any], ...] = ()
    dropped_calls: int = 0


class Conversation:
    """One episode's chat state: the system prompt, the turns so far and the token count.

    ``messages()`` returns the same dict objects turn after turn (it is called every turn, and
    copying the history would make each call cost O(turns)): treat them as read-only.

    Attributes:
        config: the prompt config.
        env_id: the environment id.
        system: the rendered system prompt.
        turns: replies recorded so far.
        tokens_used: completion tokens counted so far: the agent's own count where ``record`` got
            ``completion_tokens``, else an estimate of ``ceil(len(reply) / 4)`` (at least 1).
        estimated_tokens: the part of ``tokens_used`` that is such an estimate.
        stop: the stop strings every reply is sent with: ``</tag>`` for each action tag (as
            written) when ``config.stop_at_action``, else empty.
    """

    __slots__ = (
        "_block", "_current", "_dropped", "_feedback", "_goal", "_head", "_history", "_messages", "_summary_cache",
        "_summary_lines", "config", "env_id", "estimated_tokens", "parallel_tool_calls", "stop", "system",
        "tokens_used", "tools", "turns",
    )  # fmt: skip

    def __init__(self, config: PromptConfig, env_id: str, observation: str, info: Mapping[str, Any]) -> None:
        """Start an episode from its first observation and ``info`` (from ``env.reset``)."""
        self.config = config
        self.env_id = env_id
        self._goal = _goal(info)
        name, summary = env_description(env_id)
        tags = config.action_tags
        values = {
            "env_name": name,
            "env_id": env_id,
            "env_summary": summary,
            "goal": self._goal,
            "action_format": _action_format(tags),
        }
        template = DEFAULT_SYSTEM_PROMPT if config.system_prompt is None else config.system_prompt
        self.system = _render(template, values)
        # An empty system prompt sends no system message (for chat templates without a system role).
        self._head: tuple[dict[str, str], ...] = ({"role": "system", "content": self.system},) if self.system else ()
        self.turns = 0
        self.tokens_used = 0
        self.estimated_tokens = 0
        # Flat user/assistant messages of the turns kept verbatim: a bounded deque makes the
        # per-turn work O(last_k) however long the episode ("none" keeps nothing).
        history = config.history
        if history == "full":
            self._history: deque[dict[str, str]] = deque()
        else:
            self._history = deque(maxlen=0 if history == "none" else 2 * config.last_k)
        self._dropped: list[dict[str, str]] = []  # only filled with history="summary"
        self._summary_lines: list[str] = []  # the built-in summary, one line per turn
        self._summary_cache: tuple[int, str] = (0, "")  # (dropped turns, summary text)
        self._messages: tuple[dict[str, str], ...] | None = None
        self._block = _complete_block(tags) if tags else None
        self.stop: tuple[str, ...] = tuple(f"</{t}>" for t in tags) if config.stop_at_action else ()
        self._feedback = (
            f"Your last reply had no complete {' or '.join(f'<{t}>...</{t}>' for t in tags)} block. "
            f"Give exactly one action inside <{tags[0]}>...</{tags[0]}>."
            if tags and config.format_feedback
            else ""
        )
        self._current = {"role": "user", "content": self._user_content(observation, info, format_ok=True)}
        # The env's tools (docs/tools.md): replies may call them natively (<tool_call> blocks).
        self.tools: list[dict[str, Any]] = tools_of(info)
        self.parallel_tool_calls = bool(info.get("parallel_tool_calls")) if self.tools else False

    # -- building messages ----------------------------------------------------------------------

    def _user_content(self, observation: str, info: Mapping[str, Any], *, format_ok: bool) -> str:
        text = str(observation)
        if not format_ok and self._feedback:
            text = f"{self._feedback}\n\n{text}"
        if self.config.show_admissible:
            actions = info.get("admissible_actions")
            if actions and len(actions) <= self.config.max_admissible:
                text = f"{text}\n\nValid actions: {', '.join(map(str, actions))}"
        if self.config.goal_reminder and self._goal:
            text = f"{text}\n\nYour goal: {self._goal}"
        return text

    def messages(self) -> tuple[dict[str, str], ...]:
        """The messages to send now: system, the history the policy keeps, the latest observation.

        Roles alternate user/assistant after the system message (absent when the system prompt
        renders empty) and the last one is ``user``.
        """
        if self._messages is not None:
            return self._messages
        if self.config.history == "summary" and self._dropped:
            first, *rest = self._history
            merged = {"role": "user", "content": f"{SUMMARY_PREFIX}{self._summary()}\n\n{first['content']}"}
            # One user message carries the summary and the oldest kept observation together, so roles
            # still alternate (two user messages in a row break chat templates).
            self._messages = (*self._head, merged, *rest, self._current)
        else:
            self._messages = (*self._head, *self._history, self._current)
        return self._messages

    def _summary(self) -> str:
        dropped_turns = len(self._dropped) // 2
        cached_turns, text = self._summary_cache
        if cached_turns == dropped_turns:
            return text
        if self.config.summarizer is None:
            first = max(0, dropped_turns - SUMMARY_MAX_TURNS)
            listed = "; ".join(self._summary_lines[first:dropped_turns]) + "."
            text = f"{first} earlier turns not listed; {listed}" if first else listed
        else:
            hook = _import_hook(self.config.summarizer)
            text = hook(list(self._dropped))
            if not isinstance(text, str):
                raise ConfigError(f"summarizer {self.config.summarizer!r} must return a str, got {text!r}.")
        self._summary_cache = (dropped_turns, text)
        return text

    # -- reading replies -------------------------------------------------------------------------

    def parse(self, reply: str) -> ParsedReply:
        """The action in ``reply``: the last complete action block, else the whole reply.

        Without a complete block the reply is still cleaned by :func:`envgym.core.extract_action`
        (an unclosed ``<action>`` takes the rest of the reply), so an environment's forgiving parser
        may accept it; ``format_ok`` is then ``False``. For an env with tools, complete
        ``<tool_call>`` blocks come first: they are the action (one call, or several as a JSON
        array where the env runs several per turn) and ``tool_calls`` lists them.
        """
        reply = str(reply)
        if self.tools and TOOL_CALL_OPEN in reply:
            native = self._parse_tool_calls(reply)
            if native is not None:
                return native
        tags = self.config.action_tags
        if not tags:
            return ParsedReply(extract_action(reply, ()), True)
        if "<" in reply:
            blocks = self._block.findall(reply)  # type: ignore[union-attr]
            if blocks:
                return ParsedReply(extract_action(blocks[-1][1], ()), True)
        return ParsedReply(extract_action(reply, tags), False)

    def _parse_tool_calls(self, reply: str) -> ParsedReply | None:
        """The action of a reply that calls the env's tools in ``<tool_call>`` blocks (``None``: no
        complete block). Calls without an ``id`` get ``call_<turn>_<k>``. A block that is no call
        (not JSON, no name) is sent as written, so the env answers with its tool error."""
        calls, broken = find_tool_calls(reply)
        if not calls:
            return ParsedReply(broken[0], True) if broken else None
        for k, call in enumerate(calls):
            call["id"] = call["id"] or f"call_{self.turns}_{k}"
        action, dropped = tool_action(calls, parallel=self.parallel_tool_calls)
        kept = calls[: len(calls) - dropped]
        return ParsedReply(action, True, tuple(kept), dropped)

    def record(
        self,
        reply: str,
        parsed: ParsedReply,
        observation: str,
        info: Mapping[str, Any],
        completion_tokens: int | None = None,
    ) -> None:
        """Add the agent's ``reply`` and the environment's next ``observation`` and ``info``.

        ``completion_tokens`` is the reply's length in tokens as the agent counted it; ``None``
        estimates it from the text (see :attr:`tokens_used`).
        """
        reply = str(reply)
        if completion_tokens is None:
            tokens = max(1, -(-len(reply) // 4))
            self.estimated_tokens += tokens
        elif isinstance(completion_tokens, bool) or not isinstance(completion_tokens, int) or completion_tokens < 0:
            raise ConfigError(f"completion_tokens must be an integer >= 0 or None, got {completion_tokens!r}.")
        else:
            tokens = completion_tokens
        self.tokens_used += tokens
        self.turns += 1
        history = self._history
        if self.config.history == "summary":
            if len(history) == history.maxlen:  # the oldest kept turn leaves the window: summarise it
                self._dropped.append(history.popleft())
                self._dropped.append(history.popleft())
            if self.config.summarizer is None:
                self._summary_lines.append(self._summary_line(parsed, info))
        history.append(self._current)
        history.append({"role": "assistant", "content": reply})
        content = self._user_content(observation, info, format_ok=parsed.format_ok)
        if parsed.dropped_calls:  # the model should know its other calls did not run
            ran = len(parsed.tool_calls)
            content = f"Only one tool call runs per turn: the first of {ran + parsed.dropped_calls} ran.\n\n{content}"
        self._current = {"role": "user", "content": content}
        self._messages = None

    def _summary_line(self, parsed: ParsedReply, info: Mapping[str, Any]) -> str:
        notes = []
        if info.get("action_valid") is False:
            notes.append("invalid")
        if not parsed.format_ok:
            notes.append(f"no <{self.config.action_tags[0]}> block")
        action = parsed.action if len(parsed.action) <= 60 else parsed.action[:57] + "..."
        action = repr(action) if action else "(empty)"  # quoted: an action may contain "; " itself
        return f"turn {self.turns}: {action}" + (f" ({', '.join(notes)})" if notes else "")

    # -- limits ----------------------------------------------------------------------------------

    @property
    def remaining_tokens(self) -> int | None:
        """Completion tokens left in the episode's budget (never below 0), or ``None`` without one."""
        budget = self.config.token_budget
        return None if budget is None else max(0, budget - self.tokens_used)

    @property
    def max_new_tokens(self) -> int | None:
        """This turn's completion-token limit: the smaller of ``config.max_new_tokens`` and
        :attr:`remaining_tokens`, or ``None`` when neither is set."""
        cap, left = self.config.max_new_tokens, self.remaining_tokens
        if cap is None:
            return left
        return cap if left is None else min(cap, left)

    @property
    def budget_exhausted(self) -> bool:
        """Whether the token budget is spent (always ``False`` without a budget)."""
        budget = self.config.token_budget
        return budget is not None and self.tokens_used >= budget

    @property
    def turns_exhausted(self) -> bool:
        """Whether ``config.max_turns`` replies have been recorded (always ``False`` without it)."""
        limit = self.config.max_turns
        return limit is not None and self.turns >= limit

    def __repr__(self) -> str:
        return (
            f"Conversation(env_id={self.env_id!r}, history={self.config.history!r}, turns={self.turns}, "
            f"tokens_used={self.tokens_used})"
        )


# The Attributes section of PromptConfig's docstring is its fields' help, so the two never drift.
PromptConfig.__doc__ = (
    (PromptConfig.__doc__ or "").rstrip()
    + "\n\n    Attributes:\n"
    + "".join(f"        {f.name}: {f.metadata['help']}\n" for f in dataclasses.fields(PromptConfig))
)
