"""tau2-bench's own retail and airline tasks, played with envgym's tools, users and grader (optional).

tau2-bench (https://github.com/sierra-research/tau2-bench, MIT) is not on PyPI and envgym ships
none of its code or data. A user who has its repository points envgym at the checkout::

    from envgym.environments.service.tau2 import load_tau2
    from envgym.environments.service.env import ServiceEnv

    domain = load_tau2("~/src/tau2-bench", "retail", split="test")  # 40 tasks
    env = ServiceEnv(domain=domain, user="openai:MODEL@URL")         # seed i plays task i
    obs, info = env.reset(seed=0)

:func:`load_tau2` reads ``data/tau2/domains/<domain>/`` of the checkout: ``db.json`` (the world),
``policy.md`` (shown to the agent as the policy), ``tasks.json`` and, for ``split=``,
``split_tasks.json``. It returns a :class:`~.core.Domain` with a fixed task list: envgym's env
plays task ``seed % len(tasks)`` (the env's own ``split`` does not filter it: pick tau2-bench's
split here), with

* **tools**: envgym's retail tools (:mod:`.retail`), which keep tau2-bench's tool and argument
  names and work on tau2-bench's database as it is (same ids and fields), plus the three tau2-bench
  tools envgym's retail domain does not have (``get_item_details``, ``modify_pending_order_payment``,
  ``transfer_to_human_agents``), written here;
* **the user**: envgym's scripted user (:class:`Tau2User`) reading the task's scenario, or an LLM
  user (``user=`` an agent or spec: the faithful way to play tau2-bench's free-text scenarios);
* **the grader**: :func:`.core.grade` over the task's ``reward_basis``.

How a tau2-bench task becomes a :class:`~.core.ServiceTask`:

* ``user_scenario``: ``persona`` and the instructions' ``reason_for_call``, ``known_info``,
  ``unknown_info`` and ``task_instructions`` are kept verbatim as the scenario's instructions (what
  an LLM user reads); the scripted user opens with the first sentence of ``reason_for_call`` turned
  into the first person, and gives the facts :func:`parse_known_info` finds in ``known_info``
  (name, user id, email, zip code, "Your X is Y" facts) and the order ids of ``reason_for_call`` when
  asked for them by keyword; :func:`parse_unknown_info` gives what it says it does not know;
* ``evaluation_criteria.actions`` become the gold actions (``requestor``; ``compare_args``: ``None``
  compares every argument, ``[]`` only the tool name, as in tau2-bench), replayed on the starting
  world for the expected database; a gold action that fails with envgym's tools is left out with a
  warning (tau2-bench's evaluator logs and skips failing gold actions too);
* ``communicate_info`` is kept; ``reward_basis`` keeps ``DB``, ``COMMUNICATE`` and ``ACTION`` (the
  gold actions, as required actions). ``NL_ASSERTION`` (an LLM judge) and ``ENV_ASSERTION`` are not
  graded offline: they are dropped from the basis with a warning (the assertions are kept in the
  task's ``extra``). Most tau2-bench retail tasks are graded on ``DB`` and ``NL_ASSERTION``: here
  on ``DB`` alone.

Differences from tau2-bench worth knowing: envgym's tools refuse only what the database cannot
do, not what only the policy forbids (tau2-bench's ``cancel_pending_order`` refuses a delivered
order; envgym's cancels it and records a policy violation, and the database then differs from the
expected one); an exchange records its new items paired with the old ones rather than each list
sorted; an item modification with no price difference adds no payment entry. These change the
stored state, never which trajectories reach the expected one, since the expected state is
computed with the same tools. Tasks with an ``initial_state`` (none in retail or airline) are
skipped with a warning.

**Airline** (``load_tau2(path, "airline")``, :class:`Tau2AirlineDomain`): tau2-bench's 14 airline
tools by name, arguments and semantics (:func:`airline_tools`), written here on tau2-bench's database
layout (users; flights with scheduled times and per-date status, prices and seats; reservations
whose ``status`` is null or ``"cancelled"``), reusing the user lookup and the payment rules of
envgym's travel domain (:mod:`.travel`): ``get_user_details``, ``get_reservation_details``,
``get_flight_status``, ``list_all_airports``, ``search_direct_flight``, ``search_onestop_flight``,
``calculate`` (arithmetic parsed, never evaluated), ``book_reservation`` (cabin price times
passengers, $30 insurance per passenger, $50 per non-free bag; payments must add up; gift cards
are debited, certificates used up; seats taken; ids ``HATHAT``, ``HATHAU``, ``HATHAV``; created at
2024-05-15T15:00:00), ``cancel_reservation`` (every payment refunded), ``update_reservation_flights``
(with ``cabin``: flights kept at their price when the cabin stays, the price difference charged
or refunded), ``update_reservation_baggages``, ``update_reservation_passengers``,
``send_certificate`` (ids ``certificate_3221322``...) and ``transfer_to_human_agents``. As in
tau2-bench, cancelling releases no seats and changing flights moves none. What still differs:
:data:`AIRLINE_GAPS`.
"""

from __future__ import annotations

import ast
import copy
import datetime
import json
import operator
import random
import re
import warnings
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, ClassVar

from envgym.environments.service.core import Domain, Scenario, ServiceTask, Tool, ToolCall, ToolError, World
from envgym.environments.service.retail.domain import RetailDomain
from envgym.environments.service.retail.tools import cents, dollars
from envgym.environments.service.travel import tools as travel
from envgym.environments.service.user import ScriptedUser

from envgym.errors import ConfigError, NotAvailableError

__all__ = [
    "AIRLINE_GAPS",
    "TAU2_DOMAINS",
    "TAU2_URL",
    "Tau2AirlineDomain",
    "Tau2Domain",
    "Tau2RetailDomain",
    "Tau2User",
    "airline_tools",
    "calculate",
    "first_person",
    "load_tau2",
    "parse_known_info",
    "parse_unknown_info",
    "tau2_task",
]

