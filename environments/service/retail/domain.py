"""The retail domain (its card is :class:`RetailDomain`'s docstring)."""

from __future__ import annotations

import random
from typing import Any, ClassVar

from envgym.environments.service.core import Domain, ServiceTask, Tool, ToolCall, World
from envgym.environments.service.retail import tasks
from envgym.environments.service.retail.tools import PENDING, POLICY, _tools

__all__ = ["RetailDomain"]


class RetailDomain(Domain):
    """Retail: customer service of an online store (tau2-bench's retail domain, rebuilt).

    **World.** A few users, each with a profile (name, email, default address with zip code,
    payment methods: credit cards, PayPal, at most one gift card with a balance) and 2 to 4
    orders; a catalogue of 8 products from 14 types (T-shirt, running shoes, desk lamp, ...), each
    with 4 to 8 variants (an item id per option combination such as colour and size, a price, in
    stock or not). Orders hold 1 to 3 items of distinct products, a status (``pending``,
    ``processed``, ``delivered``, ``cancelled``), a shipping address and a payment history. Ids
    look like tau2-bench's (``#W1234567``, ``anna_lopez_1234``, ``credit_card_1234567``).

    **Tools** (JSON schemas in the observation). Read: ``find_user_id_by_email``,
    ``find_user_id_by_name_zip``, ``get_user_details``, ``get_order_details``,
    ``get_product_details``, ``list_all_product_types``, ``calculate``. Write:
    ``cancel_pending_order`` (reason ``no longer needed`` / ``ordered by mistake``),
    ``modify_pending_order_address``, ``modify_pending_order_items``,
    ``return_delivered_order_items``, ``exchange_delivered_order_items``, ``modify_user_address``.
    The tools refuse only what the database cannot do (unknown ids, items not in the order, a
    variant of another product or out of stock, a short gift card, a cancelled order).

    **Policy** (:data:`POLICY`, shown to the agent; what the tools do not enforce):
    authenticate the user by email or by name and zip code before anything else; list the
    change and get an explicit yes before every write; only ``pending`` orders can be cancelled
    or have their items modified (once); the address of a pending order can change; only
    ``delivered`` orders can be returned or exchanged; refunds go only to the original payment
    method or an existing gift card; tell the refund total after a return; when refusing, say
    why (the order's status, or the refund rule). :meth:`violations` flags writes that break the
    status and refund rules (the ``POLICY`` check). Not graded: authentication and the
    confirmation themselves (``violations`` sees one call, not the conversation), though a
    confirmation refused by the user is graded by the unchanged database.

    **Task kinds** (:mod:`.tasks`). Changes: ``cancel_pending_order``,
    ``modify_order_address``, ``modify_order_items``, ``return_items`` (told: the refund total),
    ``exchange_items``, ``change_default_address``. Questions: ``order_info`` (told: status and
    total). Refusals (database unchanged, told the reason): ``refuse_cancel`` (processed or
    delivered order), ``refuse_modify_address`` (processed or delivered), ``refuse_return``
    (pending or processed), ``refuse_exchange`` (processed), ``refuse_refund_method`` (refund asked
    to a card that did not pay). ``declined_cancel``: the user says no at the confirmation (the
    database must stay unchanged; the agent must have looked the order up: ``ACTION``). An
    exchange request on a pending order is a ``modify_order_items`` task: the agent picks the tool
    from the order's status.

    **User** (:class:`.tasks.RetailUser`, scripted). Opens with the request, sometimes
    with the order id or the items; gives, when the agent's message names them: email (``email``;
    some users do not know it and say so), full name (``name``), zip code (``zip``), order id
    (``order id``, ``order number``, ``which order``; when they do not know it: ``My order is the
    one with the Desk Lamp and the Yoga Mat.``), the request with items and target options
    (``which item``, ``items``, ``option``: ``My request is to exchange the Desk Lamp (to
    colour: black, power source: USB).``), the cancellation reason (``reason``, ``why``), the
    refund or payment method (``refund``, ``payment method``, ``pay``) and the new address
    (``address``: ``12 Oak Street, Apt 4, Austin, TX 78701, USA``). Says yes to a confirmation
    question (no, in ``declined_cancel``), and ends the call (``###STOP###``) once the database is
    as the request wants and the required information was told (refusals: once told), or when
    it declined.
    """

    name: ClassVar[str] = "retail"
    title: ClassVar[str] = "an online retail store"
    policy: ClassVar[str] = POLICY

    def __init__(self) -> None:
        self._tool_list = _tools()

    def tools(self) -> list[Tool]:
        return list(self._tool_list)

    def make_world(self, rng: random.Random) -> World:
        return tasks.make_world(rng)

    def make_task(self, world: World, rng: random.Random) -> ServiceTask:
        return tasks.make_task(world, rng)

    def make_user(self, task: ServiceTask) -> Any:
        return tasks.RetailUser(task, self)

    def violations(self, before: World, call: ToolCall, result: Any) -> list[str]:
        """The status and refund rules a successful write broke (see :data:`POLICY`)."""
        args = call.arguments
        if call.name == "modify_user_address":
            return []
        order = before.db["orders"].get(args.get("order_id"))
        if order is None:  # pragma: no cover - the write succeeded, so the order exists
            return []
        status, oid = order["status"], order["order_id"]
        out = []
        if call.name == "cancel_pending_order" and status != "pending":
            out.append(f"cancelled order {oid} whose status is {status!r}: only pending orders can be cancelled.")
        elif call.name == "modify_pending_order_address" and status not in PENDING:
            out.append(
                f"changed the address of order {oid} whose status is {status!r}: only pending orders can change."
            )
        elif call.name == "modify_pending_order_items" and status != "pending":
            why = "items can be modified only once" if status in PENDING else "only pending orders can be modified"
            out.append(f"modified the items of order {oid} whose status is {status!r}: {why}.")
        elif call.name in ("return_delivered_order_items", "exchange_delivered_order_items") and status != "delivered":
            verb = "returned" if call.name.startswith("return") else "exchanged"
            out.append(f"{verb} items of order {oid} whose status is {status!r}: only delivered orders can be.")
        if call.name == "return_delivered_order_items":
            paid = {e["payment_method_id"] for e in order["payment_history"] if e["transaction_type"] == "payment"}
            method_id = args["payment_method_id"]
            method = before.db["users"][order["user_id"]]["payment_methods"].get(method_id, {})
            if method_id not in paid and method.get("source") != "gift_card":
                out.append(
                    f"refunded order {oid} to {method_id}, which did not pay for it and is not a gift card: refunds go "
                    "only to the original payment method or a gift card."
                )
        return out
