"""Load WebShop's own product and goal files, for users who have them.

``load_webshop(items, attributes=None, human=None)`` reads ``items_shuffle.json`` (or
``items_shuffle_1000.json``), optionally ``items_ins_v2.json`` (product attributes) and
``items_human_ins.json`` (crowd-sourced instructions), and returns a
:class:`~envgym.environments.webshop.catalogue.ListCatalogue` for ``WebShopEnv(catalogue=...)``.

Faithful to WebShop's loader: products whose ASIN is ``nan`` or longer than 10 characters are
skipped and duplicates dropped; bullet points come from ``small_description`` (a list or a
string); the price is parsed from ``pricing`` (``"$12.99"`` or ``"$10.99 - $15.99"``; missing:
$100); option values are normalised (``strip().replace('/', ' | ').lower()``); products without
annotated attributes get ``["DUMMY_ATTR"]``. Human goals get WebShop's price limit and text
(``instruction.strip('.') + ", and price lower than X dollars"``), then are shuffled with seed 233
and split as WebShop's maintainers describe: the first 500 test, the next 1,000 dev, the rest
train (under 1,500 goals, a third each for test and dev). **Differences:** the price of a product with a price range and the price limits are drawn
from generators seeded by the ASIN, so they are the same in every process (WebShop draws them
before seeding, so its prices vary between runs); reviews are not loaded (WebShop does not
either).
"""

from __future__ import annotations

import json
import os
import random
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from envgym.environments.webshop.catalogue import NO_PRICE_LIMIT, Goal, ListCatalogue, Product, price_upper_for

from envgym.errors import ConfigError

__all__ = ["load_webshop", "parse_pricing"]


def parse_pricing(text: Any) -> tuple[float, ...]:
    """WebShop's price parsing: ``"$12.99"`` -> (12.99,), ``"$10.99 - $15.99"`` -> (10.99, 15.99)."""
    if not text or not isinstance(text, str):
        return (100.0,)
    values = []
    for part in text.split("$")[1:]:
        digits = part.strip().split(" ")[0].replace(",", "")
        try:
            values.append(float(digits))
        except ValueError:
            continue
    if not values:
        return (100.0,)
    return (values[0],) if len(values) == 1 else (values[0], values[1])


def _read(path: str | os.PathLike[str]) -> Any:
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    except (OSError, ValueError) as err:
        raise ConfigError(f"could not read the WebShop file {str(path)!r}: {err}") from err


def load_webshop(
    items: str | os.PathLike[str],
    attributes: str | os.PathLike[str] | None = None,
    human: str | os.PathLike[str] | None = None,
) -> ListCatalogue:
    """A catalogue of WebShop's products and human goals (see the module docstring)."""
    raw = _read(items)
    if not isinstance(raw, list):
        raise ConfigError(f"{str(items)!r} must hold a JSON list of products, got {type(raw).__name__}.")
    attrs: Mapping[str, Any] = _read(attributes) if attributes is not None else {}
    products: list[Product] = []
    seen: set[str] = set()
    for item in raw:
        asin = str(item.get("asin", "nan"))
        if asin == "nan" or len(asin) > 10 or asin in seen:
            continue
        seen.add(asin)
        bullets = item.get("small_description") or []
        if isinstance(bullets, str):
            bullets = [bullets]
        options: dict[str, tuple[str, ...]] = {}
        for name, values in (item.get("customization_options") or {}).items():
            if values:
                options[name.lower()] = tuple(
                    str(v.get("value", "")).strip().replace("/", " | ").lower() for v in values if v.get("value")
                )
        pricing = parse_pricing(item.get("pricing"))
        rng = random.Random(f"webshop-price:{asin}")
        price = round(rng.uniform(pricing[0], pricing[1]), 2) if len(pricing) == 2 else pricing[0]
        annotated = attrs.get(asin, {}).get("attributes") if isinstance(attrs.get(asin), dict) else None
        products.append(
            Product(
                asin=asin,
                title=str(item.get("name", "")),
                category=str(item.get("category", "")),
                query=str(item.get("query", "")).lower().strip(),
                product_category=tuple(p.strip() for p in str(item.get("product_category", "")).split("›")),
                description=str(item.get("full_description", "") or ""),
                bullet_points=tuple(str(b) for b in bullets),
                attributes=tuple(annotated) if annotated else ("DUMMY_ATTR",),
                options=options,
                pricing=pricing,
                price=price,
            )
        )
    if not products:
        raise ConfigError(f"{str(items)!r} holds no usable product (every ASIN was 'nan', too long or repeated).")
    by_asin = {p.asin: p for p in products}
    goals: list[Goal] = []
    if human is not None:
        records = _read(human)
        for asin, instructions in records.items():
            product = by_asin.get(asin)
            if product is None:
                continue
            for k, ins in enumerate(instructions):
                text = str(ins.get("instruction") or "").strip()
                if not text:
                    continue
                rng = random.Random(f"webshop-goal:{asin}:{k}")
                upper = price_upper_for(product.price, rng) if product.price > 0 else NO_PRICE_LIMIT
                goals.append(
                    Goal(
                        index=0,
                        asin=asin,
                        name=product.title,
                        query=product.query,
                        product_category=product.product_category,
                        instruction=text.strip(".") + f", and price lower than {upper:.2f} dollars",
                        attributes=tuple(ins.get("instruction_attributes") or ()),
                        options=tuple(ins.get("instruction_options") or ()),
                        price_upper=upper,
                    )
                )
    random.Random(233).shuffle(goals)
    goals = [Goal(**{**_fields(g), "index": i}) for i, g in enumerate(goals)]
    n = len(goals)
    if n >= 3:
        n_test, n_dev = min(500, max(1, n // 3)), min(1000, max(1, n // 3))
        splits = {"test": (0, n_test), "dev": (n_test, n_test + n_dev), "train": (n_test + n_dev, n)}
    else:
        splits = {"test": (0, n), "dev": (n, n), "train": (n, n)}
    return ListCatalogue(products, goals, label=f"WebShop data from {Path(items).name}", splits=splits)


def _fields(goal: Goal) -> dict[str, Any]:
    return {name: getattr(goal, name) for name in Goal.__dataclass_fields__}