TAU2_URL = "https://github.com/sierra-research/tau2-bench"
#: tau2-bench domains this loader plays.
TAU2_DOMAINS: tuple[str, ...] = ("retail", "airline")
#: What still differs when tau2-bench's airline tasks are played here (they load and play: see
#: :class:`Tau2AirlineDomain`).
AIRLINE_GAPS = (
    "no policy checks on airline writes (policy_reward is always 1; a write the policy forbids shows up only as a "
    "database that differs from the expected one); the scripted user opens with reason_for_call and gives the "
    "facts of known_info, but cannot follow task_instructions (which flight to pick, how to split a payment, "
    "when to give in): most airline tasks need an LLM user (user=...) to be played faithfully; NL_ASSERTION is "
    "not graded offline; list_all_airports lists the airports of the database's flights (tau2-bench returns a "
    "fixed list of 20); cancel_reservation refuses an already cancelled reservation (tau2-bench refunds it again)."
)
#: tau2-bench reward criteria graded offline.
GRADED: tuple[str, ...] = ("DB", "COMMUNICATE", "ACTION")
#: tau2-bench reward criteria that are not, and why.
NOT_GRADED: dict[str, str] = {
    "NL_ASSERTION": "it needs an LLM judge",
    "ENV_ASSERTION": "its assertions call tau2-bench's own environment functions",
}


# --------------------------------------------------------------------------- scenario text
_EMAIL = re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+")
_USER_ID = re.compile(r"\b[a-z]+(?:_[a-z]+)+_\d{3,}\b")
_ZIP = re.compile(r"\b\d{5}\b")
_ORDER_ID = re.compile(r"#?\bW\d{7}\b")
_NAME = re.compile(
    r"\b(?:You are|You're|Your name is|You name is|My name is|I am|called|named)\s+(?:user\s+)?([A-Z][a-z]+(?:\s+[A-Z][a-z]+)+)"
)
_YOUR_X_IS = re.compile(r"\bYour ([a-z][a-z ]{1,30}?) is\s+([A-Za-z0-9#_@.+-]+?)[.,;]?(?=\s|$)")
_NOT_KNOWN = re.compile(
    r"(?:not|n't)\s+(?:know|remember|recall|have)\s+(?:your |the |any |an? )?([a-z][a-z ]*?)(?=\s+(?:of|for|from|to|on)\b|[.,;]|$)"
)
#: Keywords the agent may use when it asks for a fact (the scripted user reveals it on any of them).
FACT_KEYWORDS: dict[str, tuple[str, ...]] = {
    "name": ("name",),
    "user_id": ("user id", "user_id", "username", "user name", "account id"),
    "email": ("email", "e-mail"),
    "zip_code": ("zip", "postal", "postcode"),
    "order_id": ("order id", "order number", "which order", "order ids", "order numbers"),
    "reservation_id": ("reservation", "confirmation", "booking"),
}


def parse_known_info(text: str) -> dict[str, tuple[str, tuple[str, ...]]]:
    """Facts in a tau2-bench ``known_info`` text, as a :class:`~.core.Scenario`'s ``known_info``.

    Finds a full name ("You are Anna Lopez", "Your name is ...", or from a user id), a user id
    (``anna_lopez_1234``),
    an email, a 5-digit zip code, order ids (``#W1234567``) and other "Your X is Y" facts
    ("Your reservation id is 3RK2T9"), each with the keywords the scripted user reacts to.
    """
    facts: dict[str, tuple[str, tuple[str, ...]]] = {}
    if m := _NAME.search(text):
        facts["name"] = (m.group(1), FACT_KEYWORDS["name"])
    if m := _USER_ID.search(text):
        facts["user_id"] = (m.group(0), FACT_KEYWORDS["user_id"])
        if "name" not in facts:  # "You are mei_kovacs_8020": the user knows their name is Mei Kovacs
            facts["name"] = (" ".join(w.capitalize() for w in m.group(0).split("_")[:-1]), FACT_KEYWORDS["name"])
    if m := _EMAIL.search(text):
        facts["email"] = (m.group(0), FACT_KEYWORDS["email"])
    zips = [z for z in _ZIP.findall(_EMAIL.sub(" ", text))]
    if zips:
        facts["zip_code"] = (zips[0], FACT_KEYWORDS["zip_code"])
    orders = list(dict.fromkeys("#" + o.lstrip("#") for o in _ORDER_ID.findall(text)))
    if orders:
        key = "order_id" if len(orders) == 1 else "order_ids"
        facts[key] = (" and ".join(orders), FACT_KEYWORDS["order_id"])
    for label, value in _YOUR_X_IS.findall(text):
        label = " ".join(label.split())
        if any(word in label for word in ("name", "email", "zip", "user id", "order")):
            continue
        key = label.replace(" ", "_")
        booking = "reservation" in key or "confirmation" in key
        keywords = FACT_KEYWORDS["reservation_id"] if booking else (label,)
        facts.setdefault(key, (value, keywords))
    return facts


def parse_unknown_info(text: str | None) -> tuple[str, ...]:
    """What a tau2-bench ``unknown_info`` text says the user does not know, as short keywords
    (``"You do not remember your email address."`` gives ``("email",)``)."""
    if not text:
        return ()
    out = []
    for phrase in _NOT_KNOWN.findall(text):
        phrase = " ".join(phrase.split())
        out.append("email" if "email" in phrase else phrase)
    if not out and "email" in text.lower():
        out.append("email")
    return tuple(dict.fromkeys(p for p in out if p))


