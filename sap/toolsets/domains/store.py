"""Online retail store with customer authentication: orders, products, cancellations, returns, exchanges and a cart."""
from __future__ import annotations

import copy
import random
from typing import Any, Callable, Literal, Optional

from sap.jsonutil import json_copy
from sap.provenance.places import us_address
from sap.toolsets.domains.common import ToolError, money, tool_method

NAME = "store"
DESCRIPTION = (
    "Online retail store: authenticate a customer, look up orders and products, cancel or modify pending orders, "
    "return or exchange delivered items, update the address and check out a cart."
)

OrderStatus = Literal["pending", "processed", "delivered", "cancelled", "return requested", "exchange requested"]
LOGIN_REQUIRED = "login required: authenticate the customer first with login_by_email or login_by_name_zip"
MAX_LISTED = 10
DEFAULT_ORDER_NUMBER = 9000001





def _item_view(product: dict, variant: dict) -> dict:
    return {
        "item_id": variant["item_id"],
        "product_id": product["product_id"],
        "name": product["name"],
        "price": variant["price"],
        "options": dict(variant["options"]),
    }


class OnlineStore:
    """An online store: customers with addresses and payment methods, their orders, a catalog and carts."""

    def __init__(self) -> None:
        self._users: dict[str, dict] = {}
        self._products: dict[str, dict] = {}
        self._orders: dict[str, dict] = {}
        self._carts: dict[str, list[str]] = {}
        self._current_user_id: str | None = None
        self._next_order_number = DEFAULT_ORDER_NUMBER
        self._variants: dict[str, tuple[dict, dict]] = {}

    def _load_scenario(self, config: dict) -> None:
        config = json_copy(config)
        self._users = {u["user_id"]: u for u in config.get("users", [])}
        self._products = {p["product_id"]: p for p in config.get("products", [])}
        self._orders = {o["order_id"]: o for o in config.get("orders", [])}
        self._carts = {}
        self._current_user_id = None
        self._next_order_number = int(config.get("next_order_number", DEFAULT_ORDER_NUMBER))
        self._variants = {v["item_id"]: (p, v) for p in self._products.values() for v in p["variants"]}

    def _state(self) -> dict:
        return {
            "current_user_id": self._current_user_id,
            "users": self._users,
            "products": self._products,
            "orders": self._orders,
            "carts": self._carts,
            "next_order_number": self._next_order_number,
        }

    # ----- internal helpers -------------------------------------------------

    def _user(self) -> dict:
        if self._current_user_id is None:
            raise ToolError(LOGIN_REQUIRED)
        return self._users[self._current_user_id]

    def _login(self, user: dict) -> dict:
        self._current_user_id = user["user_id"]
        return {"user_id": user["user_id"], "first_name": user["first_name"], "last_name": user["last_name"]}

    def _order(self, order_id: str, status: str | None = None) -> dict:
        """The logged-in user's order `order_id`, optionally required to have `status`."""
        user = self._user()
        key = order_id if order_id.startswith("#") else f"#{order_id}"
        order = self._orders.get(key)
        if order is None:
            raise ToolError(f"order {order_id!r} not found")
        if order["user_id"] != user["user_id"]:
            raise ToolError(f"order {order_id!r} does not belong to the logged-in user {user['user_id']!r}")
        if status is not None and order["status"] != status:
            raise ToolError(f"order {key!r} is {order['status']!r}; only {status} orders allow this action")
        return order

    def _payment_method(self, user: dict, payment_method_id: str) -> dict:
        for method in user["payment_methods"]:
            if method["payment_method_id"] == payment_method_id:
                return method
        raise ToolError(f"payment method {payment_method_id!r} not found for user {user['user_id']!r}")

    def _variant(self, item_id: str) -> tuple[dict, dict]:
        if item_id not in self._variants:
            raise ToolError(f"item {item_id!r} not found in the catalog")
        return self._variants[item_id]

    def _order_items(self, order: dict, item_ids: list[str]) -> list[dict]:
        """The entries of `order` named by `item_ids` (non-empty, no duplicates)."""
        if not isinstance(item_ids, list) or not item_ids:
            raise ToolError("item_ids must be a non-empty list of item ids")
        if len(set(item_ids)) != len(item_ids):
            raise ToolError(f"item_ids {item_ids!r} contains duplicates")
        by_id = {item["item_id"]: item for item in order["items"]}
        missing = [i for i in item_ids if i not in by_id]
        if missing:
            raise ToolError(f"item(s) {missing!r} are not in order {order['order_id']!r}")
        return [by_id[i] for i in item_ids]

    def _replacements(self, items: list[dict], new_item_ids: list[str]) -> list[dict]:
        """Item views for `new_item_ids`: available variants of the same products as `items`, pairwise."""
        if not isinstance(new_item_ids, list) or len(new_item_ids) != len(items):
            raise ToolError(f"new_item_ids must list exactly {len(items)} item id(s), one per item in item_ids")
        views = []
        for old, new_id in zip(items, new_item_ids):
            product, variant = self._variant(new_id)
            if product["product_id"] != old["product_id"]:
                raise ToolError(f"new item {new_id!r} is not a variant of product {old['product_id']!r} ({old['name']})")
            if not variant["available"]:
                raise ToolError(f"new item {new_id!r} is not available")
            views.append(_item_view(product, variant))
        return views

    def _check_balance(self, method: dict, amount: float) -> None:
        if method["type"] == "gift_card" and amount > method["balance"] + 1e-9:
            raise ToolError(
                f"gift card {method['payment_method_id']!r} balance {method['balance']} is less than {money(amount)}"
            )

    def _transact(self, order: dict, method: dict, amount: float) -> None:
        """Charge (amount > 0) or refund (amount < 0) `method` and record it in the order's payment history."""
        amount = money(amount)
        if amount == 0:
            return
        self._check_balance(method, amount)
        if method["type"] == "gift_card":
            method["balance"] = money(method["balance"] - amount)
        order["payment_history"].append({
            "transaction_type": "payment" if amount > 0 else "refund",
            "amount": abs(amount),
            "payment_method_id": method["payment_method_id"],
        })

    def _refund_all(self, user: dict, order: dict) -> list[dict]:
        """Refund every payment method its net contribution to `order`."""
        net: dict[str, float] = {}
        for entry in order["payment_history"]:
            sign = 1 if entry["transaction_type"] == "payment" else -1
            net[entry["payment_method_id"]] = net.get(entry["payment_method_id"], 0.0) + sign * entry["amount"]
        refunds = []
        for payment_method_id, amount in net.items():
            if money(amount) > 0:
                self._transact(order, self._payment_method(user, payment_method_id), -amount)
                refunds.append({"payment_method_id": payment_method_id, "amount": money(amount)})
        return refunds

    @staticmethod
    def _address(address1: str, address2: str, city: str, state: str, zip: str) -> dict:
        for label, value in (("address1", address1), ("city", city), ("state", state)):
            if not isinstance(value, str) or not value.strip():
                raise ToolError(f"{label} must be a non-empty string, got {value!r}")
        if not (isinstance(zip, str) and len(zip) == 5 and zip.isdigit()):
            raise ToolError(f"zip must be a 5-digit string, got {zip!r}")
        return {
            "address1": address1.strip(), "address2": (address2 or "").strip(), "city": city.strip(),
            "state": state.strip(), "zip": zip, "country": "USA",
        }

    def _cart_view(self, user: dict) -> dict:
        items = [_item_view(*self._variant(i)) for i in self._carts.get(user["user_id"], [])]
        return {"items": items, "item_count": len(items), "total": money(sum(i["price"] for i in items))}

    # ----- authentication ---------------------------------------------------

    @tool_method
    def login_by_email(self, email: str) -> dict:
        """Authenticate the customer by the email address on their account.

        Args:
            email: The customer's email address, e.g. "mia.garcia42@example.com".
        """
        wanted = email.strip().lower()
        for user in self._users.values():
            if user["email"].lower() == wanted:
                return self._login(user)
        raise ToolError(f"no customer with email {email!r}")

    @tool_method
    def login_by_name_zip(self, first_name: str, last_name: str, zip: str) -> dict:
        """Authenticate the customer by first name, last name and the zip code of their address.

        Args:
            first_name: The customer's first name.
            last_name: The customer's last name.
            zip: The 5-digit zip code of the customer's address.
        """
        wanted = (first_name.strip().lower(), last_name.strip().lower(), zip.strip())
        for user in self._users.values():
            if (user["first_name"].lower(), user["last_name"].lower(), user["address"]["zip"]) == wanted:
                return self._login(user)
        raise ToolError(f"no customer named {first_name!r} {last_name!r} with zip {zip!r}")

    @tool_method
    def logout(self) -> dict:
        """Log the current customer out."""
        user = self._user()
        self._current_user_id = None
        return {"user_id": user["user_id"], "logged_in": False}

    # ----- account and orders ------------------------------------------------

    @tool_method
    def get_user_details(self) -> dict:
        """Get the logged-in customer's profile: name, email, address, orders and payment methods."""
        user = self._user()
        orders = [o for o in self._orders.values() if o["user_id"] == user["user_id"]]
        return {
            "user_id": user["user_id"],
            "first_name": user["first_name"],
            "last_name": user["last_name"],
            "name": f"{user['first_name']} {user['last_name']}",
            "email": user["email"],
            **user["address"],
            "orders": [{"order_id": o["order_id"], "status": o["status"]} for o in orders[:MAX_LISTED]],
            "payment_methods": copy.deepcopy(user["payment_methods"]),
        }

    @tool_method
    def modify_user_address(self, address1: str, address2: str, city: str, state: str, zip: str) -> dict:
        """Change the default address on the logged-in customer's account (existing orders keep theirs).

        Args:
            address1: Street address, e.g. "445 Maple Drive".
            address2: Apartment or suite, or an empty string if none.
            city: City name.
            state: State, e.g. "TX".
            zip: 5-digit zip code.
        """
        user = self._user()
        user["address"] = self._address(address1, address2, city, state, zip)
        return {"user_id": user["user_id"], "address": dict(user["address"])}

    @tool_method
    def list_orders(self, status: Optional[OrderStatus] = None) -> dict:
        """List the logged-in customer's orders, optionally only those with a given status.

        Args:
            status: Only list orders with this status; omit to list all orders.
        """
        user = self._user()
        orders = [o for o in self._orders.values()
                  if o["user_id"] == user["user_id"] and (status is None or o["status"] == status)]
        return {
            "orders": [
                {"order_id": o["order_id"], "status": o["status"], "total": o["total"], "item_count": len(o["items"])}
                for o in orders[:MAX_LISTED]
            ],
            "count": len(orders),
        }

    @tool_method
    def get_order_details(self, order_id: str) -> dict:
        """Get one of the logged-in customer's orders: items, status, shipping address and payment.

        Args:
            order_id: The order id, e.g. "#W4817420".
        """
        order = copy.deepcopy(self._order(order_id))
        first_payment = order["payment_history"][0] if order["payment_history"] else {}
        details = {
            "order_id": order["order_id"],
            "status": order["status"],
            "items": order["items"],
            "item_ids": [item["item_id"] for item in order["items"]],
            "total": order["total"],
            "address": order["address"],
            "payment_method_id": order["payment_method_id"],
            "payment": {"payment_method_id": order["payment_method_id"], "amount": first_payment.get("amount", 0.0)},
            "payment_history": order["payment_history"][-MAX_LISTED:],
        }
        for key in ("cancel_reason", "return", "exchange"):
            if key in order:
                details[key] = order[key]
        return details

    # ----- catalog ------------------------------------------------------------

    @tool_method
    def search_products(self, query: str) -> dict:
        """Search the catalog by words in the product name or category (no login needed).

        Args:
            query: Words to look for, e.g. "running shoes" or "kitchen"; an empty string lists all products.
        """
        words = query.lower().split()
        matches = [p for p in self._products.values()
                   if all(w in f"{p['name']} {p['category']}".lower() for w in words)]
        return {
            "query": query,
            "products": [
                {
                    "product_id": p["product_id"],
                    "name": p["name"],
                    "category": p["category"],
                    "min_price": min(v["price"] for v in p["variants"]),
                    "available_variants": sum(v["available"] for v in p["variants"]),
                }
                for p in matches[:MAX_LISTED]
            ],
            "count": len(matches),
        }

    @tool_method
    def get_product_details(self, product_id: str) -> dict:
        """Get a product and all its variants with options, price and availability (no login needed).

        Args:
            product_id: The product id, e.g. "6086499569".
        """
        product = self._products.get(product_id)
        if product is None:
            raise ToolError(f"product {product_id!r} not found")
        return {
            "product_id": product["product_id"],
            "name": product["name"],
            "category": product["category"],
            "variants": copy.deepcopy(product["variants"]),
        }

    # ----- pending orders -----------------------------------------------------

    @tool_method
    def cancel_pending_order(self, order_id: str, reason: Literal["no longer needed", "ordered by mistake"]) -> dict:
        """Cancel a pending order and refund what was paid to the original payment methods.

        Args:
            order_id: The id of the pending order to cancel, e.g. "#W4817420".
            reason: Why the customer cancels.
        """
        order = self._order(order_id, "pending")
        if reason not in ("no longer needed", "ordered by mistake"):
            raise ToolError(f"reason must be 'no longer needed' or 'ordered by mistake', got {reason!r}")
        refunds = self._refund_all(self._user(), order)
        order["status"] = "cancelled"
        order["cancel_reason"] = reason
        return {"order_id": order["order_id"], "status": "cancelled", "reason": reason, "refunds": refunds}

    @tool_method
    def modify_pending_order_address(
        self, order_id: str, address1: str, address2: str, city: str, state: str, zip: str
    ) -> dict:
        """Change the shipping address of a pending order.

        Args:
            order_id: The id of the pending order, e.g. "#W4817420".
            address1: Street address, e.g. "445 Maple Drive".
            address2: Apartment or suite, or an empty string if none.
            city: City name.
            state: State, e.g. "TX".
            zip: 5-digit zip code.
        """
        order = self._order(order_id, "pending")
        order["address"] = self._address(address1, address2, city, state, zip)
        return {"order_id": order["order_id"], "status": order["status"], "address": dict(order["address"])}

    @tool_method
    def modify_pending_order_items(
        self, order_id: str, item_ids: list[str], new_item_ids: list[str], payment_method_id: str
    ) -> dict:
        """Swap items of a pending order for available variants of the same products, settling the price difference.

        Args:
            order_id: The id of the pending order, e.g. "#W4817420".
            item_ids: Item ids in the order to replace.
            new_item_ids: Replacement item ids, one per entry of item_ids, each a variant of the same product.
            payment_method_id: The customer's payment method that pays or receives the price difference.
        """
        order = self._order(order_id, "pending")
        method = self._payment_method(self._user(), payment_method_id)
        old = self._order_items(order, item_ids)
        new = self._replacements(old, new_item_ids)
        difference = money(sum(n["price"] for n in new) - sum(o["price"] for o in old))
        self._transact(order, method, difference)
        replaced = dict(zip(item_ids, new))
        order["items"] = [replaced.get(item["item_id"], item) for item in order["items"]]
        order["total"] = money(order["total"] + difference)
        return {
            "order_id": order["order_id"],
            "status": order["status"],
            "items": copy.deepcopy(order["items"]),
            "total": order["total"],
            "price_difference": difference,
        }

    @tool_method
    def modify_pending_order_payment(self, order_id: str, payment_method_id: str) -> dict:
        """Pay a pending order with another payment method, refunding earlier payments and charging the total anew.

        Args:
            order_id: The id of the pending order, e.g. "#W4817420".
            payment_method_id: The customer's payment method to use instead.
        """
        order = self._order(order_id, "pending")
        user = self._user()
        method = self._payment_method(user, payment_method_id)
        if payment_method_id == order["payment_method_id"]:
            raise ToolError(f"order {order['order_id']!r} is already paid with {payment_method_id!r}")
        self._check_balance(method, order["total"])
        self._refund_all(user, order)
        self._transact(order, method, order["total"])
        order["payment_method_id"] = payment_method_id
        return {"order_id": order["order_id"], "payment_method_id": payment_method_id, "total": order["total"]}

    # ----- delivered orders ---------------------------------------------------

    @tool_method
    def return_delivered_order_items(self, order_id: str, item_ids: list[str], payment_method_id: str) -> dict:
        """Request a return of items from a delivered order; the refund goes to the original payment method or a gift card.

        Args:
            order_id: The id of the delivered order, e.g. "#W4817420".
            item_ids: Item ids in the order to return.
            payment_method_id: Where to refund: the order's original payment method or one of the customer's gift cards.
        """
        order = self._order(order_id, "delivered")
        method = self._payment_method(self._user(), payment_method_id)
        if payment_method_id != order["payment_method_id"] and method["type"] != "gift_card":
            raise ToolError(
                f"refunds go to the original payment method {order['payment_method_id']!r} or a gift card, "
                f"not {payment_method_id!r}"
            )
        items = self._order_items(order, item_ids)
        refund = money(sum(i["price"] for i in items))
        order["status"] = "return requested"
        order["return"] = {"item_ids": list(item_ids), "payment_method_id": payment_method_id, "refund_amount": refund}
        return {"order_id": order["order_id"], "status": order["status"], **copy.deepcopy(order["return"])}

    @tool_method
    def exchange_delivered_order_items(
        self, order_id: str, item_ids: list[str], new_item_ids: list[str], payment_method_id: str
    ) -> dict:
        """Request an exchange of delivered items for available variants of the same products, settling the price difference.

        Args:
            order_id: The id of the delivered order, e.g. "#W4817420".
            item_ids: Item ids in the order to exchange.
            new_item_ids: Replacement item ids, one per entry of item_ids, each an available variant of the same product.
            payment_method_id: The customer's payment method that pays or receives the price difference.
        """
        order = self._order(order_id, "delivered")
        method = self._payment_method(self._user(), payment_method_id)
        old = self._order_items(order, item_ids)
        new = self._replacements(old, new_item_ids)
        difference = money(sum(n["price"] for n in new) - sum(o["price"] for o in old))
        self._check_balance(method, difference)
        order["status"] = "exchange requested"
        order["exchange"] = {
            "item_ids": list(item_ids),
            "new_item_ids": list(new_item_ids),
            "payment_method_id": payment_method_id,
            "price_difference": difference,
        }
        return {"order_id": order["order_id"], "status": order["status"], **copy.deepcopy(order["exchange"])}

    # ----- cart ---------------------------------------------------------------

    @tool_method
    def add_to_cart(self, item_id: str) -> dict:
        """Add one available product variant to the logged-in customer's cart.

        Args:
            item_id: The variant's item id, from get_product_details.
        """
        user = self._user()
        _, variant = self._variant(item_id)
        if not variant["available"]:
            raise ToolError(f"item {item_id!r} is not available")
        cart = self._carts.setdefault(user["user_id"], [])
        if item_id in cart:
            raise ToolError(f"item {item_id!r} is already in the cart")
        cart.append(item_id)
        return self._cart_view(user)

    @tool_method
    def get_cart(self) -> dict:
        """Show the logged-in customer's cart with its items and total."""
        return self._cart_view(self._user())

    @tool_method
    def checkout(self, payment_method_id: str) -> dict:
        """Place a pending order for everything in the cart, shipped to the account address.

        Args:
            payment_method_id: The customer's payment method to charge.
        """
        user = self._user()
        method = self._payment_method(user, payment_method_id)
        cart = self._cart_view(user)
        if not cart["items"]:
            raise ToolError("the cart is empty; add items with add_to_cart first")
        self._check_balance(method, cart["total"])
        order_id = self._new_order_id()
        order = {
            "order_id": order_id, "user_id": user["user_id"], "status": "pending", "items": cart["items"],
            "total": cart["total"], "address": dict(user["address"]), "payment_method_id": payment_method_id,
            "payment_history": [],
        }
        self._transact(order, method, cart["total"])
        self._orders[order_id] = order
        self._carts[user["user_id"]] = []
        return {"order_id": order_id, "status": "pending", "items": copy.deepcopy(cart["items"]),
                "total": cart["total"], "payment_method_id": payment_method_id}

    def _new_order_id(self) -> str:
        while f"#W{self._next_order_number}" in self._orders:
            self._next_order_number += 1
        order_id = f"#W{self._next_order_number}"
        self._next_order_number += 1
        return order_id


