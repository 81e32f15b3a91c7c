"""Oracle for the retail domain of ``envgym/Service-Retail-v0``: a policy-following agent.

It reads only the conversation: the user's messages and the tools' results (never the task's
gold calls or its scenario; ``info`` is not needed at all). Each turn it parses everything the
user said so far (email, name and zip code, order id or a description of the order by its
products, the items and target options, the cancellation reason, the refund or payment method,
a new address), then does the first thing still missing, as the policy orders it:

1. authenticate (email, else name and zip code; ask when neither is known), read the profile;
2. find the order (by id, or by fetching the user's orders until one holds every product the
   user named) and read it; for an exchange, read the products' variants;
3. check the policy against the order's status (cancel and modify: pending; return and
   exchange: delivered; an exchange request on a pending order is an item modification) and the
   refund method (the original one or a gift card): refuse with the reason when it does not
   allow the request;
4. ask for what the change still needs; list the change and ask for a yes;
5. on yes, make the one write call, tell the result (the refund total after a return), and end.

Its questions avoid the words the scripted user reads as a confirmation question ("would you
like", "proceed", ...), except the one confirmation.
"""

from __future__ import annotations

import json
import re
from typing import Any

from envgym.rollout import Policy

__all__ = ["Solver"]

_EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
_NAME = re.compile(r"my full name is ([A-Za-z'-]+) ([A-Za-z'-]+)", re.IGNORECASE)
_ZIP = re.compile(r"my zip code is (\d{5})", re.IGNORECASE)
_ORDER_ID = re.compile(r"#W\d{7}")
_FACT = re.compile(r"My ({}) is (.+?)\.(?=\s|$)")
_ADDRESS = re.compile(r"\b(\d{1,5} [A-Z][A-Za-z ]*), ([^,.]*), ([^,.]+), ([A-Z]{2}) (\d{5}), ([^,.]+?)\.")
_CAPITALISED = re.compile(r"\bthe ([A-Z][\w-]*(?: [A-Z][\w-]*)*)")
_LAST_FOUR = re.compile(r"ending in (\d{4})")
_PENDING = ("pending", "pending (item modified)")


def _fact(texts: list[str], name: str) -> str | None:
    """The last value the user gave for ``My <name> is <value>.``"""
    found = None
    pattern = re.compile(_FACT.pattern.format(re.escape(name)))
    for text in texts:
        for m in pattern.finditer(text):
            found = m.group(2)
    return found


def _answer(text: str) -> str:
    """The user's answer to a confirmation question: ``yes``, ``no`` or ``asked`` (no answer yet)."""
    low = text.lower()
    if "please go ahead" in low:
        return "yes"
    if "please don't do that" in low:
        return "no"
    if re.search(r"\b(yes|yeah|sure|correct|confirmed?)\b", low):
        return "yes"
    return "no" if re.search(r"\b(no|nope|don't)\b", low) else "asked"


def _money(amount: float) -> str:
    return f"{amount:.2f}"


def _total(items: list[dict[str, Any]]) -> float:
    return round(sum(round(i["price"] * 100) for i in items) / 100, 2)