_PRONOUNS = [
    (re.compile(r"\bYou're\b"), "I'm"),
    (re.compile(r"\byou're\b"), "I'm"),
    (re.compile(r"\b([Yy])ou've\b"), "I've"),
    (re.compile(r"\b([Yy])ou'd\b"), "I'd"),
    (re.compile(r"\b([Yy])ou'll\b"), "I'll"),
    (re.compile(r"\b[Yy]ou are\b"), "I am"),
    (re.compile(r"\b[Yy]ou were\b"), "I was"),
    (re.compile(r"\bYourself\b"), "Myself"),
    (re.compile(r"\byourself\b"), "myself"),
    (re.compile(r"\bYours\b"), "Mine"),
    (re.compile(r"\byours\b"), "mine"),
    (re.compile(r"\bYour\b"), "My"),
    (re.compile(r"\byour\b"), "my"),
    (re.compile(r"\bYou\b"), "I"),
    # "you" as a subject after a conjunction or a comma, else as an object
    (
        re.compile(
            r"(\b(?:and|but|or|that|if|when|because|so|since|as|then|unless|while|where|whether|though|before|after|until)"
            r"|,)\s+you\b"
        ),
        r"\1 I",
    ),
    (re.compile(r"\byou\b"), "me"),
]


def first_person(text: str) -> str:
    """tau2-bench's second-person instruction text said by the user ("You want to return your
    lamp" -> "I want to return my lamp"): a few pronoun rules, good enough for an opening line."""
    for pattern, repl in _PRONOUNS:
        text = pattern.sub(repl, text)
    return text


def _first_sentence(text: str) -> str:
    text = " ".join(text.split())
    m = re.search(r"(?<=[.!?])\s+(?=[A-Z])", text)
    return text[: m.start()] if m else text


# --------------------------------------------------------------------------- tasks
def _tool_call(raw: dict[str, Any], *, required: bool = False) -> ToolCall:
    compare = raw.get("compare_args")
    arguments = dict(raw.get("arguments") or {})
    if required and compare is not None and not compare:
        arguments = {}  # tau2-bench: an empty compare_args matches the tool name alone
    return ToolCall(
        name=str(raw["name"]),
        arguments=arguments,
        requestor=str(raw.get("requestor") or "assistant"),
        compare_args=tuple(compare or ()),
    )


def tau2_task(raw: dict[str, Any], domain: str) -> tuple[ServiceTask, list[str]]:
    """One tau2-bench task (a ``tasks.json`` entry) as a :class:`~.core.ServiceTask`, and the
    criteria of its basis that are not graded offline."""
    task_id = str(raw["id"])
    scenario_raw = raw.get("user_scenario") or {}
    instructions = scenario_raw.get("instructions") or {}
    if isinstance(instructions, str):  # tau2-bench allows plain-text instructions
        instructions = {"reason_for_call": instructions}
    reason = str(instructions.get("reason_for_call") or "")
    known = str(instructions.get("known_info") or "")
    unknown = instructions.get("unknown_info")
    parts = [
        f"Reason for the call: {reason}",
        f"Known info: {known}" if known else "",
        f"Unknown info: {unknown}" if unknown else "",
        f"Task instructions: {instructions.get('task_instructions')}" if instructions.get("task_instructions") else "",
    ]
    unknown_keys = parse_unknown_info(unknown)
    facts = {
        k: v
        for k, v in parse_known_info(f"{known}\n{reason}").items()
        if not any(u in k.replace("_", " ") for u in unknown_keys)
    }
    scenario = Scenario(
        persona=str(scenario_raw.get("persona") or "A customer of the store."),
        reason_for_call=first_person(_first_sentence(reason)) or "Hi, I need some help.",
        known_info=facts,
        unknown_info=unknown_keys,
        instructions="\n".join(p for p in parts if p),
    )
    criteria = raw.get("evaluation_criteria") or {}
    actions = list(criteria.get("actions") or [])
    basis = list(criteria.get("reward_basis") or ["DB", "COMMUNICATE"])
    unknown_basis = [b for b in basis if b not in GRADED and b not in NOT_GRADED]
    if unknown_basis:
        raise ConfigError(
            f"tau2-bench task {task_id!r}: unknown reward_basis {unknown_basis}; expected among "
            f"{list(GRADED) + list(NOT_GRADED)}."
        )
    dropped = [b for b in basis if b in NOT_GRADED]
    task = ServiceTask(
        kind=f"task_{task_id}",
        scenario=scenario,
        gold_actions=tuple(_tool_call(a) for a in actions),
        communicate_info=tuple(str(c) for c in criteria.get("communicate_info") or ()),
        required_actions=tuple(_tool_call(a, required=True) for a in actions) if "ACTION" in basis else (),
        reward_basis=tuple(b for b in basis if b in GRADED),
        extra={
            "tau2_id": task_id,
            "tau2_domain": domain,
            "not_graded": dropped,
            "nl_assertions": list(criteria.get("nl_assertions") or []),
        },
    )
    return task, dropped


class Tau2User(ScriptedUser):
    """The scripted user of a tau2-bench task (see :class:`~.user.ScriptedUser`): reveals the
    parsed facts by keyword, says yes to confirmations, says what it does not know, restates its
    request (the first sentence of ``reason_for_call``), and ends the call once the database is the
    expected one (tasks that change it) or every ``communicate_info`` was told. The expected state
    is computed once per episode (tau2-bench's databases are megabytes)."""

    _expected: str | None = None

    def begin(self, start: World) -> None:
        super().begin(start)
        self._expected = None

    def satisfied(self, message: str, world: World) -> bool:
        if any(self._writes(c) for c in self.task.gold_actions):
            if self._expected is None:
                self._expected = self.domain.expected_world(self._start, self.task).state_hash()
            return world.state_hash() == self._expected
        return super().satisfied(message, world)


