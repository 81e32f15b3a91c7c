"""The retail domain's tools: an online store's users, products and orders, and its policy.

The domain card is :class:`.domain.RetailDomain`'s docstring. Worlds, tasks and the scripted user are
in :mod:`.tasks`; this module holds what an agent works with: the tools (typed functions with
JSON schemas over the database), the written policy, and the policy checks on write calls.

The tools refuse what the database cannot do (an unknown id, an item that is not in the order, a
variant of another product or out of stock, a gift card without enough balance, a payment method
of somebody else, an order that is already cancelled). They do **not** refuse what only the policy
forbids (cancelling a delivered order, returning items of a pending one, refunding to a card that
did not pay): the agent must follow the policy, and :meth:`.domain.RetailDomain.violations` records the
rule a write broke.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable
from typing import Any

from envgym.environments.service.core import Tool, ToolError, World

__all__ = ["CANCEL_REASONS", "POLICY", "cents", "dollars", "order_total"]

#: The reasons a pending order may be cancelled for (the tool's enum).
CANCEL_REASONS: tuple[str, ...] = ("no longer needed", "ordered by mistake")
#: Statuses in which an order counts as pending (its address may change; cancelling needs plain ``pending``).
PENDING = ("pending", "pending (item modified)")

POLICY = """\
# Online store customer service policy

You help customers of an online store with their orders, returns, exchanges and profile. You
talk to one customer per conversation and act only through your tools.

