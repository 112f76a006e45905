"""BFCL v4 multi-turn toolsets, executor, c0 samplers and export, scored by bfcl-eval's own checker."""
from __future__ import annotations

import json

import pytest

from sap.api import synthesize
from sap.cli import main
from sap.export.bfcl import BfclExportError, call_string, to_bfcl
from sap.export.records import record_to_trajectory
from sap.fsm.build import RuleFSMBuilder
from sap.model import Tag, ToolCall
from sap.toolsets import UnknownToolset, load_toolset
from sap.toolsets import bfcl as bfcl_mod
from sap.toolsets.bfcl import BFCL_CLASSES, bfcl_names, parse_bfcl_name
from sap.validate import validate_record

from helpers import needs_bfcl

MIX = {"base": 0.5, "miss_param": 0.25, "miss_func": 0.25}


def _call(name: str, **args) -> ToolCall:
    return ToolCall(call_id="t", name=name, args_exec=args, args_prov={})


def test_names_cover_every_class_and_bfcl_combinations_and_bad_names_are_named():
    names = bfcl_names()
    assert {f"bfcl/{c}" for c in BFCL_CLASSES} <= set(names)
    assert "bfcl/GorillaFileSystem+TwitterAPI" in names and "bfcl/MessageAPI+TravelAPI" in names
    assert parse_bfcl_name("bfcl/TicketAPI+TravelAPI:long_context") == (["TicketAPI", "TravelAPI"], True)
    with pytest.raises(UnknownToolset, match="unknown class 'Nope'"):
        load_toolset("bfcl/GorillaFileSystem+Nope")
    with pytest.raises(UnknownToolset, match="one to three"):
        load_toolset("bfcl/MathAPI+TicketAPI+TravelAPI+TwitterAPI")


