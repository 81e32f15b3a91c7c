"""Retail worlds, tasks and the scripted user (the domain itself is :mod:`.retail`).

:func:`make_world` draws a store (catalogue, users, orders) from a seeded ``random.Random``;
:func:`make_task` draws a task of one of :data:`KINDS` over it without changing it. Every task's
gold calls are a real solution (tests replay them through the grader), and the facts the user
gives are built from the same values the gold calls use, so a task cannot be mis-annotated.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from envgym.environments.service.core import Scenario, ServiceTask, ToolCall, World, normalise
from envgym.environments.service.retail.tools import cents, dollars, order_total
from envgym.environments.service.user import CONFIRM, ScriptedUser

__all__ = ["KINDS", "PRODUCT_TYPES", "RetailUser", "format_address", "make_task", "make_world"]

#: Product types: name -> (base price, option name -> values). No name contains another, and
#: no value holds a comma, a colon or a parenthesis (the user writes ``name (to key: value, ...)``).
PRODUCT_TYPES: dict[str, tuple[float, dict[str, list[str]]]] = {
    "T-Shirt": (
        24.0,
        {"colour": ["black", "white", "navy", "red", "green"], "size": ["small", "medium", "large", "x-large"]},
    ),
    "Running Shoes": (95.0, {"colour": ["black", "white", "grey", "blue"], "size": ["8", "9", "10", "11"]}),
    "Desk Lamp": (42.0, {"colour": ["black", "white", "silver"], "power source": ["battery", "USB", "AC adapter"]}),
    "Water Bottle": (19.0, {"capacity": ["500ml", "750ml", "1000ml"], "colour": ["blue", "green", "black", "red"]}),
    "Backpack": (64.0, {"colour": ["black", "grey", "navy"], "size": ["small", "medium", "large"]}),
    "Wireless Earbuds": (120.0, {"colour": ["black", "white", "blue"], "case": ["standard", "wireless charging"]}),
    "Coffee Maker": (85.0, {"capacity": ["1 cup", "4 cups", "8 cups"], "type": ["drip", "espresso", "pour-over"]}),
    "Yoga Mat": (35.0, {"thickness": ["4mm", "6mm", "8mm"], "colour": ["purple", "green", "blue", "black"]}),
    "Office Chair": (210.0, {"material": ["mesh", "leather", "fabric"], "colour": ["black", "grey", "white"]}),
    "Notebook": (12.0, {"pages": ["100", "200", "300"], "cover": ["hard", "soft"]}),
    "Headphones": (150.0, {"type": ["over-ear", "on-ear"], "colour": ["black", "silver", "blue"]}),
    "Sunglasses": (80.0, {"frame": ["metal", "plastic"], "lens": ["polarized", "tinted", "mirrored"]}),
    "Bluetooth Speaker": (70.0, {"colour": ["black", "red", "blue"], "battery": ["10 hours", "20 hours"]}),
    "Garden Hose": (38.0, {"length": ["25ft", "50ft", "100ft"], "material": ["rubber", "vinyl"]}),
}
FIRST_NAMES = [
    "Anna",
    "Yusuf",
    "Mei",
    "Omar",
    "Lucas",
    "Sofia",
    "Ethan",
    "Aisha",
    "Noah",
    "Lena",
    "Ivan",
    "Chloe",
    "Mateo",
    "Priya",
    "Liam",
    "Fatima",
    "Hugo",
    "Zoe",
    "Ravi",
    "Elena",
    "Daniel",
    "Amara",
    "Kenji",
    "Olivia",
]
LAST_NAMES = [
    "Lopez",
    "Rossi",
    "Chen",
    "Khan",
    "Silva",
    "Novak",
    "Brown",
    "Garcia",
    "Ito",
    "Patel",
    "Muller",
    "Kim",
    "Jensen",
    "Okafor",
    "Moreau",
    "Santos",
    "Ahmed",
    "Costa",
    "Walsh",
    "Nguyen",
]
STREETS = (
    "Oak Street",
    "Maple Avenue",
    "Cedar Lane",
    "Pine Road",
    "Elm Drive",
    "Lake View",
    "Hill Street",
    "River Road",
    "Park Avenue",
    "Sunset Boulevard",
)
CITIES = (
    ("Austin", "TX"),
    ("Denver", "CO"),
    ("Seattle", "WA"),
    ("Boston", "MA"),
    ("Phoenix", "AZ"),
    ("Portland", "OR"),
    ("Chicago", "IL"),
    ("Atlanta", "GA"),
    ("Columbus", "OH"),
    ("Nashville", "TN"),
)
_FULL_NAMES = [(first, last) for first in FIRST_NAMES for last in LAST_NAMES]
BRANDS = ("Visa", "Mastercard", "Amex")
STATUSES = (("pending", 0.36), ("processed", 0.2), ("delivered", 0.34), ("cancelled", 0.1))
CANCEL_REASONS = ("no longer needed", "ordered by mistake")

# Keywords of the agent's message that make the scripted user give each fact.
_KW_EMAIL = ("email", "e-mail")
_KW_NAME = ("name",)
_KW_ZIP = ("zip", "postal")
_KW_ORDER = ("order id", "order number", "which order", "order #")
_KW_REQUEST = (
    "which item",
    "what item",
    "which product",
    "what product",
    "items",
    "option",
    "variant",
    "version",
    "which one",
    "colour",
    "color",
    "size",
    "instead",
    "exchange",
    "swap",
    "return",
    "send back",
)
_KW_REASON = ("reason", "why")
_KW_REFUND = ("refund", "money back", "reimburse", "credited")
_KW_PAYMENT = ("payment method", "charge", "pay for", "pay the", "card", "paypal")
_KW_ADDRESS = ("address",)


# --------------------------------------------------------------------------- world
def _digits(rng: random.Random, n: int) -> str:
    return f"{rng.randrange(10**n):0{n}d}"


def _address(rng: random.Random) -> dict[str, str]:
    city, state = rng.choice(CITIES)
    unit = rng.choice(("Apt", "Suite", "Unit"))
    return {
        "address1": f"{rng.randint(1, 999)} {rng.choice(STREETS)}",
        "address2": f"{unit} {rng.randint(1, 400)}",
        "city": city,
        "state": state,
        "country": "USA",
        "zip": f"{rng.randint(10000, 99999)}",
    }


def format_address(a: dict[str, str]) -> str:
    """An address as the user says it: ``12 Oak Street, Apt 4, Austin, TX 78701, USA``."""
    return f"{a['address1']}, {a['address2']}, {a['city']}, {a['state']} {a['zip']}, {a['country']}"


def _products(rng: random.Random) -> dict[str, Any]:
    products: dict[str, Any] = {}
    used: set[str] = set()
    for name in rng.sample(sorted(PRODUCT_TYPES), 8):
        base, options = PRODUCT_TYPES[name]
        keys = list(options)
        grid = [dict(zip(keys, (a, b))) for a in options[keys[0]] for b in options[keys[1]]]
        chosen = rng.sample(grid, min(len(grid), rng.randint(4, 8)))
        variants: dict[str, Any] = {}
        for i, opts in enumerate(chosen):
            item_id = _unique(rng, used, 10)
            available = i < 2 or rng.random() < 0.7  # at least two in stock
            variants[item_id] = {
                "item_id": item_id,
                "options": opts,
                "available": available,
                "price": round(base * rng.uniform(0.85, 1.25), 2),
            }
        pid = _unique(rng, used, 10)
        products[pid] = {"product_id": pid, "name": name, "variants": dict(sorted(variants.items()))}
    return products


def _unique(rng: random.Random, used: set[str], n: int, prefix: str = "") -> str:
    while True:
        value = prefix + _digits(rng, n)
        if value not in used:
            used.add(value)
            return value


def make_world(rng: random.Random) -> World:
    """A store: 8 products, 4 to 6 users with 2 to 4 orders each."""
    used: set[str] = set()
    products = _products(rng)
    users: dict[str, Any] = {}
    orders: dict[str, Any] = {}
    names = rng.sample(_FULL_NAMES, rng.randint(4, 6))
    for first, last in names:
        uid = f"{first}_{last}_{_digits(rng, 4)}".lower()
        methods: dict[str, Any] = {}
        fours: set[str] = set()
        for _ in range(rng.choice((1, 1, 2))):
            pm = _unique(rng, used, 7, "credit_card_")
            methods[pm] = {
                "id": pm,
                "source": "credit_card",
                "brand": rng.choice(BRANDS),
                "last_four": _unique(rng, fours, 4),
            }
        if rng.random() < 0.5:
            pm = _unique(rng, used, 7, "paypal_")
            methods[pm] = {"id": pm, "source": "paypal"}
        if rng.random() < 0.55:
            pm = _unique(rng, used, 7, "gift_card_")
            methods[pm] = {"id": pm, "source": "gift_card", "balance": float(rng.randint(0, 300))}
        address = _address(rng)
        user = {
            "user_id": uid,
            "name": {"first_name": first, "last_name": last},
            "email": f"{first}.{last}{rng.randint(10, 99)}@example.com".lower(),
            "address": address,
            "payment_methods": dict(sorted(methods.items())),
            "orders": [],
        }
        for _ in range(rng.randint(2, 4)):
            oid = _unique(rng, used, 7, "#W")
            status = rng.choices([s for s, _ in STATUSES], [w for _, w in STATUSES])[0]
            items = []
            for pid in rng.sample(sorted(products), rng.randint(1, 3)):
                product = products[pid]
                variant = product["variants"][rng.choice(sorted(product["variants"]))]
                items.append(
                    {
                        "name": product["name"],
                        "product_id": pid,
                        "item_id": variant["item_id"],
                        "price": variant["price"],
                        "options": dict(variant["options"]),
                    }
                )
            payer = rng.choice(sorted(methods))
            total = dollars(sum(cents(i["price"]) for i in items))
            order: dict[str, Any] = {
                "order_id": oid,
                "user_id": uid,
                "status": status,
                "address": dict(address) if rng.random() < 0.8 else _address(rng),
                "items": items,
                "payment_history": [{"transaction_type": "payment", "amount": total, "payment_method_id": payer}],
                "fulfillments": [],
            }
            if status in ("processed", "delivered"):
                order["fulfillments"] = [{"tracking_id": [_digits(rng, 12)], "item_ids": [i["item_id"] for i in items]}]
            if status == "cancelled":
                order["cancel_reason"] = rng.choice(CANCEL_REASONS)
                order["payment_history"].append(
                    {"transaction_type": "refund", "amount": total, "payment_method_id": payer}
                )
            orders[oid] = order
            user["orders"].append(oid)
        users[uid] = user
    return World({"users": users, "products": products, "orders": orders})


# --------------------------------------------------------------------------- task pieces
class _Build:
    """What a task builder collects: the user's facts, the opening, the gold calls."""

    def __init__(self, world: World, rng: random.Random, user: dict[str, Any]) -> None:
        self.world, self.rng, self.user = world, rng, user
        self.known: dict[str, tuple[str, tuple[str, ...]]] = {}
        self.unknown: list[str] = []
        self.calls: list[ToolCall] = []
        first, last = user["name"]["first_name"], user["name"]["last_name"]
        self.knows_email = rng.random() < 0.7
        if self.knows_email:
            self.known["email"] = (user["email"], _KW_EMAIL)
            self.calls.append(ToolCall("find_user_id_by_email", {"email": user["email"]}))
        else:
            self.unknown.append("email")
            zip_ = user["address"]["zip"]
            self.calls.append(
                ToolCall("find_user_id_by_name_zip", {"first_name": first, "last_name": last, "zip": zip_})
            )
        self.known["full name"] = (f"{first} {last}", _KW_NAME)
        self.known["zip code"] = (user["address"]["zip"], _KW_ZIP)
        self.calls.append(ToolCall("get_user_details", {"user_id": user["user_id"]}))
        self.order_ref = ""

    def order(self, order: dict[str, Any]) -> None:
        """The user knows the order id, or describes the order by its products when that is unambiguous."""
        names = [i["name"] for i in order["items"]]
        others = [self.world.db["orders"][o] for o in self.user["orders"] if o != order["order_id"]]
        unique = all(not set(names) <= {i["name"] for i in o["items"]} for o in others)
        if not unique or self.rng.random() < 0.65:
            self.known["order id"] = (order["order_id"], _KW_ORDER)
            self.order_ref = f" {order['order_id']}" if self.rng.random() < 0.6 else ""
        else:
            self.unknown.append("order id")
            self.known["order"] = (f"the one with {_and(names)}", _KW_ORDER)
        self.calls.append(ToolCall("get_order_details", {"order_id": order["order_id"]}))

    def scenario(self, opening: str, instructions: str, *, confirm: bool = True) -> Scenario:
        first, last = self.user["name"]["first_name"], self.user["name"]["last_name"]
        persona = f"{first} {last}, a customer of the store; {self.rng.choice(('polite', 'brief', 'a bit impatient', 'friendly'))}."
        return Scenario(
            persona=persona,
            reason_for_call=opening,
            known_info=dict(self.known),
            unknown_info=tuple(self.unknown),
            instructions=instructions,
            confirm=confirm,
        )