class Solver(Policy):
    """The retail oracle of one episode (see the module docstring)."""

    def __init__(self, env_id: str = "envgym/Service-Retail-v0", seed: int | None = None) -> None:
        self.env_id = env_id
        self.seed = seed
        self.texts: list[str] = []
        self.intent: str | None = None
        self.user_id: str | None = None
        self.user: dict[str, Any] | None = None
        self.orders: dict[str, dict[str, Any]] = {}
        self.products: dict[str, dict[str, Any]] = {}
        self.order_id: str | None = None
        self.tried: set[str] = set()
        self.asked: dict[str, int] = {}
        self.confirm: str | None = None  # None, "asked", "yes", "no"
        self.write: tuple[str, dict[str, Any]] | None = None
        self.result: Any = None
        self.finished = False
        self.pending_call: str | None = None

    # ------------------------------------------------------------------ observation
    def _read(self, observation: str) -> None:
        if observation.startswith("You are a customer service agent"):
            self.texts.append(observation.rsplit("\n\nUser: ", 1)[-1])
            return
        if observation.startswith("User: "):
            self.texts.append(observation[len("User: ") :])
            if self.confirm == "asked":
                self.confirm = _answer(observation)
            return
        m = re.match(r"Tool result \(([a-z_]+)\): (.*)", observation, re.DOTALL)
        if m is None:
            return
        name, text = m.group(1), m.group(2)
        if text.startswith("Tool error:"):
            self.result = None
            return
        result = json.loads(text)
        if name.startswith("find_user_id"):
            self.user_id = result
        elif name == "get_user_details":
            self.user = result
        elif name == "get_order_details":
            self.orders[result["order_id"]] = result
        elif name == "get_product_details":
            self.products[result["product_id"]] = result
        elif self.write is not None and name == self.write[0]:
            self.result = result

    # ------------------------------------------------------------------ facts
    def _intent(self) -> str:
        first = self.texts[0].lower()
        if "cancel" in first:
            return "cancel"
        if "address" in first:
            return "default_address" if any(w in first for w in ("default", "profile", "account")) else "order_address"
        if "return" in first:
            return "return"
        if "exchange" in first or "swap" in first:
            return "exchange"
        return "info"

    def _request_text(self) -> str:
        parts = [self.texts[0]]
        request = _fact(self.texts, "request")
        if request:
            parts.append(request)
        return "\n".join(parts)

    def _reason(self) -> str | None:
        text = " ".join(self.texts).lower()
        if "no longer need" in text:
            return "no longer needed"
        if "mistake" in text:
            return "ordered by mistake"
        return None

    def _new_address(self) -> dict[str, str] | None:
        for text in reversed(self.texts):
            m = _ADDRESS.search(text)
            if m:
                keys = ("address1", "address2", "city", "state", "zip", "country")
                return dict(zip(keys, (g.strip() for g in m.groups())))
        return None

    def _method(self, phrase: str | None) -> dict[str, Any] | None:
        if phrase is None or self.user is None:
            return None
        methods = list(self.user["payment_methods"].values())
        low = phrase.lower()
        four = _LAST_FOUR.search(low)
        if four:
            return next((m for m in methods if m.get("last_four") == four.group(1)), None)
        for source, word in (("paypal", "paypal"), ("gift_card", "gift card")):
            if word in low:
                return next((m for m in methods if m["source"] == source), None)
        return None

    # ------------------------------------------------------------------ actions
    def _call(self, name: str, **arguments: Any) -> str:
        self.tried.add(json.dumps([name, arguments], sort_keys=True))
        return json.dumps({"name": name, "arguments": arguments})

    def _tried(self, name: str, **arguments: Any) -> bool:
        return json.dumps([name, arguments], sort_keys=True) in self.tried

    def _ask(self, topic: str, text: str) -> str:
        self.asked[topic] = self.asked.get(topic, 0) + 1
        if self.asked[topic] > 3:  # the user cannot say it: give up politely
            return self._end("I'm sorry, I can't help further without that information.")
        return text

    def _end(self, text: str) -> str:
        self.finished = True
        return text

    def act(self, observation: str, info: dict[str, Any]) -> str:
        self._read(observation)
        if self.finished:
            return "done"
        return self._next()

    def _next(self) -> str:
        if self.intent is None:
            self.intent = self._intent()
        # 1. identity
        if self.user_id is None:
            text = " ".join(self.texts)
            email = _EMAIL.search(text)
            if email and not self._tried("find_user_id_by_email", email=email.group(0)):
                return self._call("find_user_id_by_email", email=email.group(0))
            name, zip_ = _NAME.search(text), _ZIP.search(text)
            if name and zip_:
                args = {"first_name": name.group(1), "last_name": name.group(2), "zip": zip_.group(1)}
                if not self._tried("find_user_id_by_name_zip", **args):
                    return self._call("find_user_id_by_name_zip", **args)
            return self._ask(
                "identity", "To verify your identity, please tell me your email, or your full name and zip code."
            )
        if self.user is None:
            return self._call("get_user_details", user_id=self.user_id)
        if self.intent == "default_address":
            return self._default_address()
        # 2. the order
        order = self._order()
        if isinstance(order, str):
            return order
        return self._handle(order)

    def _order(self) -> dict[str, Any] | str:
        assert self.user is not None
        mine = self.user["orders"]
        if self.order_id is None:
            ids = [i for t in self.texts for i in _ORDER_ID.findall(t) if i in mine]
            if ids:
                self.order_id = ids[-1]
            else:
                description = _fact(self.texts, "order")
                if description is None:
                    return self._ask("order", "Which order is it? Please give me the order id.")
                names = set(_CAPITALISED.findall(description))
                for oid in mine:
                    if oid not in self.orders:
                        return self._call("get_order_details", order_id=oid)
                    if names and names <= {i["name"] for i in self.orders[oid]["items"]}:
                        self.order_id = oid
                        break
                else:
                    return self._ask(
                        "order", "I could not find that order. Which order is it? Please give me the order id."
                    )
        if self.order_id not in self.orders:
            return self._call("get_order_details", order_id=self.order_id)
        return self.orders[self.order_id]

    def _refuse(self, order: dict[str, Any], rule: str) -> str:
        return self._end(f"I'm sorry, but I can't do that: order {order['order_id']} is {order['status']}, and {rule}.")

    def _handle(self, order: dict[str, Any]) -> str:
        status, oid = order["status"], order["order_id"]
        if self.intent == "info":
            return self._end(f"Order {oid} is {status}; its total is {_money(_total(order['items']))}.")
        if self.write is not None:
            return self._after_write(order)
        if self.intent == "cancel":
            if status != "pending":
                return self._refuse(order, "only pending orders can be cancelled")
            reason = self._reason()
            if reason is None:
                return self._ask(
                    "reason", "What is the reason for the cancellation: no longer needed, or ordered by mistake?"
                )
            summary = f"cancel order {oid} ({reason}); {_money(_total(order['items']))} goes back to the payment method"
            return self._confirm_then(summary, "cancel_pending_order", {"order_id": oid, "reason": reason})
        if self.intent == "order_address":
            if status not in _PENDING:
                return self._refuse(order, "only the address of a pending order can change")
            address = self._new_address()
            if address is None:
                return self._ask("address", "What is the full new shipping address?")
            summary = f"ship order {oid} to {address['address1']}, {address['address2']}, {address['city']}, {address['state']} {address['zip']}, {address['country']}"
            return self._confirm_then(summary, "modify_pending_order_address", {"order_id": oid, **address})
        if self.intent == "return":
            return self._return(order)
        return self._exchange(order)

    def _return(self, order: dict[str, Any]) -> str:
        if order["status"] != "delivered":
            return self._refuse(order, "only delivered orders can be returned")
        request = self._request_text()
        items = [i for i in order["items"] if i["name"] in request]
        refund = _fact(self.texts, "refund preference")
        missing = []
        if not items:
            missing.append("Which items from this order are you returning?")
        if refund is None:
            missing.append("Where should the refund go?")
        if missing:
            return self._ask("return", " ".join(missing))
        assert self.user is not None
        original = order["payment_history"][0]["payment_method_id"]
        if "original" in refund.lower():
            method = self.user["payment_methods"].get(original)
        else:
            method = self._method(refund)
        if method is None or (method["id"] != original and method["source"] != "gift_card"):
            return self._end(
                "I'm sorry, but I can't refund to that: refunds can only go to the original payment method of the order "
                "or to a gift card you already have."
            )
        amount = _money(_total(items))
        names = ", ".join(f"{i['name']} ({i['item_id']})" for i in items)
        summary = f"return {names} from order {order['order_id']}, with a refund of {amount} to {method['id']}"
        args = {
            "order_id": order["order_id"],
            "item_ids": [i["item_id"] for i in items],
            "payment_method_id": method["id"],
        }
        return self._confirm_then(summary, "return_delivered_order_items", args)

    def _exchange(self, order: dict[str, Any]) -> str:
        status = order["status"]
        if status == "pending":
            tool = "modify_pending_order_items"
        elif status == "delivered":
            tool = "exchange_delivered_order_items"
        elif status == "pending (item modified)":
            return self._refuse(order, "its items were already modified once")
        else:
            return self._refuse(order, "only pending orders can be modified and only delivered orders can be exchanged")
        request = self._request_text()
        wanted: list[tuple[dict[str, Any], dict[str, str]]] = []
        for item in order["items"]:
            m = re.search(re.escape(item["name"]) + r" \(to ([^)]*)\)", request)
            if m:
                options = dict(pair.split(": ", 1) for pair in m.group(1).split(", ") if ": " in pair)
                wanted.append((item, options))
        payment = _fact(self.texts, "payment method")
        missing = []
        if not wanted:
            missing.append("Which items are you exchanging, and for which options?")
        if payment is None:
            missing.append("Which payment method should cover any price difference?")
        if missing:
            return self._ask("exchange", " ".join(missing))
        for item, _ in wanted:
            if item["product_id"] not in self.products:
                return self._call("get_product_details", product_id=item["product_id"])
        swaps = []
        for item, options in wanted:
            variants = self.products[item["product_id"]]["variants"].values()
            new = next((v for v in variants if v["options"] == options), None)
            if new is None or not new["available"] or new["item_id"] == item["item_id"]:
                return self._end(
                    f"I'm sorry, that variant of the {item['name']} is not available, so I can't exchange it."
                )
            swaps.append((item, new))
        method = self._method(payment)
        if method is None:
            return self._ask(
                "payment",
                "I could not find that payment method in your profile. Which payment method should cover any price difference?",
            )
        diff = round(sum(round(v["price"] * 100) - round(i["price"] * 100) for i, v in swaps) / 100, 2)
        if method["source"] == "gift_card" and diff > 0 and method["balance"] < diff:
            return self._end(
                f"I'm sorry, your gift card holds {_money(method['balance'])}, less than the {_money(diff)} difference."
            )
        names = ", ".join(
            f"{i['name']} ({i['item_id']} to {v['item_id']}, {', '.join(v['options'].values())})" for i, v in swaps
        )
        settle = (
            f"{'charge' if diff > 0 else 'refund'} {_money(abs(diff))} with {method['id']}"
            if diff
            else "no price difference"
        )
        summary = f"exchange {names} in order {order['order_id']}; {settle}"
        args = {
            "order_id": order["order_id"],
            "item_ids": [i["item_id"] for i, _ in swaps],
            "new_item_ids": [v["item_id"] for _, v in swaps],
            "payment_method_id": method["id"],
        }
        return self._confirm_then(summary, tool, args)

    def _default_address(self) -> str:
        assert self.user is not None
        if self.write is not None:
            return self._after_write(None)
        address = self._new_address()
        if address is None:
            return self._ask("address", "What is your full new address?")
        summary = f"change the default address of your profile to {address['address1']}, {address['address2']}, {address['city']}, {address['state']} {address['zip']}, {address['country']}"
        return self._confirm_then(summary, "modify_user_address", {"user_id": self.user["user_id"], **address})

    def _confirm_then(self, summary: str, tool: str, arguments: dict[str, Any]) -> str:
        if self.confirm is None:
            self.confirm = "asked"
            return f"Here is what I will do: {summary}. Please confirm (yes/no)."
        if self.confirm == "asked":
            return self._ask("confirm", f"I need a clear yes or no: {summary}. Please confirm.")
        if self.confirm == "no":
            return self._end("Understood, I have not changed anything.")
        self.write = (tool, arguments)
        return self._call(tool, **arguments)

    def _after_write(self, order: dict[str, Any] | None) -> str:
        assert self.write is not None
        tool, args = self.write
        if self.result is None:
            return self._end("I'm sorry, the change could not be made.")
        if tool == "cancel_pending_order":
            return self._end(
                f"Order {args['order_id']} is cancelled; {_money(_total(self.result['items']))} will be refunded."
            )
        if tool == "return_delivered_order_items":
            items = [i for i in self.result["items"] if i["item_id"] in args["item_ids"]]
            return self._end(
                f"The return is requested. The total refund is {_money(_total(items))}, to {args['payment_method_id']}."
            )
        return self._end("Done: the change is made.")