TOOL_CLASS = OnlineStore
# Error results leave the state untouched (checked in tests/test_domains_contract.py).
ERROR_RESULTS_CHANGE_NOTHING = True

# ----- sample configurations ------------------------------------------------------

_COLORS = ["black", "white", "red", "blue", "green", "gray", "navy", "beige"]
_PRODUCT_TEMPLATES: list[tuple[str, str, float, dict[str, list[str]]]] = [
    ("T-Shirt", "clothing", 18.0, {"color": _COLORS, "size": ["S", "M", "L", "XL"]}),
    ("Rain Jacket", "clothing", 89.0, {"color": _COLORS, "size": ["S", "M", "L", "XL"], "hood": ["yes", "no"]}),
    ("Running Shoes", "footwear", 95.0, {"color": _COLORS, "size": ["7", "8", "9", "10", "11"]}),
    ("Hiking Boots", "footwear", 140.0,
     {"material": ["leather", "synthetic"], "size": ["8", "9", "10", "11"], "waterproof": ["yes", "no"]}),
    ("Water Bottle", "outdoors", 24.0, {"capacity": ["500ml", "750ml", "1000ml"], "color": _COLORS}),
    ("Backpack", "outdoors", 75.0,
     {"color": _COLORS, "size": ["small", "medium", "large"], "material": ["nylon", "polyester", "leather"]}),
    ("Desk Lamp", "home", 45.0, {"color": ["black", "white", "silver"], "power source": ["USB", "AC adapter", "battery"]}),
    ("Coffee Maker", "kitchen", 110.0,
     {"capacity": ["4 cups", "8 cups", "12 cups"], "type": ["drip", "espresso", "french press"]}),
    ("Tea Kettle", "kitchen", 38.0,
     {"material": ["stainless steel", "glass", "ceramic"], "capacity": ["1 liter", "1.5 liters", "2 liters"]}),
    ("Wireless Earbuds", "electronics", 130.0,
     {"color": ["black", "white", "blue"], "battery life": ["6 hours", "8 hours", "10 hours"]}),
    ("Mechanical Keyboard", "electronics", 120.0,
     {"switch type": ["linear", "tactile", "clicky"], "backlight": ["none", "white", "RGB"], "size": ["full size", "80%"]}),
    ("Smart Watch", "electronics", 220.0,
     {"color": ["black", "silver", "gold", "rose gold"], "band": ["silicone", "leather", "metal"]}),
    ("Bluetooth Speaker", "electronics", 70.0, {"color": _COLORS, "water resistance": ["none", "IPX4", "IPX7"]}),
    ("Yoga Mat", "sports", 32.0, {"thickness": ["4mm", "6mm", "8mm"], "color": _COLORS}),
    ("Sunglasses", "accessories", 85.0,
     {"frame color": ["black", "brown", "gold", "silver"], "lens type": ["polarized", "non-polarized"]}),
    ("Office Chair", "furniture", 260.0,
     {"color": ["black", "gray", "blue"], "material": ["mesh", "leather", "fabric"], "armrest": ["fixed", "adjustable"]}),
]
_FIRST_NAMES = ["Mia", "Liam", "Olivia", "Noah", "Emma", "Ethan", "Ava", "Lucas", "Sofia", "Yusuf", "Aarav", "Chen",
                "Fatima", "Mei", "Omar", "Isabella", "Daiki", "Amelia", "Raj", "Harper", "Mateo", "Zoe", "Ivan", "Lena"]