def _and(names: list[str]) -> str:
    named = [f"the {n}" for n in names]
    return named[0] if len(named) == 1 else ", ".join(named[:-1]) + " and " + named[-1]


def _describe(item: dict[str, Any], variant: dict[str, Any]) -> str:
    opts = ", ".join(f"{k}: {v}" for k, v in variant["options"].items())
    return f"the {item['name']} (to {opts})"


def _method_phrase(method: dict[str, Any]) -> str:
    if method["source"] == "credit_card":
        return f"my {method['brand']} credit card ending in {method['last_four']}"
    return "my PayPal account" if method["source"] == "paypal" else "my gift card"


def _orders(world: World, user: dict[str, Any], *statuses: str) -> list[dict[str, Any]]:
    return [world.db["orders"][o] for o in user["orders"] if world.db["orders"][o]["status"] in statuses]


def _pick(world: World, rng: random.Random, *statuses: str) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """A user and one of their orders in one of ``statuses``, or ``None``."""
    pairs = [(u, o) for u in world.db["users"].values() for o in _orders(world, u, *statuses)]
    return rng.choice(pairs) if pairs else None


def _refusal(
    kind: str, b: _Build, opening: str, instructions: str, order: dict[str, Any], forbidden: ToolCall
) -> ServiceTask:
    return ServiceTask(
        kind,
        b.scenario(opening, instructions),
        tuple(b.calls),
        communicate_info=(order["status"],),
        forbidden=(forbidden,),
    )