class Tau2Domain(Domain):
    """A tau2-bench domain loaded from a checkout (:func:`load_tau2`): a fixed task list over one
    database. Subclasses give the tools (:meth:`tools`)."""

    name: ClassVar[str] = "tau2"
    title: ClassVar[str] = "a tau2-bench domain"

    def __init__(
        self,
        db: dict[str, Any],
        policy: str,
        tasks: Sequence[ServiceTask],
        *,
        source: str = "",
        split: str | None = None,
    ) -> None:
        self._db_json = json.dumps(db)
        self.policy = policy  # type: ignore[misc]  # tau2-bench's policy.md, per instance
        self.tasks: list[ServiceTask] = list(tasks)
        self.source = source
        self.split = split
        if not self.tasks:
            raise ConfigError(f"no tau2-bench tasks to play from {source or 'the checkout'} (split {split!r}).")

    # the fixed-task-list protocol of ServiceEnv
    def task_count(self) -> int:
        return len(self.tasks)

    def task_ids(self) -> list[str]:
        """tau2-bench's ids of the tasks, in play order (seed i plays ``task_ids()[i]``)."""
        return [str(t.extra["tau2_id"]) for t in self.tasks]

    def base_world(self) -> World:
        """A fresh copy of the database (every retail and airline task starts from it)."""
        return World(json.loads(self._db_json))

    def world_and_task(self, index: int) -> tuple[World, ServiceTask]:
        return self.base_world(), self.tasks[index]

    def make_world(self, rng: random.Random) -> World:
        return self.base_world()

    def make_task(self, world: World, rng: random.Random) -> ServiceTask:
        return self.tasks[rng.randrange(len(self.tasks))]

    def make_user(self, task: ServiceTask) -> Any:
        return Tau2User(task, self)


# --------------------------------------------------------------------------- retail
def get_item_details(world: World, item_id: str) -> dict[str, Any]:
    for product in world.db["products"].values():
        variant = product["variants"].get(item_id)
        if variant is not None:
            return variant
    raise ToolError(f"no item with id {item_id!r}; item ids are listed by get_product_details (not product ids).")


def modify_pending_order_payment(world: World, order_id: str, payment_method_id: str) -> dict[str, Any]:
    order = world.db["orders"].get(order_id)
    if order is None:
        raise ToolError(f"no order with id {order_id!r}.")
    if order["status"] == "cancelled":
        raise ToolError(f"order {order_id} is cancelled: nothing can change on it.")
    history = order["payment_history"]
    if len(history) != 1 or history[0]["transaction_type"] != "payment":
        raise ToolError(f"order {order_id} has {len(history)} payment entries: only a single payment can move.")
    old_id = history[0]["payment_method_id"]
    if old_id == payment_method_id:
        raise ToolError(f"order {order_id} is already paid with {payment_method_id}; choose another method.")
    methods = world.db["users"][order["user_id"]]["payment_methods"]
    method = methods.get(payment_method_id)
    if method is None:
        raise ToolError(
            f"user {order['user_id']!r} has no payment method {payment_method_id!r}; theirs: {', '.join(sorted(methods))}."
        )
    amount = cents(history[0]["amount"])
    if method["source"] == "gift_card" and cents(method["balance"]) < amount:
        raise ToolError(
            f"gift card {payment_method_id} holds {method['balance']:.2f}, less than the {dollars(amount):.2f} to pay."
        )
    history.append({"transaction_type": "payment", "amount": dollars(amount), "payment_method_id": payment_method_id})
    history.append({"transaction_type": "refund", "amount": dollars(amount), "payment_method_id": old_id})
    if method["source"] == "gift_card":
        method["balance"] = dollars(cents(method["balance"]) - amount)
    old = methods.get(old_id)
    if old is not None and old["source"] == "gift_card":
        old["balance"] = dollars(cents(old["balance"]) + amount)
    return order


def transfer_to_human_agents(world: World, summary: str) -> str:
    return "Transfer successful"


_S = {"type": "string"}


def _retail_extra_tools() -> list[Tool]:
    return [
        Tool(
            "get_item_details",
            "An item (one variant of a product): item id, options, price and availability.",
            {"type": "object", "properties": {"item_id": _S}, "required": ["item_id"]},
            get_item_details,
        ),
        Tool(
            "modify_pending_order_payment",
            "Pay a pending order with another payment method of its user (the old one is refunded).",
            {
                "type": "object",
                "properties": {
                    "order_id": {"type": "string", "description": "like '#W1234567'"},
                    "payment_method_id": _S,
                },
                "required": ["order_id", "payment_method_id"],
            },
            modify_pending_order_payment,
            writes=True,
        ),
        Tool(
            "transfer_to_human_agents",
            "Hand the user over to a human agent, with a summary of their issue (only when the policy says so).",
            {"type": "object", "properties": {"summary": _S}, "required": ["summary"]},
            transfer_to_human_agents,
        ),
    ]


class Tau2RetailDomain(Tau2Domain):
    """tau2-bench's retail tasks on envgym's retail tools (:class:`.retail.RetailDomain`'s, plus
    ``get_item_details``, ``modify_pending_order_payment`` and ``transfer_to_human_agents``),
    tau2-bench's database and policy text; the policy checks of envgym's retail domain
    (:meth:`.retail.RetailDomain.violations`, reported as ``policy_reward``, not in the basis)."""

    name: ClassVar[str] = "tau2-retail"
    title: ClassVar[str] = "an online retail store"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._retail = RetailDomain()
        self._tool_list = self._retail.tools() + _retail_extra_tools()

    def tools(self) -> list[Tool]:
        return list(self._tool_list)

    def violations(self, before: World, call: ToolCall, result: Any) -> list[str]:
        if call.name == "modify_pending_order_payment":
            order = before.db["orders"][call.arguments["order_id"]]
            if "pending" not in order["status"]:
                return [f"changed the payment of order {order['order_id']} whose status is {order['status']!r}."]
            return []
        return self._retail.violations(before, call, result)


