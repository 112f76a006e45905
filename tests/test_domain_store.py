"""Tests for the built-in `store` domain (online retail with customer authentication)."""
import copy
import json

import pytest
from langchain_core.utils.function_calling import convert_to_openai_tool

from sap.toolsets.domains import store
from sap.toolsets.domains.store import OnlineStore, sample_config

SEEDS = range(30)


def tool_names(instance):
    return sorted(n for n in dir(instance) if not n.startswith("_") and callable(getattr(instance, n)))


def loaded(seed=0):
    config = sample_config(seed)
    shop = OnlineStore()
    shop._load_scenario(config)
    return shop, config


def logged_in(seed=0):
    shop, config = loaded(seed)
    result = shop.login_by_email(config["current_user_hint"]["email"])
    assert "error" not in result
    return shop, config


def order_with_status(shop, status):
    orders = shop.list_orders(status)["orders"]
    assert orders, f"no {status} order"
    return shop.get_order_details(orders[0]["order_id"])


def other_variant(shop, item, available=True):
    """Another variant of the item's product with the given availability, or None."""
    variants = shop.get_product_details(item["product_id"])["variants"]
    return next((v for v in variants if v["item_id"] != item["item_id"] and v["available"] == available), None)


def exchangeable(shop, status):
    """An order with `status` and an item in it that has another available variant."""
    for entry in shop.list_orders(status)["orders"]:
        order = shop.get_order_details(entry["order_id"])
        for item in order["items"]:
            variant = other_variant(shop, item)
            if variant:
                return order, item, variant
    return None


# ----- module contract --------------------------------------------------------

def test_module_constants():
    assert store.NAME == "store"
    assert store.DESCRIPTION and "\n" not in store.DESCRIPTION
    assert store.TOOL_CLASS is OnlineStore
    assert store.__doc__.strip()


def test_at_least_twelve_tools_and_clean_schemas():
    names = tool_names(OnlineStore())
    assert len(names) >= 12
    for name in names:
        spec = convert_to_openai_tool(getattr(OnlineStore(), name))["function"]
        assert spec["name"] == name
        assert spec["description"].strip()
        params = spec["parameters"]
        for pname, pschema in params.get("properties", {}).items():
            assert pschema.get("description", "").strip(), f"{name}.{pname} lacks a description"
    spec = convert_to_openai_tool(OnlineStore().exchange_delivered_order_items)["function"]["parameters"]
    assert spec["required"] == ["order_id", "item_ids", "new_item_ids", "payment_method_id"]
    assert spec["properties"]["item_ids"]["type"] == "array"
    reason = convert_to_openai_tool(OnlineStore().cancel_pending_order)["function"]["parameters"]["properties"]["reason"]
    assert reason["enum"] == ["no longer needed", "ordered by mistake"]
    status = convert_to_openai_tool(OnlineStore().list_orders)["function"]["parameters"]
    assert "status" not in status.get("required", [])


def test_empty_instance_state():
    state = OnlineStore()._state()
    assert state["users"] == {} and state["orders"] == {} and state["current_user_id"] is None
    json.dumps(state)


# ----- sample_config ----------------------------------------------------------

def test_sample_config_is_deterministic_and_json():
    assert sample_config(7) == sample_config(7)
    assert json.loads(json.dumps(sample_config(7))) == sample_config(7)


def test_sample_config_varies_across_seeds():
    configs = [sample_config(s) for s in SEEDS]
    assert len({json.dumps(c, sort_keys=True) for c in configs}) == len(configs)
    assert len({c["current_user_hint"]["email"] for c in configs}) > 20
    assert len({len(c["users"]) for c in configs}) > 2
    assert len({len(c["products"]) for c in configs}) > 2
    assert len({tuple(sorted(p["name"] for p in c["products"])) for c in configs}) > 20