# --------------------------------------------------------------------------- task kinds
def _cancel(world: World, rng: random.Random, kind: str) -> ServiceTask | None:
    statuses = {
        "cancel_pending_order": ("pending",),
        "declined_cancel": ("pending",),
        "refuse_cancel": ("processed", "delivered"),
    }[kind]
    picked = _pick(world, rng, *statuses)
    if picked is None:
        return None
    user, order = picked
    b = _Build(world, rng, user)
    b.order(order)
    reason = rng.choice(CANCEL_REASONS)
    said = {"no longer needed": "I no longer need it", "ordered by mistake": "I ordered it by mistake"}[reason]
    if rng.random() < 0.5:
        opening = f"Hi, I want to cancel my order{b.order_ref}. {said}."
    else:
        opening = f"Hello, I need to cancel an order{b.order_ref}."
        b.known["reason for cancelling"] = (reason, _KW_REASON)
    forbidden = ToolCall("cancel_pending_order", {"order_id": order["order_id"]}, compare_args=("order_id",))
    if kind == "refuse_cancel":
        return _refusal(kind, b, opening, f"Cancel order {order['order_id']} ({reason}).", order, forbidden)
    if kind == "declined_cancel":
        scenario = b.scenario(
            opening,
            f"Ask to cancel order {order['order_id']}, but when asked to confirm, change your mind and say no.",
            confirm=False,
        )
        lookup = ToolCall("get_order_details", {"order_id": order["order_id"]})
        return ServiceTask(
            kind,
            scenario,
            tuple(b.calls),
            required_actions=(lookup,),
            forbidden=(forbidden,),
            reward_basis=("DB", "ACTION", "POLICY"),
        )
    b.calls.append(ToolCall("cancel_pending_order", {"order_id": order["order_id"], "reason": reason}))
    return ServiceTask(kind, b.scenario(opening, f"Cancel order {order['order_id']}: {reason}."), tuple(b.calls))