## Identity
- Before you look up or change anything of a customer's orders or profile, authenticate them:
  find their user id from their email (`find_user_id_by_email`), or, when they do not know it,
  from their full name and zip code (`find_user_id_by_name_zip`). Never act on a user id, order
  id or payment method the customer has not shown to be theirs (an order is theirs when it is in
  their profile's order list).
- Help only the authenticated customer, with their own orders.

## Before any change
- Every write (cancel, modify, return, exchange, address change) needs the customer's explicit
  yes: first list what you will do (the order, the items, the new variants or address, the
  payment method, the amounts), ask them to confirm, and act only after they say yes. If they say
  no, change nothing.
- Make at most one tool call at a time, and do not invent facts: ask the customer.

## Order statuses and what they allow
- **pending**: not yet shipped. A pending order can be cancelled, its shipping address can be
  changed, and its items can be exchanged for other variants of the same product (modify items).
- **pending (item modified)**: its items were modified once already; only the shipping address
  can still change. Items of an order can be modified only once, so gather every item to change
  before calling `modify_pending_order_items`.
- **processed**: packed and about to ship. It can no longer be cancelled or modified, and it
  cannot be returned or exchanged until it is delivered.
- **delivered**: items can be returned (`return_delivered_order_items`) or exchanged for
  another variant of the same product (`exchange_delivered_order_items`); it cannot be cancelled
  and its address cannot change.
- **cancelled**, **return requested**, **exchange requested**: nothing more can be done.

## Cancelling a pending order
- Only orders whose status is exactly `pending` can be cancelled. The reason must be the
  customer's own: `no longer needed` or `ordered by mistake`.
- The whole amount goes back to the payment methods that paid (gift cards at once, other methods
  in 5 to 7 business days).

## Modifying a pending order
- Shipping address: any pending order; ask for the full new address.
- Items: each item may only become another available variant (another item id) of the same
  product. The customer gives a payment method for the price difference (charged, or refunded
  when the new variant is cheaper); a gift card must hold enough balance to pay it.

## Returns and exchanges of a delivered order
- Only orders whose status is `delivered`. Ask which items, and check each is in the order.
- A refund goes to the order's original payment method or to a gift card the customer already
  has: never to any other card or account, whatever the customer asks.
- After a return request, tell the customer the total refund (the sum of the returned items'
  prices, written like 54.10).
- An exchange is for another available variant of the same product; the price difference is
  settled with the payment method the customer chooses (a gift card must cover it). Collect every
  item to exchange first: an order is exchanged once.

## Profile
- The default address in the profile can change at the customer's request, after
  authentication and confirmation. It does not change the address of existing orders.

## Questions and refusals
- When asked about an order, tell its status and its total (the sum of its items' prices).
- When the policy does not allow what the customer asks, do not call the tool: say that you
  cannot do it and why, naming the order's current status (for example "the order is
  delivered") or the rule (refunds go only to the original payment method or a gift card).
"""


# --------------------------------------------------------------------------- money
def cents(amount: float) -> int:
    """An amount in dollars as whole cents (prices are kept with 2 decimals)."""
    return round(float(amount) * 100)


def dollars(amount_cents: int) -> float:
    """Whole cents as dollars (a float with at most 2 decimals)."""
    return round(amount_cents / 100, 2)


def order_total(order: dict[str, Any]) -> float:
    """The sum of an order's item prices."""
    return dollars(sum(cents(i["price"]) for i in order["items"]))


# --------------------------------------------------------------------------- lookups
def _user(world: World, user_id: str) -> dict[str, Any]:
    user = world.db["users"].get(user_id)
    if user is None:
        raise ToolError(f"no user with id {user_id!r}; find it with find_user_id_by_email or find_user_id_by_name_zip.")
    return user


def _order(world: World, order_id: str) -> dict[str, Any]:
    order = world.db["orders"].get(order_id)
    if order is None:
        hint = " (order ids start with '#W', like '#W1234567')" if not order_id.startswith("#W") else ""
        raise ToolError(f"no order with id {order_id!r}{hint}.")
    return order


def _product(world: World, product_id: str) -> dict[str, Any]:
    product = world.db["products"].get(product_id)
    if product is None:
        raise ToolError(f"no product with id {product_id!r}; list_all_product_types gives the ids.")
    return product


def _variant(world: World, item_id: str) -> tuple[dict[str, Any], dict[str, Any]]:
    for product in world.db["products"].values():
        variant = product["variants"].get(item_id)
        if variant is not None:
            return product, variant
    raise ToolError(f"no item with id {item_id!r} in the catalogue; get_product_details lists a product's item ids.")


def _payment_method(world: World, user: dict[str, Any], payment_method_id: str) -> dict[str, Any]:
    method = user["payment_methods"].get(payment_method_id)
    if method is None:
        owned = ", ".join(sorted(user["payment_methods"]))
        raise ToolError(f"user {user['user_id']!r} has no payment method {payment_method_id!r}; theirs: {owned}.")
    return method


def _open_order(world: World, order_id: str) -> dict[str, Any]:
    order = _order(world, order_id)
    if order["status"] == "cancelled":
        raise ToolError(f"order {order_id} is cancelled: nothing can change on it.")
    return order


def _order_items(order: dict[str, Any], item_ids: list[str]) -> list[int]:
    """Positions in the order of ``item_ids`` (each must be there, as often as it is listed)."""
    if not item_ids:
        raise ToolError("item_ids is empty: name at least one item id of the order.")
    free = list(range(len(order["items"])))
    positions = []
    for item_id in item_ids:
        pos = next((p for p in free if order["items"][p]["item_id"] == item_id), None)
        if pos is None:
            have = ", ".join(i["item_id"] for i in order["items"])
            raise ToolError(
                f"item {item_id!r} is not in order {order['order_id']} (or listed twice); its items: {have}."
            )
        free.remove(pos)
        positions.append(pos)
    return positions


def _swaps(world: World, order: dict[str, Any], item_ids: list[str], new_item_ids: list[str]) -> list[tuple[int, dict]]:
    """(position, new variant) for each exchanged item, checked: same product, another variant, in stock."""
    if len(item_ids) != len(new_item_ids):
        raise ToolError(
            f"item_ids has {len(item_ids)} ids but new_item_ids has {len(new_item_ids)}: give one new id per item."
        )
    swaps = []
    for pos, new_id in zip(_order_items(order, item_ids), new_item_ids):
        old = order["items"][pos]
        product, variant = _variant(world, new_id)
        if product["product_id"] != old["product_id"]:
            raise ToolError(
                f"item {new_id!r} is a {product['name']}, not a {old['name']}: an item can only become another variant of the same product."
            )
        if new_id == old["item_id"]:
            raise ToolError(f"item {new_id!r} is the variant already in the order; choose another one.")
        if not variant["available"]:
            raise ToolError(f"item {new_id!r} ({product['name']}) is out of stock.")
        swaps.append((pos, variant))
    return swaps


def _check_balance(method: dict[str, Any], charge_cents: int) -> None:
    if method["source"] == "gift_card" and charge_cents > 0 and cents(method["balance"]) < charge_cents:
        raise ToolError(
            f"gift card {method['id']} holds {method['balance']:.2f}, less than the {dollars(charge_cents):.2f} to pay; "
            "choose another payment method."
        )


# --------------------------------------------------------------------------- read tools
def find_user_id_by_email(world: World, email: str) -> str:
    for user in world.db["users"].values():
        if user["email"].lower() == email.strip().lower():
            return user["user_id"]
    raise ToolError(f"no user with email {email!r}.")


def find_user_id_by_name_zip(world: World, first_name: str, last_name: str, zip: str) -> str:
    for user in world.db["users"].values():
        name = user["name"]
        if (
            name["first_name"].lower() == first_name.strip().lower()
            and name["last_name"].lower() == last_name.strip().lower()
            and user["address"]["zip"] == zip.strip()
        ):
            return user["user_id"]
    raise ToolError(f"no user named {first_name} {last_name} with zip code {zip!r}.")


def get_user_details(world: World, user_id: str) -> dict[str, Any]:
    return _user(world, user_id)


def get_order_details(world: World, order_id: str) -> dict[str, Any]:
    return _order(world, order_id)


def get_product_details(world: World, product_id: str) -> dict[str, Any]:
    return _product(world, product_id)


def list_all_product_types(world: World) -> dict[str, str]:
    return {p["name"]: pid for pid, p in sorted(world.db["products"].items(), key=lambda kv: kv[1]["name"])}


_OPS: dict[type, Callable[..., float]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.USub: operator.neg,
    ast.UAdd: operator.pos,
}


def _evaluate(node: ast.AST) -> float:
    if isinstance(node, ast.Expression):
        return _evaluate(node.body)
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        return float(node.value)
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        return _OPS[type(node.op)](_evaluate(node.left), _evaluate(node.right))
    if isinstance(node, ast.UnaryOp) and type(node.op) in _OPS:
        return _OPS[type(node.op)](_evaluate(node.operand))
    raise ToolError("only numbers, + - * / and parentheses are allowed.")


def calculate(world: World, expression: str) -> float:
    if len(expression) > 200:
        raise ToolError(f"expression too long ({len(expression)} characters, at most 200).")
    try:
        tree = ast.parse(expression.strip(), mode="eval")
        value = _evaluate(tree)
    except (SyntaxError, ValueError) as err:
        raise ToolError(f"cannot read {expression!r} as arithmetic: use numbers, + - * / and parentheses.") from err
    except ZeroDivisionError as err:
        raise ToolError(f"division by zero in {expression!r}.") from err
    except OverflowError as err:
        raise ToolError(f"{expression!r} overflows.") from err
    return round(value, 2)


# --------------------------------------------------------------------------- write tools
def cancel_pending_order(world: World, order_id: str, reason: str) -> dict[str, Any]:
    order = _open_order(world, order_id)
    user = _user(world, order["user_id"])
    refunds = []
    for entry in order["payment_history"]:
        if entry["transaction_type"] != "payment":
            continue
        refunds.append(
            {"transaction_type": "refund", "amount": entry["amount"], "payment_method_id": entry["payment_method_id"]}
        )
        method = user["payment_methods"].get(entry["payment_method_id"])
        if method is not None and method["source"] == "gift_card":
            method["balance"] = dollars(cents(method["balance"]) + cents(entry["amount"]))
    order["payment_history"].extend(refunds)
    order["status"] = "cancelled"
    order["cancel_reason"] = reason
    return order


def modify_pending_order_address(
    world: World,
    order_id: str,
    address1: str,
    address2: str,
    city: str,
    state: str,
    country: str,
    zip: str,
) -> dict[str, Any]:
    order = _open_order(world, order_id)
    order["address"] = _address(address1, address2, city, state, country, zip)
    return order


def modify_pending_order_items(
    world: World, order_id: str, item_ids: list[str], new_item_ids: list[str], payment_method_id: str
) -> dict[str, Any]:
    order = _open_order(world, order_id)
    user = _user(world, order["user_id"])
    swaps = _swaps(world, order, item_ids, new_item_ids)
    method = _payment_method(world, user, payment_method_id)
    diff = sum(cents(v["price"]) - cents(order["items"][pos]["price"]) for pos, v in swaps)
    _check_balance(method, diff)
    for pos, variant in swaps:
        order["items"][pos].update(item_id=variant["item_id"], price=variant["price"], options=dict(variant["options"]))
    if diff:
        kind = "payment" if diff > 0 else "refund"
        order["payment_history"].append(
            {"transaction_type": kind, "amount": dollars(abs(diff)), "payment_method_id": payment_method_id}
        )
        if method["source"] == "gift_card":
            method["balance"] = dollars(cents(method["balance"]) - diff)
    order["status"] = "pending (item modified)"
    return order


def return_delivered_order_items(
    world: World, order_id: str, item_ids: list[str], payment_method_id: str
) -> dict[str, Any]:
    order = _open_order(world, order_id)
    user = _user(world, order["user_id"])
    _order_items(order, item_ids)
    _payment_method(world, user, payment_method_id)
    order["status"] = "return requested"
    order["return_items"] = sorted(item_ids)
    order["return_payment_method_id"] = payment_method_id
    return order


def exchange_delivered_order_items(
    world: World, order_id: str, item_ids: list[str], new_item_ids: list[str], payment_method_id: str
) -> dict[str, Any]:
    order = _open_order(world, order_id)
    user = _user(world, order["user_id"])
    swaps = _swaps(world, order, item_ids, new_item_ids)
    method = _payment_method(world, user, payment_method_id)
    diff = sum(cents(v["price"]) - cents(order["items"][pos]["price"]) for pos, v in swaps)
    _check_balance(method, diff)
    pairs = sorted(zip(item_ids, new_item_ids))
    order["status"] = "exchange requested"
    order["exchange_items"] = [old for old, _ in pairs]
    order["exchange_new_items"] = [new for _, new in pairs]
    order["exchange_payment_method_id"] = payment_method_id
    order["exchange_price_difference"] = dollars(diff)
    return order


def modify_user_address(
    world: World,
    user_id: str,
    address1: str,
    address2: str,
    city: str,
    state: str,
    country: str,
    zip: str,
) -> dict[str, Any]:
    user = _user(world, user_id)
    user["address"] = _address(address1, address2, city, state, country, zip)
    return user


def _address(address1: str, address2: str, city: str, state: str, country: str, zip: str) -> dict[str, str]:
    fields = {"address1": address1, "address2": address2, "city": city, "state": state, "country": country, "zip": zip}
    empty = [k for k in ("address1", "city", "state", "country", "zip") if not fields[k].strip()]
    if empty:
        raise ToolError(f"the address needs {', '.join(empty)} (address2 may be empty).")
    return {k: v.strip() for k, v in fields.items()}


# --------------------------------------------------------------------------- schemas
def _obj(props: dict[str, dict[str, Any]], required: tuple[str, ...] | None = None) -> dict[str, Any]:
    return {"type": "object", "properties": props, "required": list(props if required is None else required)}


_S = {"type": "string"}
_IDS = {"type": "array", "items": {"type": "string"}}
_ORDER_ID = {"type": "string", "description": "the order id, with its '#', like '#W1234567'"}
_ADDRESS = {
    "address1": {"type": "string", "description": "street and number"},
    "address2": {"type": "string", "description": "apartment, suite (may be empty)"},
    "city": _S,
    "state": {"type": "string", "description": "state code, like 'TX'"},
    "country": _S,
    "zip": {"type": "string", "description": "5-digit zip code"},
}


def _tools() -> list[Tool]:
    return [
        Tool("find_user_id_by_email", "Find a user's id from their email.", _obj({"email": _S}), find_user_id_by_email),
        Tool(
            "find_user_id_by_name_zip",
            "Find a user's id from their first name, last name and zip code (when they do not know their email).",
            _obj({"first_name": _S, "last_name": _S, "zip": _S}),
            find_user_id_by_name_zip,
        ),
        Tool(
            "get_user_details",
            "A user's profile: name, email, default address, payment methods (with gift card balances) and order ids.",
            _obj({"user_id": _S}),
            get_user_details,
        ),
        Tool(
            "get_order_details",
            "An order: status, items (name, product id, item id, options, price), address, payment history.",
            _obj({"order_id": _ORDER_ID}),
            get_order_details,
        ),
        Tool(
            "get_product_details",
            "A product and its variants: item id, options, price and availability of each.",
            _obj({"product_id": _S}),
            get_product_details,
        ),
        Tool("list_all_product_types", "Every product's name and product id.", _obj({}), list_all_product_types),
        Tool(
            "calculate",
            "Evaluate arithmetic (numbers, + - * / and parentheses); the result is rounded to 2 decimals.",
            _obj({"expression": _S}),
            calculate,
        ),
        Tool(
            "cancel_pending_order",
            "Cancel an order and refund what was paid to the methods that paid it.",
            _obj({"order_id": _ORDER_ID, "reason": {"type": "string", "enum": list(CANCEL_REASONS)}}),
            cancel_pending_order,
            writes=True,
        ),
        Tool(
            "modify_pending_order_address",
            "Change the shipping address of an order.",
            _obj({"order_id": _ORDER_ID, **_ADDRESS}),
            modify_pending_order_address,
            writes=True,
        ),
        Tool(
            "modify_pending_order_items",
            "Replace items of an order by other variants of the same products (one new item id per item id); "
            "the price difference is charged to, or refunded to, the payment method.",
            _obj({"order_id": _ORDER_ID, "item_ids": _IDS, "new_item_ids": _IDS, "payment_method_id": _S}),
            modify_pending_order_items,
            writes=True,
        ),
        Tool(
            "return_delivered_order_items",
            "Request the return of items of an order; the refund goes to the payment method given.",
            _obj({"order_id": _ORDER_ID, "item_ids": _IDS, "payment_method_id": _S}),
            return_delivered_order_items,
            writes=True,
        ),
        Tool(
            "exchange_delivered_order_items",
            "Request the exchange of items of an order for other variants of the same products (one new item id "
            "per item id); the price difference is settled with the payment method given.",
            _obj({"order_id": _ORDER_ID, "item_ids": _IDS, "new_item_ids": _IDS, "payment_method_id": _S}),
            exchange_delivered_order_items,
            writes=True,
        ),
        Tool(
            "modify_user_address",
            "Change the default address in a user's profile.",
            _obj({"user_id": _S, **_ADDRESS}),
            modify_user_address,
            writes=True,
        ),
    ]