@pytest.mark.parametrize("seed", SEEDS)
def test_sample_config_shape(seed):
    config = sample_config(seed)
    assert 6 <= len(config["products"]) <= 12
    assert 3 <= len(config["users"]) <= 8
    ids = [v["item_id"] for p in config["products"] for v in p["variants"]]
    assert len(ids) == len(set(ids)) and all(len(i) == 10 and i.isdigit() for i in ids)
    for product in config["products"]:
        assert 2 <= len(product["variants"]) <= 5
        assert sum(v["available"] for v in product["variants"]) >= 2
    for user in config["users"]:
        assert user["user_id"].startswith(f"{user['first_name']}_{user['last_name']}_".lower())
        statuses = [o["status"] for o in config["orders"] if o["user_id"] == user["user_id"]]
        assert 2 <= len(statuses) <= 5
        assert "pending" in statuses and "delivered" in statuses
        assert user["payment_methods"]
    for order in config["orders"]:
        assert order["order_id"].startswith("#W") and len(order["order_id"]) == 9
    hint = config["current_user_hint"]
    user = next(u for u in config["users"] if u["email"] == hint["email"])
    assert (user["first_name"], user["last_name"], user["address"]["zip"]) == (
        hint["first_name"], hint["last_name"], hint["zip"])


def test_load_scenario_deep_copies():
    config = sample_config(3)
    snapshot = json.dumps(config, sort_keys=True)
    shop = OnlineStore()
    shop._load_scenario(config)
    shop.login_by_email(config["current_user_hint"]["email"])
    order = order_with_status(shop, "pending")
    shop.cancel_pending_order(order["order_id"], "no longer needed")
    assert json.dumps(config, sort_keys=True) == snapshot


# ----- authentication ---------------------------------------------------------

def test_login_by_email_and_name_zip_agree():
    shop, config = loaded(4)
    hint = config["current_user_hint"]
    by_email = shop.login_by_email(hint["email"].upper())
    shop.logout()
    by_name = shop.login_by_name_zip(hint["first_name"], hint["last_name"], hint["zip"])
    assert by_email == by_name
    assert by_email["first_name"] == hint["first_name"]
    assert shop._state()["current_user_id"] == by_email["user_id"]


def test_bad_login_values_are_named():
    shop, config = loaded(5)
    assert "nobody@example.com" in shop.login_by_email("nobody@example.com")["error"]
    hint = config["current_user_hint"]
    assert "00000" in shop.login_by_name_zip(hint["first_name"], hint["last_name"], "00000")["error"]
    assert shop._state()["current_user_id"] is None


def test_tools_require_login():
    shop, config = loaded(6)
    order_id = config["orders"][0]["order_id"]
    pm = config["users"][0]["payment_methods"][0]["payment_method_id"]
    address = ("1 Main Street", "", "Austin", "TX", "73301")
    calls = [
        shop.get_user_details(), shop.list_orders(), shop.get_order_details(order_id), shop.logout(),
        shop.cancel_pending_order(order_id, "no longer needed"),
        shop.return_delivered_order_items(order_id, ["1"], pm),
        shop.exchange_delivered_order_items(order_id, ["1"], ["2"], pm),
        shop.modify_pending_order_address(order_id, *address), shop.modify_pending_order_items(order_id, ["1"], ["2"], pm),
        shop.modify_pending_order_payment(order_id, pm), shop.modify_user_address(*address),
        shop.add_to_cart("1"), shop.get_cart(), shop.checkout(pm),
    ]
    for result in calls:
        assert "login" in result["error"]
    before = copy.deepcopy(loaded(6)[0]._state())  # _state() gives the live structures
    assert shop._state() == before
    assert "error" not in shop.search_products("")
    assert "error" not in shop.get_product_details(config["products"][0]["product_id"])


def test_logout_ends_session():
    shop, _ = logged_in(7)
    assert shop.logout()["logged_in"] is False
    assert "login" in shop.get_user_details()["error"]


# ----- dependency chains --------------------------------------------------------