def _order_address(world: World, rng: random.Random, kind: str) -> ServiceTask | None:
    statuses = ("pending",) if kind == "modify_order_address" else ("processed", "delivered")
    picked = _pick(world, rng, *statuses)
    if picked is None:
        return None
    user, order = picked
    b = _Build(world, rng, user)
    b.order(order)
    new = _address(rng)
    text = format_address(new)
    if rng.random() < 0.5:
        opening = f"Hi, please ship my order{b.order_ref} to a different address: {text}."
    else:
        opening = f"Hi, I need my order{b.order_ref} delivered to a new address."
        b.known["new address"] = (text, _KW_ADDRESS)
    instructions = f"Have order {order['order_id']} shipped to {text}."
    if kind == "refuse_modify_address":
        forbidden = ToolCall(
            "modify_pending_order_address", {"order_id": order["order_id"]}, compare_args=("order_id",)
        )
        return _refusal(kind, b, opening, instructions, order, forbidden)
    b.calls.append(ToolCall("modify_pending_order_address", {"order_id": order["order_id"], **new}))
    return ServiceTask(kind, b.scenario(opening, instructions), tuple(b.calls))


def _default_address(world: World, rng: random.Random, kind: str) -> ServiceTask | None:
    user = world.db["users"][rng.choice(sorted(world.db["users"]))]
    b = _Build(world, rng, user)
    new = _address(rng)
    text = format_address(new)
    if rng.random() < 0.5:
        opening = f"Hi, I moved. Please update the default address on my account to {text}."
    else:
        opening = "Hi, I moved recently and need to update the default address in my profile."
        b.known["new address"] = (text, _KW_ADDRESS)
    b.calls.append(ToolCall("modify_user_address", {"user_id": user["user_id"], **new}))
    return ServiceTask(kind, b.scenario(opening, f"Make {text} your default address."), tuple(b.calls))