_LAST_NAMES = ["Garcia", "Smith", "Nguyen", "Patel", "Kim", "Johnson", "Silva", "Rossi", "Khan", "Muller", "Lopez",
               "Brown", "Ito", "Hernandez", "Wilson", "Ahmed", "Kowalski", "Davis", "Moreau", "Lee", "Santos", "Novak"]
_EMAIL_DOMAINS = ["example.com", "mail.example.org", "inbox.example.net"]


def _unique(rng: random.Random, taken: set[str], make: Callable[[random.Random], str]) -> str:
    value = make(rng)
    while value in taken:
        value = make(rng)
    taken.add(value)
    return value


def _digits(n: int) -> Callable[[random.Random], str]:
    return lambda rng: str(rng.randint(10 ** (n - 1), 10 ** n - 1))


def _sample_product(rng: random.Random, taken: set[str], template: tuple) -> dict:
    name, category, base, dims = template
    count = rng.randint(2, 5)
    combos: list[dict[str, str]] = []
    while len(combos) < count:
        combo = {dim: rng.choice(values) for dim, values in dims.items()}
        if combo not in combos:
            combos.append(combo)
    variants = [
        {"item_id": _unique(rng, taken, _digits(10)), "options": combo,
         "price": money(base * rng.uniform(0.85, 1.2)), "available": i < 2 or rng.random() < 0.6}
        for i, combo in enumerate(combos)
    ]
    rng.shuffle(variants)
    return {"product_id": _unique(rng, taken, _digits(10)), "name": name, "category": category, "variants": variants}