def test_without_bfcl_eval_a_bfcl_toolset_says_how_to_install_and_toolsets_still_lists(monkeypatch, capsys):
    monkeypatch.setattr(bfcl_mod, "BACKEND_PACKAGE", "sap_no_such_package.func_source_code")
    with pytest.raises(UnknownToolset, match="pip install --no-deps bfcl-eval==2026.3.23 mpmath"):
        load_toolset("bfcl/TicketAPI")
    assert main(["toolsets"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].startswith("filesystem")
    assert "bfcl/<classes>: not available" in out and "pip install --no-deps bfcl-eval" in out
    assert main(["synthesize", "--toolset", "bfcl/TicketAPI", "-n", "1", "-o", "/tmp/never.jsonl",
                 "--db", "sqlite:///:memory:"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "pip install --no-deps bfcl-eval" in err


def test_call_strings_are_keyword_python_literals():
    assert call_string("cd", {"folder": "it's"}) == 'cd(folder="it\'s")'
    assert call_string("post_tweet", {"content": "a\nb", "tags": ["#x"], "flag": True, "n": None}) == \
        "post_tweet(content='a\\nb', tags=['#x'], flag=True, n=None)"
    assert call_string("pwd", {}) == "pwd()"


@needs_bfcl
@pytest.mark.parametrize("cls", [c for c in BFCL_CLASSES if c != "MathAPI"])
def test_sampled_configs_load_through_load_scenario_and_vary_with_seed(cls):
    ts = load_toolset(f"bfcl/{cls}")
    c0, again, other = ts.sample_config(3), ts.sample_config(3), ts.sample_config(4)
    assert c0 == again and c0 != other and list(c0) == [cls]
    ex = ts.executor_factory()
    ex.reset(c0)
    state = ex.state()[cls]
    scenario = c0[cls]
    if cls == "GorillaFileSystem":
        user = next(iter(scenario["root"]))
        assert state["root"]["name"] == user
        assert set(state["root"]["contents"]) == set(scenario["root"][user]["contents"])
    else:  # every configured public field the class keeps under its own name is loaded as given
        kept = {k: v for k, v in scenario.items() if k in state and k not in ("orders", "tweets")}
        assert kept and all(state[k] == v for k, v in kept.items())


@needs_bfcl
def test_executor_calls_methods_with_keywords_and_keeps_mutable_defaults_fresh():
    ts = load_toolset("bfcl/TwitterAPI")
    c0 = ts.sample_config(0)
    cfg = c0["TwitterAPI"]
    ex = ts.executor_factory()
    ex.reset(c0)
    assert not ex.execute(_call("post_tweet", content="hello")).ok  # not authenticated: error, rolled back
    assert ex.execute(_call("authenticate_twitter", username=cfg["username"], password=cfg["password"])).ok
    posted = ex.execute(_call("post_tweet", content="hello")).value
    assert posted["mentions"] == []
    assert ex.execute(_call("mention", tweet_id=posted["id"], mentioned_usernames=["@bob"])).ok
    second = ex.execute(_call("post_tweet", content="again")).value  # the default list was not shared
    assert second["mentions"] == [] and second["id"] == posted["id"] + 1
    bad = ex.execute(_call("post_tweet", contents="typo"))
    assert not bad.ok and "bad arguments" in bad.error


@pytest.fixture(scope="module")
def bfcl_records():
    """Small offline runs with MissParam and MissFunc variants: every class alone and two combinations."""
    names = [f"bfcl/{c}" for c in BFCL_CLASSES] + ["bfcl/GorillaFileSystem+TwitterAPI", "bfcl/MessageAPI+TravelAPI"]
    return {name: synthesize(name, 5, seed=11, mix=MIX).records for name in names}


@needs_bfcl
def test_offline_records_validate_and_carry_provenance(bfcl_records):
    for name, records in bfcl_records.items():
        toolset = load_toolset(name)
        assert len(records) == 5
        for i, rec in enumerate(records):
            assert validate_record(rec, toolset, i) == []
            assert rec["meta"]["toolset"] == name and set(rec["initial_config"]) <= set(BFCL_CLASSES)
            assert all(a["tag"] for p in rec["provenance"] for a in p["args"].values())
    kinds = {r["meta"]["kind"] for recs in bfcl_records.values() for r in recs}
    assert kinds == {"base", "miss_param", "miss_func"}


@needs_bfcl
def test_every_exported_entry_passes_bfcl_checker_and_a_dropped_call_is_rejected(bfcl_records):
    from sap.testing.bfcl_checker import bfcl_results, check_entry, drop_one_call

    for name, records in bfcl_records.items():
        questions, answers = to_bfcl(records, None, load_toolset)
        for q, a, rec in zip(questions, answers, records):
            truth = a["ground_truth"]
            verdict = check_entry(q, truth)
            assert verdict["valid"], (q["id"], verdict)
            assert not check_entry(q, truth, drop_one_call(truth))["valid"], (q["id"], truth)
            # BFCL's own executor, run on the call strings, returns what sap's executor recorded
            traj = record_to_trajectory(rec)
            assert bfcl_results(q, truth) == [[c.result for c in t.calls] for t in traj.turns], q["id"]


@needs_bfcl
def test_export_format_matches_bfcl_miss_param_and_miss_func_encoding(bfcl_records):
    records = [r for recs in bfcl_records.values() for r in recs]
    questions, answers = to_bfcl(records, "sap_multi_turn_test", load_toolset)
    by_kind = {}
    for q, a, rec in zip(questions, answers, records):
        assert set(q) >= {"id", "question", "initial_config", "path", "involved_classes"} and a["id"] == q["id"]
        assert len(q["question"]) == len(a["ground_truth"])
        assert q["involved_classes"] == parse_bfcl_name(rec["meta"]["toolset"])[0]
        assert all(p.split(".")[0] in q["involved_classes"] for p in q["path"])
        by_kind.setdefault(rec["meta"]["kind"], []).append((q, a, rec))
    for q, a, rec in by_kind["miss_func"]:
        (k, tools), = rec["meta"]["missed_function"].items()
        k = int(k)
        assert q["missed_function"] == {str(k + 1): tools}
        assert a["ground_truth"][k] == [] and q["question"][k + 1] == []
        assert any(s.startswith(f"{tools[0]}(") for s in a["ground_truth"][k + 1])
        assert all(t for i, t in enumerate(q["question"]) if i != k + 1)
    for q, a, rec in by_kind["miss_param"]:
        assert "missed_function" not in q
        empty = [i for i, t in enumerate(a["ground_truth"]) if not t]
        assert empty and all(q["question"][i] and a["ground_truth"][i + 1] for i in empty)


@needs_bfcl
def test_cli_export_from_jsonl_writes_bfcl_files_and_rejects_non_bfcl_records(bfcl_records, tmp_path, capsys):
    src = tmp_path / "in.jsonl"
    recs = bfcl_records["bfcl/GorillaFileSystem+TwitterAPI"]
    src.write_text("".join(json.dumps(r) + "\n" for r in recs))
    assert main(["export", str(src), "--format", "bfcl", "-o", str(tmp_path / "out")]) == 0
    questions = [json.loads(x) for x in (tmp_path / "out" / "sap_multi_turn.json").read_text().splitlines()]
    answers = [json.loads(x) for x in (tmp_path / "out/possible_answer/sap_multi_turn.json").read_text().splitlines()]
    assert [q["id"] for q in questions] == [a["id"] for a in answers] == [f"sap_multi_turn_{i}" for i in range(5)]
    assert main(["stats", str(tmp_path / "out" / "sap_multi_turn.json"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out.splitlines()[-1])["records"] == 5
    foreign = dict(recs[0], meta=dict(recs[0]["meta"], toolset="filesystem"))
    src.write_text(json.dumps(foreign) + "\n")
    assert main(["export", str(src), "--format", "bfcl", "-o", str(tmp_path / "out2")]) == 2
    assert "not a BFCL toolset" in capsys.readouterr().err
    with pytest.raises(BfclExportError, match="long_context"):
        to_bfcl(recs, "mine_long_context", load_toolset)


@needs_bfcl
def test_long_context_records_replay_and_export_with_long_context_ids():
    """Long-context loaders link module-level extension records; spending from them must not leak between
    instances, or a replay would see another instance's bookings (seed 1 books on an extension card)."""
    name = "bfcl/TravelAPI:long_context"
    toolset = load_toolset(name)
    records = synthesize(toolset, 5, seed=1, mix={"base": 0.5, "miss_func": 0.5}).records
    assert all(validate_record(r, toolset, i) == [] for i, r in enumerate(records))
    questions, _ = to_bfcl(records, None, load_toolset)
    assert all(q["id"].startswith("sap_multi_turn_long_context_") for q in questions)
    with pytest.raises(BfclExportError, match="must contain"):
        to_bfcl(records, "plain_name", load_toolset)


@needs_bfcl
def test_math_unit_enums_are_the_values_the_conversions_accept():
    ts = load_toolset("bfcl/MathAPI")
    ex = ts.executor_factory()
    ex.reset({})
    si = ts.tool("si_unit_conversion").properties
    assert si["unit_in"]["enum"] == si["unit_out"]["enum"] and len(si["unit_in"]["enum"]) > 2
    for unit_in in si["unit_in"]["enum"]:
        for unit_out in si["unit_out"]["enum"]:
            assert ex.execute(_call("si_unit_conversion", value=3.0, unit_in=unit_in, unit_out=unit_out)).ok
    assert not ex.execute(_call("si_unit_conversion", value=3.0, unit_in="furlong", unit_out="m")).ok
    imperial = ts.tool("imperial_si_conversion").properties
    for unit_in in imperial["unit_in"]["enum"]:  # every unit converts to some other listed unit
        assert any(ex.execute(_call("imperial_si_conversion", value=3.0, unit_in=unit_in, unit_out=out)).ok
                   for out in imperial["unit_out"]["enum"] if out != unit_in)


@needs_bfcl
def test_a_folder_copied_into_itself_is_refused_and_rolled_back():
    ts = load_toolset("bfcl/GorillaFileSystem")
    ex = ts.executor_factory()
    ex.reset({"GorillaFileSystem": {"root": {"ann": {"type": "directory", "contents": {
        "docs": {"type": "directory", "contents": {}}, "a.txt": {"type": "file", "content": "hi"}}}}}})
    before = ex.state()
    res = ex.execute(_call("cp", source="docs", destination="docs"))
    assert not res.ok and "contain itself" in res.error and ex.state() == before
    assert ex.execute(_call("cp", source="a.txt", destination="docs")).ok


@needs_bfcl
def test_file_system_names_come_from_listings_and_the_start_directory_and_math_chains_results():
    """GorillaFileSystem's names exist only as `ls` items and config-tree keys, MathAPI's operands as earlier
    `result`s: both are reachable as provenance sources, so few trajectories end at a failing call."""
    sources = {}
    for name in ("bfcl/GorillaFileSystem", "bfcl/MathAPI"):
        toolset = load_toolset(name)
        summary = synthesize(toolset, 12, seed=3, mix={"base": 1.0})
        assert summary.truncated <= 4, (name, summary.truncated)
        assert all(validate_record(r, toolset, i) == [] for i, r in enumerate(summary.records))
        sources[name] = [(a["tag"], a["source"].get("path") or "") for r in summary.records for p in r["provenance"]
                         for a in p["args"].values() if a["source"]]
    fs = sources["bfcl/GorillaFileSystem"]
    assert any(tag == "prev_output" and path.startswith("$.current_directory_content[") for tag, path in fs)
    assert any(tag == "initial_state" and path.endswith("~") for tag, path in fs)
    assert any(tag == "prev_output" and path == "$.result" for tag, path in sources["bfcl/MathAPI"])


@needs_bfcl
def test_vehicle_results_feed_later_calls_through_the_declared_links():
    """VehicleControlAPI's results name what other tools take: the tire shop is a navigation destination, a
    city's zipcode an end of a distance estimate, a liter conversion the fuel to add."""
    toolset = load_toolset("bfcl/VehicleControlAPI")
    assert "Rivermist" in toolset.tool("get_zipcode_based_on_city").properties["city"]["enum"]  # from the == chain
    fsm = RuleFSMBuilder().build(toolset)
    assert "find_nearest_tire_shop" in fsm.producers["set_navigation"]["destination"]
    assert "liter_to_gallon" in fsm.producers["fillFuelTank"]["fuelAmount"]
    assert "estimate_distance" in fsm.producers["estimate_drive_feasibility_by_mileage"]["distance"]
    assert any(t.provenance_tag.get("set_navigation", {}).get("destination") == Tag.prev_output
               for t in fsm.transitions)
    assert {"set_navigation", "fillFuelTank", "lockDoors"} <= set(fsm.writes)
    assert "find_nearest_tire_shop" not in fsm.writes


@needs_bfcl
def test_trading_lookups_feed_each_other_and_an_order_id_is_never_made_up():
    """TradingBot: a company's symbol, the watch list and a sector's listing are the stocks other tools take; the
    company names are the keys of get_symbol_by_name's table; cancel_order takes an order that exists."""
    toolset = load_toolset("bfcl/TradingBot")
    assert "Gorilla" in toolset.tool("get_symbol_by_name").properties["name"]["enum"]  # a lookup with a fallback
    fsm = RuleFSMBuilder().build(toolset)
    assert "get_symbol_by_name" in fsm.producers["get_stock_info"]["symbol"]
    assert "get_symbol_by_name" in fsm.producers["add_to_watchlist"]["stock"]
    assert "get_available_stocks" in fsm.producers["filter_stocks_by_price"]["stocks"]
    assert "get_watchlist" in fsm.producers["remove_stock_from_watchlist"]["symbol"]
    cancels = [t.provenance_tag["cancel_order"]["order_id"] for t in fsm.transitions if "cancel_order" in t.action]
    assert cancels and Tag.self_create not in cancels  # an integer id names an order: no setting the user picks
    # Buy or Sell is the user's choice: before, order_type was read off an earlier order's details, so no order
    # could be placed before one was looked up (place_order was in 10 of 100 records)
    order_types = {t.provenance_tag["place_order"]["order_type"] for t in fsm.transitions if "place_order" in t.action}
    assert order_types == {Tag.self_create}


@needs_bfcl
def test_a_c0_without_bookings_does_not_hide_the_booking_fields_of_another():
    """The probe keeps results per sampled c0: TravelAPI's flight searches are fed by the booking history even
    though the first sampled traveller has no booking."""
    toolset = load_toolset("bfcl/TravelAPI")
    assert not toolset.sample_config(0)["TravelAPI"]["booking_record"]
    fsm = RuleFSMBuilder().build(toolset)
    assert "get_booking_history" in fsm.producers["get_flight_cost"]["travel_from"]
    assert toolset.tool("book_flight").properties["travel_class"]["enum"] == ["economy", "business", "first"]


def test_a_new_card_is_the_users_own_and_a_flight_may_go_to_the_nearest_airport():
    """register_credit_card describes a new card: its number is never read off the cards already registered (the
    write would register one of them again); book_flight may fly to the airport a search found nearest."""
    fsm = RuleFSMBuilder().build(load_toolset("bfcl/TravelAPI"))
    card_tags = {e.provenance_tag["register_credit_card"]["card_number"] for e in fsm.transitions
                 if "register_credit_card" in e.action}
    assert card_tags == {Tag.self_create}
    assert "get_nearest_airport_by_city" in fsm.producers["book_flight"]["travel_to"]
    assert fsm.producers["book_flight"].get("access_token") == ["authenticate_travel"]


def test_only_a_followed_user_is_unfollowed():
    """unfollow_user's username comes from the following list (c0's or list_all_following's), never a new name:
    unfollowing someone the user does not follow fails in BFCL's TwitterAPI, so the tool was never called."""
    fsm = RuleFSMBuilder().build(load_toolset("bfcl/GorillaFileSystem+TwitterAPI"))
    tags = {e.provenance_tag["unfollow_user"]["username_to_unfollow"] for e in fsm.transitions
            if "unfollow_user" in e.action}
    assert tags and tags <= {Tag.prev_output, Tag.initial_state}
    assert fsm.producers["unfollow_user"]["username_to_unfollow"] == ["list_all_following"]