@pytest.mark.parametrize("seed", range(10))
def test_chain_login_details_order_cancel(seed):
    shop, config = loaded(seed)
    user_id = shop.login_by_email(config["current_user_hint"]["email"])["user_id"]
    details = shop.get_user_details()
    assert details["user_id"] == user_id and details["zip"] == config["current_user_hint"]["zip"]
    order_id = next(o["order_id"] for o in details["orders"] if o["status"] == "pending")
    order = shop.get_order_details(order_id)
    paid = order["payment"]["amount"]
    method_id = order["payment_method_id"]
    balance_before = next(m for m in details["payment_methods"] if m["payment_method_id"] == method_id).get("balance")
    result = shop.cancel_pending_order(order["order_id"], "ordered by mistake")
    assert result["status"] == "cancelled"
    assert result["refunds"] == [{"payment_method_id": method_id, "amount": paid}]
    state = shop._state()
    assert state["orders"][order_id]["status"] == "cancelled"
    assert state["orders"][order_id]["cancel_reason"] == "ordered by mistake"
    if balance_before is not None:
        method = next(m for m in state["users"][user_id]["payment_methods"] if m["payment_method_id"] == method_id)
        assert method["balance"] == round(balance_before + paid, 2)
    assert "pending" in shop.cancel_pending_order(order_id, "no longer needed")["error"]
    assert any(o["order_id"] == order_id for o in shop.list_orders("cancelled")["orders"])


def test_chain_return_delivered_items():
    shop, _ = logged_in(8)
    order = order_with_status(shop, "delivered")
    result = shop.return_delivered_order_items(order["order_id"], order["item_ids"][:1], order["payment_method_id"])
    assert result["status"] == "return requested"
    assert result["refund_amount"] == order["items"][0]["price"]
    stored = shop._state()["orders"][order["order_id"]]
    assert stored["status"] == "return requested" and stored["return"]["item_ids"] == order["item_ids"][:1]
    assert shop.get_order_details(order["order_id"])["return"] == stored["return"]
    again = shop.return_delivered_order_items(order["order_id"], order["item_ids"][:1], order["payment_method_id"])
    assert "delivered" in again["error"]


def test_chain_search_product_exchange():
    for seed in SEEDS:
        shop, _ = logged_in(seed)
        found = exchangeable(shop, "delivered")
        if found:
            break
    order, item, variant = found
    product = shop.search_products(item["name"])["products"][0]
    assert product["product_id"] == item["product_id"]
    new_item_ids = [v["item_id"] for v in shop.get_product_details(product["product_id"])["variants"]
                    if v["item_id"] == variant["item_id"]]
    pm = shop.get_user_details()["payment_methods"][0]["payment_method_id"]
    result = shop.exchange_delivered_order_items(order["order_id"], [item["item_id"]], new_item_ids, pm)
    if "error" in result:  # a gift card may lack the balance for the difference
        assert "balance" in result["error"]
        result = shop.exchange_delivered_order_items(order["order_id"], [item["item_id"]], new_item_ids,
                                                     order["payment_method_id"])
    assert result["status"] == "exchange requested"
    assert result["price_difference"] == round(variant["price"] - item["price"], 2)
    assert shop._state()["orders"][order["order_id"]]["exchange"]["new_item_ids"] == new_item_ids


def test_chain_modify_pending_items_updates_total():
    for seed in SEEDS:
        shop, _ = logged_in(seed)
        found = exchangeable(shop, "pending")
        if found and "gift_card" not in found[0]["payment_method_id"]:
            break
    order, item, variant = found
    result = shop.modify_pending_order_items(order["order_id"], [item["item_id"]], [variant["item_id"]],
                                             order["payment_method_id"])
    difference = round(variant["price"] - item["price"], 2)
    assert result["price_difference"] == difference
    assert result["total"] == round(order["total"] + difference, 2)
    after = shop.get_order_details(order["order_id"])
    assert variant["item_id"] in after["item_ids"] and item["item_id"] not in after["item_ids"]
    assert after["status"] == "pending"


def test_chain_modify_addresses():
    shop, _ = logged_in(9)
    order = order_with_status(shop, "pending")
    new = ("12 Harbor Road", "Apt 5", "Boston", "MA", "02110")
    result = shop.modify_pending_order_address(order["order_id"], *new)
    assert result["address"]["zip"] == "02110"
    assert shop.get_order_details(order["order_id"])["address"]["city"] == "Boston"
    assert shop.modify_user_address(*new)["address"]["address1"] == "12 Harbor Road"
    details = shop.get_user_details()
    assert (details["address1"], details["zip"]) == ("12 Harbor Road", "02110")
    assert "zip" in shop.modify_user_address("1 A St", "", "Austin", "TX", "7330")["error"]