def _sample_payment_methods(rng: random.Random, taken: set[str]) -> list[dict]:
    kinds = rng.sample(["credit_card", "paypal"], rng.randint(1, 2)) + ["gift_card"] * rng.randint(0, 1)
    rng.shuffle(kinds)
    methods = []
    for kind in kinds:
        method_id = _unique(rng, taken, lambda r: f"{kind}_{r.randint(1000000, 9999999)}")
        method: dict[str, Any] = {"payment_method_id": method_id, "type": kind}
        if kind == "credit_card":
            method.update(brand=rng.choice(["visa", "mastercard", "amex"]), last_four=_digits(4)(rng))
        elif kind == "gift_card":
            method["balance"] = float(rng.randint(20, 300))
        methods.append(method)
    return methods


def _sample_user(rng: random.Random, taken: set[str], first: str, last: str) -> dict:
    return {
        "user_id": _unique(rng, taken, lambda r: f"{first}_{last}_{r.randint(1000, 9999)}".lower()),
        "first_name": first,
        "last_name": last,
        "email": _unique(rng, taken, lambda r: f"{first}.{last}{r.randint(10, 99)}@{r.choice(_EMAIL_DOMAINS)}".lower()),
        "address": us_address(rng),
        "payment_methods": _sample_payment_methods(rng, taken),
    }