def _swappable(world: World, order: dict[str, Any]) -> list[tuple[dict[str, Any], list[dict[str, Any]]]]:
    """Items of ``order`` with the other in-stock variants of their product."""
    out = []
    for item in order["items"]:
        variants = world.db["products"][item["product_id"]]["variants"]
        others = [v for i, v in sorted(variants.items()) if i != item["item_id"] and v["available"]]
        if others:
            out.append((item, others))
    return out


def _exchange(world: World, rng: random.Random, kind: str) -> ServiceTask | None:
    status = {"modify_order_items": "pending", "exchange_items": "delivered", "refuse_exchange": "processed"}[kind]
    candidates = [(u, o) for u in world.db["users"].values() for o in _orders(world, u, status) if _swappable(world, o)]
    if not candidates:
        return None
    user, order = rng.choice(candidates)
    swappable = _swappable(world, order)
    chosen = rng.sample(swappable, rng.randint(1, min(2, len(swappable))))
    chosen.sort(key=lambda pair: order["items"].index(pair[0]))
    swaps = [(item, rng.choice(others)) for item, others in chosen]
    diff = sum(cents(v["price"]) - cents(i["price"]) for i, v in swaps)
    methods = [
        m
        for _, m in sorted(user["payment_methods"].items())
        if not (m["source"] == "gift_card" and diff > 0 and cents(m["balance"]) < diff)
    ]
    if not methods:
        return None
    method = rng.choice(methods)
    b = _Build(world, rng, user)
    b.order(order)
    request = "to exchange " + " and ".join(_describe(i, v) for i, v in swaps)
    if rng.random() < 0.5:
        opening = f"Hi, I'd like {request} in my order{b.order_ref}."
    else:
        opening = f"Hi, I want to swap some items of my order{b.order_ref} for other versions."
        b.known["request"] = (request, _KW_REQUEST)
    b.known["payment method"] = (_method_phrase(method), _KW_PAYMENT)
    instructions = (
        f"In order {order['order_id']}, {request[3:]}; settle any price difference with {_method_phrase(method)}."
    )
    tool = "modify_pending_order_items" if status == "pending" else "exchange_delivered_order_items"
    if kind == "refuse_exchange":
        forbidden = ToolCall(
            "exchange_delivered_order_items", {"order_id": order["order_id"]}, compare_args=("order_id",)
        )
        return _refusal(kind, b, opening, instructions, order, forbidden)
    for pid in dict.fromkeys(i["product_id"] for i, _ in swaps):
        b.calls.append(ToolCall("get_product_details", {"product_id": pid}))
    b.calls.append(
        ToolCall(
            tool,
            {
                "order_id": order["order_id"],
                "item_ids": [i["item_id"] for i, _ in swaps],
                "new_item_ids": [v["item_id"] for _, v in swaps],
                "payment_method_id": method["id"],
            },
        )
    )
    return ServiceTask(kind, b.scenario(opening, instructions), tuple(b.calls))