def non_gift_card(shop):
    return next(m for m in shop.get_user_details()["payment_methods"] if m["type"] != "gift_card")


def test_chain_cart_checkout_creates_order():
    shop, _ = logged_in(10)
    product = shop.search_products("")["products"][0]
    variants = [v for v in shop.get_product_details(product["product_id"])["variants"] if v["available"]]
    cart = shop.add_to_cart(variants[0]["item_id"])
    assert cart["item_count"] == 1 and cart["total"] == variants[0]["price"]
    assert "already" in shop.add_to_cart(variants[0]["item_id"])["error"]
    payment_method_id = non_gift_card(shop)["payment_method_id"]
    placed = shop.checkout(payment_method_id)
    assert placed["status"] == "pending" and placed["total"] == variants[0]["price"]
    assert shop.get_cart()["item_count"] == 0
    assert "empty" in shop.checkout(payment_method_id)["error"]
    details = shop.get_order_details(placed["order_id"])
    assert details["item_ids"] == [variants[0]["item_id"]]
    assert placed["order_id"] in shop._state()["orders"]
    assert shop.cancel_pending_order(placed["order_id"], "no longer needed")["status"] == "cancelled"


def test_checkout_ids_are_deterministic_and_fresh():
    def place(seed):
        shop, config = logged_in(seed)
        item = next(v for p in config["products"] for v in p["variants"] if v["available"])
        shop.add_to_cart(item["item_id"])
        return shop.checkout(non_gift_card(shop)["payment_method_id"])["order_id"], config

    order_id, config = place(17)
    assert place(17)[0] == order_id
    assert order_id not in {o["order_id"] for o in config["orders"]}


def test_gift_card_balance_is_enforced():
    for seed in SEEDS:
        shop, _ = logged_in(seed)
        card = next((m for m in shop.get_user_details()["payment_methods"] if m["type"] == "gift_card"), None)
        if card:
            break
    for product in shop.search_products("")["products"]:
        for variant in shop.get_product_details(product["product_id"])["variants"]:
            if variant["available"]:
                shop.add_to_cart(variant["item_id"])
    cart = shop.get_cart()
    assert cart["total"] > card["balance"]
    before = copy.deepcopy(shop._state())  # _state() gives the live structures
    assert "balance" in shop.checkout(card["payment_method_id"])["error"]
    assert shop._state() == before


# ----- structured errors ----------------------------------------------------------

def test_bad_ids_give_structured_errors():
    shop, _ = logged_in(11)
    assert "#W0000000" in shop.get_order_details("#W0000000")["error"]
    assert "nope" in shop.get_product_details("nope")["error"]
    assert "123" in shop.add_to_cart("123")["error"]
    order = order_with_status(shop, "delivered")
    assert "bogus_card" in shop.return_delivered_order_items(order["order_id"], order["item_ids"], "bogus_card")["error"]
    bad = shop.return_delivered_order_items(order["order_id"], ["9999999999"], order["payment_method_id"])
    assert "9999999999" in bad["error"]
    dup = order["item_ids"][:1] * 2
    assert "duplicates" in shop.return_delivered_order_items(order["order_id"], dup, order["payment_method_id"])["error"]
    assert "non-empty" in shop.return_delivered_order_items(order["order_id"], [], order["payment_method_id"])["error"]


def test_order_id_without_hash_is_accepted():
    shop, _ = logged_in(12)
    order = order_with_status(shop, "pending")
    assert shop.get_order_details(order["order_id"].lstrip("#"))["order_id"] == order["order_id"]


def test_wrong_owner_is_rejected():
    shop, config = logged_in(13)
    me = shop._state()["current_user_id"]
    foreign = next(o for o in config["orders"] if o["user_id"] != me and o["status"] == "pending")
    assert "does not belong" in shop.get_order_details(foreign["order_id"])["error"]
    before = copy.deepcopy(shop._state())  # _state() gives the live structures
    assert "does not belong" in shop.cancel_pending_order(foreign["order_id"], "no longer needed")["error"]
    assert shop._state() == before