# --------------------------------------------------------------------------- airline
#: The clock of tau2-bench's airline domain (new reservations are created at this moment).
AIRLINE_NOW = "2024-05-15T15:00:00"
#: Travel insurance per passenger and each non-free checked bag, in dollars (tau2-bench's prices).
INSURANCE_FEE = 30
#: Ids a new reservation takes, in order (tau2-bench's convention: at most three per task).
NEW_RESERVATION_IDS: tuple[str, ...] = ("HATHAT", "HATHAU", "HATHAV")
#: Ids a new certificate takes, in order.
NEW_CERTIFICATE_IDS: tuple[str, ...] = ("certificate_3221322", "certificate_3221323", "certificate_3221324")
#: City names of the IATA codes ``list_all_airports`` may list (those of flights in the database).
AIRPORT_CITIES: dict[str, str] = {
    "ATL": "Atlanta", "BOS": "Boston", "CLT": "Charlotte", "DEN": "Denver", "DFW": "Dallas",
    "DTW": "Detroit", "EWR": "Newark", "IAH": "Houston", "JFK": "New York", "LAS": "Las Vegas",
    "LAX": "Los Angeles", "LGA": "LaGuardia", "MCO": "Orlando", "MIA": "Miami", "MSP": "Minneapolis",
    "ORD": "Chicago", "PHL": "Philadelphia", "PHX": "Phoenix", "SEA": "Seattle", "SFO": "San Francisco",
}  # fmt: skip


def _air_reservation(world: World, reservation_id: str) -> dict[str, Any]:
    res = world.db["reservations"].get(reservation_id)
    if res is None:
        raise ToolError(f"no reservation with id {reservation_id!r} (reservation ids are 6 letters or digits).")
    return res


def _air_day(world: World, flight_number: str, date: str) -> tuple[dict[str, Any], dict[str, Any]]:
    flight = world.db["flights"].get(flight_number)
    if flight is None:
        raise ToolError(f"no flight number {flight_number!r} (flight numbers look like 'HAT123').")
    day = flight["dates"].get(date)
    if day is None:
        raise ToolError(f"flight {flight_number} does not fly on {date!r} (dates are YYYY-MM-DD).")
    return flight, day


def _air_open_day(world: World, flight_number: str, date: str, cabin: str, seats: int) -> tuple[dict, dict]:
    flight, day = _air_day(world, flight_number, date)
    if day["status"] != "available":
        raise ToolError(f"flight {flight_number} on {date} is {day['status']}: only available flights can be booked.")
    if day["available_seats"][cabin] < seats:
        raise ToolError(
            f"flight {flight_number} on {date} has {day['available_seats'][cabin]} {cabin} seat(s) left; {seats} needed."
        )
    return flight, day


def _direct(world: World, date: str, origin: str | None, destination: str | None, after: str = "") -> list[dict]:
    out = []
    for flight in world.db["flights"].values():
        day = flight["dates"].get(date)
        if day is None or day["status"] != "available":
            continue
        if origin is not None and flight["origin"] != origin:
            continue
        if destination is not None and flight["destination"] != destination:
            continue
        if after and flight["scheduled_departure_time_est"] < after:
            continue
        out.append(
            {
                "flight_number": flight["flight_number"],
                "origin": flight["origin"],
                "destination": flight["destination"],
                "status": "available",
                "scheduled_departure_time_est": flight["scheduled_departure_time_est"],
                "scheduled_arrival_time_est": flight["scheduled_arrival_time_est"],
                "date": date,
                "available_seats": dict(day["available_seats"]),
                "prices": dict(day["prices"]),
            }
        )
    return out


def air_search_direct_flight(world: World, origin: str, destination: str, date: str) -> list[dict[str, Any]]:
    return _direct(world, date, origin, destination)


def air_search_onestop_flight(world: World, origin: str, destination: str, date: str) -> list[list[dict[str, Any]]]:
    pairs = []
    for first in _direct(world, date, origin, None):
        arrival = first["scheduled_arrival_time_est"]
        second_date = date
        if "+1" in arrival:  # arrives the next day: the connection leaves that day, any time
            second_date = (datetime.date.fromisoformat(date) + datetime.timedelta(days=1)).isoformat()
            arrival = ""
        for second in _direct(world, second_date, first["destination"], destination, after=arrival):
            pairs.append([first, second])
    return pairs


def air_list_all_airports(world: World) -> list[dict[str, str]]:
    codes = sorted({f[k] for f in world.db["flights"].values() for k in ("origin", "destination")})
    return [{"iata": c, "city": AIRPORT_CITIES.get(c, c)} for c in codes]


def air_get_flight_status(world: World, flight_number: str, date: str) -> str:
    return str(_air_day(world, flight_number, date)[1]["status"])


def air_get_user_details(world: World, user_id: str) -> dict[str, Any]:
    return travel.get_user_details(world, user_id)


def air_get_reservation_details(world: World, reservation_id: str) -> dict[str, Any]:
    return copy.deepcopy(_air_reservation(world, reservation_id))