def _return(world: World, rng: random.Random, kind: str) -> ServiceTask | None:
    statuses = {
        "return_items": ("delivered",),
        "refuse_refund_method": ("delivered",),
        "refuse_return": ("pending", "processed"),
    }[kind]
    picked = _pick(world, rng, *statuses)
    if picked is None:
        return None
    user, order = picked
    original = order["payment_history"][0]["payment_method_id"]
    gift = [m for m in user["payment_methods"].values() if m["source"] == "gift_card"]
    if kind == "refuse_refund_method":
        others = [
            m for pid, m in sorted(user["payment_methods"].items()) if pid != original and m["source"] != "gift_card"
        ]
        if not others:
            return None
        method = rng.choice(others)
        preference = _method_phrase(method)
    elif gift and rng.random() < 0.35:
        method, preference = gift[0], "my gift card"
    else:
        method, preference = user["payment_methods"][original], "the original payment method"
    items = rng.sample(order["items"], rng.randint(1, len(order["items"])))
    items.sort(key=order["items"].index)
    b = _Build(world, rng, user)
    b.order(order)
    request = "to return " + _and([i["name"] for i in items])
    if rng.random() < 0.5:
        opening = f"Hi, I'd like {request} from my order{b.order_ref}."
    else:
        opening = f"Hi, I want to return some items from my order{b.order_ref}."
        b.known["request"] = (request, _KW_REQUEST)
    b.known["refund preference"] = (preference, _KW_REFUND)
    instructions = f"Return {_and([i['name'] for i in items])} of order {order['order_id']}, refund to {preference}."
    forbidden = ToolCall("return_delivered_order_items", {"order_id": order["order_id"]}, compare_args=("order_id",))
    if kind == "refuse_return":
        return _refusal(kind, b, opening, instructions, order, forbidden)
    if kind == "refuse_refund_method":
        instructions += " You want the refund on that method only; if it is not possible, drop the return."
        scenario = b.scenario(opening, instructions)
        return ServiceTask(
            kind, scenario, tuple(b.calls), communicate_info=("original payment method",), forbidden=(forbidden,)
        )
    b.calls.append(
        ToolCall(
            "return_delivered_order_items",
            {
                "order_id": order["order_id"],
                "item_ids": [i["item_id"] for i in items],
                "payment_method_id": method["id"],
            },
        )
    )
    refund = dollars(sum(cents(i["price"]) for i in items))
    return ServiceTask(kind, b.scenario(opening, instructions), tuple(b.calls), communicate_info=(f"{refund:.2f}",))