def test_status_rules():
    shop, _ = logged_in(14)
    delivered = order_with_status(shop, "delivered")
    pending = order_with_status(shop, "pending")
    assert "pending" in shop.cancel_pending_order(delivered["order_id"], "no longer needed")["error"]
    address = ("1 Main Street", "", "Austin", "TX", "73301")
    assert "pending" in shop.modify_pending_order_address(delivered["order_id"], *address)["error"]
    pm = pending["payment_method_id"]
    assert "delivered" in shop.return_delivered_order_items(pending["order_id"], pending["item_ids"], pm)["error"]
    assert "delivered" in shop.exchange_delivered_order_items(
        pending["order_id"], pending["item_ids"], pending["item_ids"], pm)["error"]


def test_exchange_requires_same_product_and_availability():
    for seed in SEEDS:
        shop, _ = logged_in(seed)
        order = order_with_status(shop, "delivered")
        item = order["items"][0]
        unavailable = other_variant(shop, item, available=False)
        foreign = next(v["item_id"] for p in shop._state()["products"].values() if p["product_id"] != item["product_id"]
                       for v in p["variants"])
        if unavailable:
            break
    pm = order["payment_method_id"]
    wrong = shop.exchange_delivered_order_items(order["order_id"], [item["item_id"]], [foreign], pm)
    assert foreign in wrong["error"] and "variant" in wrong["error"]
    gone = shop.exchange_delivered_order_items(order["order_id"], [item["item_id"]], [unavailable["item_id"]], pm)
    assert "not available" in gone["error"]
    count = shop.exchange_delivered_order_items(order["order_id"], [item["item_id"]], [], pm)
    assert "exactly 1" in count["error"]
    assert shop._state()["orders"][order["order_id"]]["status"] == "delivered"


def test_return_refund_must_go_to_original_or_gift_card():
    for seed in SEEDS:
        shop, _ = logged_in(seed)
        order = order_with_status(shop, "delivered")
        others = [m for m in shop.get_user_details()["payment_methods"]
                  if m["payment_method_id"] != order["payment_method_id"] and m["type"] != "gift_card"]
        if others:
            break
    result = shop.return_delivered_order_items(order["order_id"], order["item_ids"], others[0]["payment_method_id"])
    assert "original payment method" in result["error"]


def test_invalid_cancel_reason():
    shop, _ = logged_in(15)
    order = order_with_status(shop, "pending")
    assert "reason" in shop.cancel_pending_order(order["order_id"], "changed my mind")["error"]


# ----- state ------------------------------------------------------------------

def test_state_changes_after_mutation_and_is_json():
    shop, _ = logged_in(16)
    before = copy.deepcopy(shop._state())  # _state() gives the live structures
    json.dumps(before)
    order = order_with_status(shop, "pending")
    assert shop._state() == before  # reads do not mutate
    shop.modify_pending_order_address(order["order_id"], "9 Elm Court", "", "Denver", "CO", "80202")
    after = shop._state()
    assert after != before
    assert json.loads(json.dumps(after)) == after


def test_change_payment_method_of_pending_order():
    for seed in SEEDS:
        shop, _ = logged_in(seed)
        order = order_with_status(shop, "pending")
        others = [m for m in shop.get_user_details()["payment_methods"]
                  if m["payment_method_id"] != order["payment_method_id"] and m["type"] != "gift_card"]
        if others:
            break
    new_id = others[0]["payment_method_id"]
    result = shop.modify_pending_order_payment(order["order_id"], new_id)
    assert result["payment_method_id"] == new_id
    history = shop.get_order_details(order["order_id"])["payment_history"]
    assert history[-2]["transaction_type"] == "refund" and history[-1] == {
        "transaction_type": "payment", "amount": order["total"], "payment_method_id": new_id}
    assert "already" in shop.modify_pending_order_payment(order["order_id"], new_id)["error"]