def air_book_reservation(
    world: World,
    user_id: str,
    origin: str,
    destination: str,
    flight_type: str,
    cabin: str,
    flights: list[dict[str, Any]],
    passengers: list[dict[str, Any]],
    payment_methods: list[dict[str, Any]],
    total_baggages: int,
    nonfree_baggages: int,
    insurance: str,
) -> dict[str, Any]:
    user = travel._user(world, user_id)
    new_id = next((r for r in NEW_RESERVATION_IDS if r not in world.db["reservations"]), None)
    if new_id is None:
        raise ToolError(f"too many new reservations: at most {len(NEW_RESERVATION_IDS)} per conversation.")
    if not passengers:
        raise ToolError("a reservation needs at least one passenger.")
    if not 0 <= nonfree_baggages <= total_baggages:
        raise ToolError(f"nonfree_baggages must be between 0 and total_baggages ({total_baggages}).")
    legs, days, price = [], [], 0
    for info in flights:
        flight, day = _air_open_day(world, info["flight_number"], info["date"], cabin, len(passengers))
        legs.append(
            {
                "flight_number": flight["flight_number"],
                "origin": flight["origin"],
                "destination": flight["destination"],
                "date": info["date"],
                "price": day["prices"][cabin],
            }
        )
        days.append(day)
        price += day["prices"][cabin] * len(passengers)
    if not legs:
        raise ToolError("a reservation needs at least one flight.")
    price += (INSURANCE_FEE * len(passengers) if insurance == "yes" else 0) + travel.BAG_FEE * nonfree_baggages
    for payment in payment_methods:
        method = user["payment_methods"].get(payment["payment_id"])
        if method is None:
            raise ToolError(
                f"user {user_id} has no payment method {payment['payment_id']!r}; theirs: "
                f"{', '.join(sorted(user['payment_methods']))}."
            )
        if method["source"] in ("gift_card", "certificate") and method["amount"] < payment["amount"]:
            raise ToolError(f"{payment['payment_id']} holds ${method['amount']}, less than ${payment['amount']}.")
    paid = sum(p["amount"] for p in payment_methods)
    if paid != price:
        raise ToolError(f"the payments add up to ${paid}; the reservation costs ${price}.")
    for payment in payment_methods:
        method = user["payment_methods"][payment["payment_id"]]
        if method["source"] == "gift_card":
            method["amount"] -= payment["amount"]
        elif method["source"] == "certificate":  # a certificate is used up whatever is left on it
            del user["payment_methods"][payment["payment_id"]]
    for day in days:
        day["available_seats"][cabin] -= len(passengers)
    res = {
        "reservation_id": new_id,
        "user_id": user_id,
        "origin": origin,
        "destination": destination,
        "flight_type": flight_type,
        "cabin": cabin,
        "flights": legs,
        "passengers": [
            {"first_name": p["first_name"], "last_name": p["last_name"], "dob": p["dob"]} for p in passengers
        ],
        "payment_history": [{"payment_id": p["payment_id"], "amount": p["amount"]} for p in payment_methods],
        "created_at": AIRLINE_NOW,
        "total_baggages": total_baggages,
        "nonfree_baggages": nonfree_baggages,
        "insurance": insurance,
        "status": None,
    }
    world.db["reservations"][new_id] = res
    user["reservations"].append(new_id)
    return copy.deepcopy(res)


def air_cancel_reservation(world: World, reservation_id: str) -> dict[str, Any]:
    res = _air_reservation(world, reservation_id)
    if res.get("status") == "cancelled":
        raise ToolError(f"reservation {reservation_id} is already cancelled.")
    res["payment_history"].extend(
        {"payment_id": p["payment_id"], "amount": -p["amount"]} for p in list(res["payment_history"])
    )
    res["status"] = "cancelled"  # seats are not released, as in tau2-bench
    return copy.deepcopy(res)


def air_update_reservation_flights(
    world: World, reservation_id: str, cabin: str, flights: list[dict[str, Any]], payment_id: str
) -> dict[str, Any]:
    res = _air_reservation(world, reservation_id)
    pax = len(res["passengers"])
    legs, total = [], 0
    for info in flights:
        kept = next(
            (
                leg
                for leg in res["flights"]
                if (leg["flight_number"], leg["date"]) == (info["flight_number"], info["date"])
                and cabin == res["cabin"]
            ),
            None,
        )
        if kept is None:
            flight, day = _air_open_day(world, info["flight_number"], info["date"], cabin, pax)
            kept = {
                "flight_number": flight["flight_number"],
                "origin": flight["origin"],
                "destination": flight["destination"],
                "date": info["date"],
                "price": day["prices"][cabin],
            }
        legs.append(kept)
        total += kept["price"] * pax
    if not legs:
        raise ToolError("give every flight of the new itinerary (at least one).")
    difference = total - sum(leg["price"] for leg in res["flights"]) * pax
    travel._pay(world, res, payment_id, difference)  # seats are not moved, as in tau2-bench
    res["flights"] = [dict(leg) for leg in legs]
    res["cabin"] = cabin
    return copy.deepcopy(res)


def air_update_reservation_baggages(
    world: World, reservation_id: str, total_baggages: int, nonfree_baggages: int, payment_id: str
) -> dict[str, Any]:
    res = _air_reservation(world, reservation_id)
    if not 0 <= nonfree_baggages <= total_baggages:
        raise ToolError(f"nonfree_baggages must be between 0 and total_baggages ({total_baggages}).")
    travel._pay(world, res, payment_id, travel.BAG_FEE * max(0, nonfree_baggages - res["nonfree_baggages"]))
    res["total_baggages"], res["nonfree_baggages"] = total_baggages, nonfree_baggages
    return copy.deepcopy(res)


def air_update_reservation_passengers(world: World, reservation_id: str, passengers: list[dict[str, Any]]) -> dict:
    res = _air_reservation(world, reservation_id)
    if len(passengers) != len(res["passengers"]):
        raise ToolError(
            f"reservation {reservation_id} has {len(res['passengers'])} passenger(s); the number cannot change."
        )
    res["passengers"] = [
        {"first_name": p["first_name"], "last_name": p["last_name"], "dob": p["dob"]} for p in passengers
    ]
    return copy.deepcopy(res)


def air_send_certificate(world: World, user_id: str, amount: int) -> str:
    user = travel._user(world, user_id)
    if amount <= 0:
        raise ToolError(f"amount must be a positive number of dollars, got {amount}.")
    payment_id = next((c for c in NEW_CERTIFICATE_IDS if c not in user["payment_methods"]), None)
    if payment_id is None:
        raise ToolError(f"too many certificates: at most {len(NEW_CERTIFICATE_IDS)} per conversation.")
    user["payment_methods"][payment_id] = {"source": "certificate", "id": payment_id, "amount": amount}
    return f"Certificate {payment_id} added to user {user_id} with amount {amount}."


_ARITHMETIC = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
}


def _arith(node: ast.AST) -> float:
    if isinstance(node, ast.Expression):
        return _arith(node.body)
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return float(node.value)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.UAdd, ast.USub)):
        value = _arith(node.operand)
        return -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, ast.BinOp) and type(node.op) in _ARITHMETIC:
        return _ARITHMETIC[type(node.op)](_arith(node.left), _arith(node.right))
    raise ToolError("only numbers, + - * /, parentheses and spaces are allowed.")