def _sample_order(rng: random.Random, taken: set[str], user: dict, status: str, catalog: list[tuple]) -> dict:
    items = [_item_view(p, v) for p, v in rng.sample(catalog, rng.randint(1, 4))]
    total = money(sum(i["price"] for i in items))
    method_id = rng.choice(user["payment_methods"])["payment_method_id"]
    history = [{"transaction_type": "payment", "amount": total, "payment_method_id": method_id}]
    order = {
        "order_id": _unique(rng, taken, lambda r: f"#W{r.randint(1000000, 8999999)}"),
        "user_id": user["user_id"], "status": status, "items": items, "total": total,
        "address": dict(user["address"]), "payment_method_id": method_id, "payment_history": history,
    }
    if status == "cancelled":
        history.append({"transaction_type": "refund", "amount": total, "payment_method_id": method_id})
        order["cancel_reason"] = rng.choice(["no longer needed", "ordered by mistake"])
    return order


def sample_config(seed: int) -> dict:
    """A random but deterministic store: catalog, customers with orders, and the customer the dialogue is about."""
    rng = random.Random(seed)
    taken: set[str] = set()
    templates = rng.sample(_PRODUCT_TEMPLATES, rng.randint(6, 12))
    products = [_sample_product(rng, taken, t) for t in templates]
    catalog = [(p, v) for p in products for v in p["variants"]]
    names = rng.sample([(f, l) for f in _FIRST_NAMES for l in _LAST_NAMES], rng.randint(3, 8))
    users = [_sample_user(rng, taken, first, last) for first, last in names]
    orders = []
    for user in users:
        statuses = ["pending", "delivered"] + rng.choices(
            ["pending", "processed", "delivered", "cancelled"], k=rng.randint(0, 3))
        rng.shuffle(statuses)
        orders += [_sample_order(rng, taken, user, status, catalog) for status in statuses]
    hint = rng.choice(users)
    return {
        "current_user_hint": {"email": hint["email"], "first_name": hint["first_name"],
                              "last_name": hint["last_name"], "zip": hint["address"]["zip"]},
        "users": users,
        "products": products,
        "orders": orders,
        "next_order_number": rng.randint(9000000, 9899999),
    }