def _info(world: World, rng: random.Random, kind: str) -> ServiceTask | None:
    picked = _pick(world, rng, "pending", "processed", "delivered", "cancelled")
    if picked is None:  # pragma: no cover - every user has orders
        return None
    user, order = picked
    b = _Build(world, rng, user)
    b.order(order)
    opening = f"Hi, what is the status of my order{b.order_ref}, and what was its total?"
    total = f"{order_total(order):.2f}"
    instructions = f"Learn the status and the total of order {order['order_id']}."
    return ServiceTask(
        kind, b.scenario(opening, instructions), tuple(b.calls), communicate_info=(order["status"], total)
    )


#: Task kind -> builder (``None`` when the world has no order that fits) and its weight.
KINDS: dict[str, tuple[Callable[[World, random.Random, str], ServiceTask | None], float]] = {
    "cancel_pending_order": (_cancel, 1.0),
    "modify_order_address": (_order_address, 0.8),
    "modify_order_items": (_exchange, 1.0),
    "return_items": (_return, 1.2),
    "exchange_items": (_exchange, 1.0),
    "change_default_address": (_default_address, 0.6),
    "order_info": (_info, 0.6),
    "refuse_cancel": (_cancel, 0.7),
    "refuse_modify_address": (_order_address, 0.5),
    "refuse_return": (_return, 0.6),
    "refuse_exchange": (_exchange, 0.5),
    "refuse_refund_method": (_return, 0.6),
    "declined_cancel": (_cancel, 0.5),
}


def make_task(world: World, rng: random.Random) -> ServiceTask:
    """A task over ``world`` (unchanged): a kind drawn by weight, the next that fits if it does not."""
    names = sorted(KINDS)
    first = rng.choices(names, [KINDS[n][1] for n in names])[0]
    rest = [n for n in names if n != first]
    rng.shuffle(rest)
    for kind in (first, *rest):
        task = KINDS[kind][0](world, rng, kind)
        if task is not None:
            return task
    raise AssertionError("no task fits the world")  # pragma: no cover - change_default_address always fits


# --------------------------------------------------------------------------- the user
class RetailUser(ScriptedUser):
    """The scripted retail customer (see :class:`.retail.RetailDomain`'s card).

    Satisfied when the database is as the gold calls leave it and every ``communicate_info``
    string was in one of the agent's messages so far (so a refusal ends once the reason is told);
    in a declined task, as soon as it has said no to a confirmation question about cancelling
    the order (a message with a confirmation phrase, "cancel" and the order id).
    """

    def begin(self, start: World) -> None:
        # No copy of the start is kept (the base class keeps one for its own satisfied rule).
        self.given = set()
        self.turns = 0
        self.said: list[str] = []
        self._expected = self.domain.expected_world(start, self.task).state_hash()
        order_ids = [c.arguments["order_id"] for c in self.task.gold_actions if "order_id" in c.arguments]
        self._order_id = order_ids[-1] if order_ids else "\0"

    def respond(self, message: str, world: World) -> Any:
        self.said.append(message)
        return super().respond(message, world)

    def satisfied(self, message: str, world: World) -> bool:
        if not self.scenario.confirm:  # a confirmation question about cancelling this very order
            return bool(CONFIRM.search(message)) and "cancel" in message.lower() and self._order_id in message
        told = normalise("\n".join(self.said))
        return world.state_hash() == self._expected and all(normalise(i) in told for i in self.task.communicate_info)