def calculate(world: World, expression: str) -> str:
    """Safe arithmetic: the expression is parsed, never evaluated as code."""
    if not expression.strip() or any(ch not in "0123456789+-*/(). " for ch in expression) or len(expression) > 200:
        raise ToolError(
            "the expression may hold only numbers, + - * /, parentheses and spaces (at most 200 characters)."
        )
    try:
        value = _arith(ast.parse(expression, mode="eval"))
    except SyntaxError as err:
        raise ToolError(f"not an arithmetic expression: {expression!r}.") from err
    except ZeroDivisionError as err:
        raise ToolError("division by zero.") from err
    return str(round(value, 2))


_AS = {"type": "string"}
_AINT = {"type": "integer"}
_ACABIN = {"type": "string", "enum": ["basic_economy", "economy", "business"]}
_AFLIGHTS = {
    "type": "array",
    "items": {
        "type": "object",
        "properties": {
            "flight_number": {"type": "string", "description": "like 'HAT001'"},
            "date": {"type": "string", "description": "YYYY-MM-DD"},
        },
        "required": ["flight_number", "date"],
    },
}
_APASSENGERS = {
    "type": "array",
    "items": {
        "type": "object",
        "properties": {"first_name": _AS, "last_name": _AS, "dob": {"type": "string", "description": "YYYY-MM-DD"}},
        "required": ["first_name", "last_name", "dob"],
    },
}
_APAY = {"type": "string", "description": "a payment method id of the user, like 'credit_card_7815826'"}


def _aobj(properties: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": list(properties)}


def airline_tools() -> list[Tool]:
    """tau2-bench's airline tools (names, arguments, semantics), on its database layout."""
    route = _aobj(
        {
            "origin": {"type": "string", "description": "IATA code, like 'JFK'"},
            "destination": {"type": "string", "description": "IATA code, like 'LAX'"},
            "date": {"type": "string", "description": "YYYY-MM-DD"},
        }
    )
    return [
        Tool(
            "get_user_details",
            "A user's profile: name, address, membership, payment methods, saved passengers, reservation ids.",
            _aobj({"user_id": _AS}),
            air_get_user_details,
        ),
        Tool(
            "get_reservation_details",
            "A reservation: flights and prices, cabin, passengers, payments, bags, insurance, status.",
            _aobj({"reservation_id": _AS}),
            air_get_reservation_details,
        ),
        Tool(
            "get_flight_status",
            "The status of a flight on a date (available, delayed, cancelled, landed, flying, on time).",
            _aobj({"flight_number": _AS, "date": _AS}),
            air_get_flight_status,
        ),
        Tool(
            "list_all_airports",
            "Every airport served: IATA code and city.",
            {"type": "object", "properties": {}, "required": []},
            air_list_all_airports,
        ),
        Tool(
            "search_direct_flight",
            "Available direct flights between two airports on a date, with seats and prices per cabin.",
            route,
            air_search_direct_flight,
        ),
        Tool(
            "search_onestop_flight",
            "Available one-stop connections (pairs of flights) between two airports leaving on a date.",
            route,
            air_search_onestop_flight,
        ),
        Tool(
            "calculate",
            "Compute an arithmetic expression (numbers, + - * /, parentheses).",
            _aobj({"expression": _AS}),
            calculate,
        ),
        Tool(
            "book_reservation",
            f"Book a reservation. Price: the cabin's price of each flight times passengers, ${INSURANCE_FEE} per passenger "
            f"for insurance, ${travel.BAG_FEE} per non-free bag; the payments must add up to it (a certificate is used up).",
            _aobj(
                {
                    "user_id": _AS,
                    "origin": _AS,
                    "destination": _AS,
                    "flight_type": {"type": "string", "enum": ["one_way", "round_trip"]},
                    "cabin": _ACABIN,
                    "flights": _AFLIGHTS,
                    "passengers": _APASSENGERS,
                    "payment_methods": {"type": "array", "items": _aobj({"payment_id": _AS, "amount": _AINT})},
                    "total_baggages": _AINT,
                    "nonfree_baggages": _AINT,
                    "insurance": {"type": "string", "enum": ["yes", "no"]},
                }
            ),
            air_book_reservation,
            writes=True,
        ),
        Tool(
            "cancel_reservation",
            "Cancel a whole reservation; every payment is refunded to its method.",
            _aobj({"reservation_id": _AS}),
            air_cancel_reservation,
            writes=True,
        ),
        Tool(
            "update_reservation_flights",
            "Set the cabin and the flights of a reservation (list EVERY flight of the new itinerary, changed or not); "
            "the price difference is charged to, or refunded to, payment_id.",
            _aobj({"reservation_id": _AS, "cabin": _ACABIN, "flights": _AFLIGHTS, "payment_id": _APAY}),
            air_update_reservation_flights,
            writes=True,
        ),
        Tool(
            "update_reservation_baggages",
            f"Set a reservation's checked bags (new total, new number of non-free ones: ${travel.BAG_FEE} per added non-free bag, charged to payment_id).",
            _aobj({"reservation_id": _AS, "total_baggages": _AINT, "nonfree_baggages": _AINT, "payment_id": _APAY}),
            air_update_reservation_baggages,
            writes=True,
        ),
        Tool(
            "update_reservation_passengers",
            "Replace the passenger list of a reservation (same number of passengers).",
            _aobj({"reservation_id": _AS, "passengers": _APASSENGERS}),
            air_update_reservation_passengers,
            writes=True,
        ),
        Tool(
            "send_certificate",
            "Give a user a travel certificate of `amount` dollars. Be careful!",
            _aobj({"user_id": _AS, "amount": _AINT}),
            air_send_certificate,
            writes=True,
        ),
        Tool(
            "transfer_to_human_agents",
            "Hand the user over to a human agent, with a summary (only when the policy says so).",
            _aobj({"summary": _AS}),
            transfer_to_human_agents,
        ),
    ]


class Tau2AirlineDomain(Tau2Domain):
    """tau2-bench's airline tasks on envgym tools that keep tau2-bench's airline tool names,
    arguments and semantics (:func:`airline_tools`: the lookups and payment rules of envgym's
    travel domain, :mod:`.travel`, plus booking, one-stop search, airports, flight status, safe
    arithmetic and transfers), on tau2-bench's database and policy text. No policy checks
    (``policy_reward`` is always 1): the graded basis is what tau2-bench grades offline."""

    name: ClassVar[str] = "tau2-airline"
    title: ClassVar[str] = "an airline"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._tool_list = airline_tools()

    def tools(self) -> list[Tool]:
        return list(self._tool_list)


# --------------------------------------------------------------------------- loading
def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise ConfigError(
            f"{path} is not valid JSON ({err}): is it a tau2-bench checkout (with its data files)?"
        ) from err


def _replay_gold(domain: Tau2Domain, task: ServiceTask, world: World) -> tuple[ServiceTask, list[str]]:
    """The task with the gold actions envgym's tools cannot run left out, and what failed."""
    kept, failed = [], []
    tools = {t.name for t in domain.tools()}
    for call in task.gold_actions:
        if call.requestor != "assistant" or call.name not in tools:
            failed.append(f"{call.name} ({call.requestor}): no such tool here")
            continue
        try:
            domain.run(world, call)
        except ToolError as err:
            failed.append(f"{call.name}: {err}")
            continue
        kept.append(call)
    if not failed:
        return task, []
    return replace(task, gold_actions=tuple(kept)), failed


def load_tau2(repo_path: str | Path, domain: str = "retail", split: str | None = None) -> Tau2Domain:
    """Load a tau2-bench domain's tasks from a checkout of its repository, for :class:`.env.ServiceEnv`.

    Args:
        repo_path: the root of a tau2-bench checkout (it holds ``data/tau2/domains/``), or a
            folder holding domain folders in that layout (``<repo_path>/retail/tasks.json``).
        domain: ``"retail"`` or ``"airline"``.
        split: ``None`` for every task of ``tasks.json``, or a split of ``split_tasks.json``
            (``"train"``, ``"test"``, ``"base"``, ...).

    Returns:
        A :class:`Tau2Domain` whose tasks keep ``tasks.json``'s order (``task_ids()``); pass it as
        ``ServiceEnv(domain=...)``: seed ``i`` plays task ``i % len(tasks)``.

    Warns:
        ``UserWarning`` once per load for reward criteria that are not graded offline
        (``NL_ASSERTION``, ``ENV_ASSERTION``: dropped from the basis), for gold actions envgym's
        tools cannot run (left out) and for tasks skipped (an ``initial_state``).

    Raises:
        NotAvailableError: no tau2-bench data at ``repo_path``.
        ConfigError: an unknown domain or split, or malformed files.
    """
    if domain not in TAU2_DOMAINS:
        raise ConfigError(f"tau2-bench domain must be one of {', '.join(TAU2_DOMAINS)}, got {domain!r}.")
    root = Path(repo_path).expanduser()
    folder = root / "data" / "tau2" / "domains" / domain
    if not folder.is_dir() and (root / domain).is_dir():  # the domains folder itself
        folder = root / domain
    missing = [name for name in ("db.json", "policy.md", "tasks.json") if not (folder / name).is_file()]
    if missing:
        raise NotAvailableError(
            f"no tau2-bench {domain} data at {folder} (missing {', '.join(missing)}). tau2-bench is not on PyPI: "
            f"clone {TAU2_URL} and pass the checkout's root folder."
        )
    cls: type[Tau2Domain] = Tau2AirlineDomain if domain == "airline" else Tau2RetailDomain
    raw_tasks = _read_json(folder / "tasks.json")
    if not isinstance(raw_tasks, list):
        raise ConfigError(f"{folder / 'tasks.json'} must hold a JSON list of tasks, got {type(raw_tasks).__name__}.")
    if split is not None:
        splits_path = folder / "split_tasks.json"
        if not splits_path.is_file():
            raise NotAvailableError(f"split {split!r} asked but {splits_path} does not exist; use split=None.")
        splits = _read_json(splits_path)
        if split not in splits:
            raise ConfigError(f"tau2-bench {domain} split must be one of {', '.join(sorted(splits))}, got {split!r}.")
        wanted = {str(i) for i in splits[split]}
        raw_tasks = [t for t in raw_tasks if str(t.get("id")) in wanted]
    db = _read_json(folder / "db.json")
    policy = (folder / "policy.md").read_text(encoding="utf-8")
    tasks, dropped, skipped = [], {}, []
    for raw in raw_tasks:
        if raw.get("initial_state"):
            skipped.append(str(raw.get("id")))
            continue
        task, not_graded = tau2_task(raw, domain)
        for b in not_graded:
            dropped.setdefault(b, []).append(str(raw["id"]))
        tasks.append(task)
    loaded = cls(db, policy, tasks, source=str(folder), split=split)
    failures: dict[str, list[str]] = {}
    checked = []
    for task in loaded.tasks:
        task, failed = _replay_gold(loaded, task, loaded.base_world())
        if failed:
            failures[str(task.extra["tau2_id"])] = failed
        checked.append(task)
    loaded.tasks = checked
    for criterion, ids in dropped.items():
        warnings.warn(
            f"tau2-bench {domain}: {len(ids)} of {len(tasks)} tasks grade {criterion}, which is not graded offline "
            f"({NOT_GRADED[criterion]}); it is dropped from their reward basis (tasks {', '.join(ids[:8])}"
            f"{', ...' if len(ids) > 8 else ''}).",
            stacklevel=2,
        )
    if failures:
        listed = "; ".join(f"task {k}: {', '.join(v)}" for k, v in list(failures.items())[:5])
        warnings.warn(
            f"tau2-bench {domain}: gold actions of {len(failures)} tasks fail with envgym's tools and are left out of "
            f"the expected state (as tau2-bench skips failing gold actions): {listed}",
            stacklevel=2,
        )
    if skipped:
        warnings.warn(
            f"tau2-bench {domain}: {len(skipped)} tasks have an initial_state, which this loader does not apply; "
            f"skipped: {', '.join(skipped)}.",
            stacklevel=2,
        )
    return loaded
