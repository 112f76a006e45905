"""`sap audit`: each check on hand-made records that must pass and must fail, thresholds, and bad input."""
from __future__ import annotations

import json

import pytest

from sap.audit import AuditInputError, audit_file, parse_thresholds
from sap.audit.checks import CHECKS
from sap.audit.dialogues import AuditCall, AuditDialogue
from sap.cli.main import main
from sap.executors.bfcl import BFCL_FAILURE_SHAPES
from sap.executors.failures import FailureShape, failure_text

LS = {"current_directory_content": ["a.txt", "b.txt", "c.txt"]}
TOOLS = {"mv": {"description": "Move a file or directory from one location to another.",
                "parameters": {"properties": {"source": {}, "destination": {}}}}}


def dialogue(users: dict[int, str], calls: list[AuditCall], **kw) -> AuditDialogue:
    """A hand-made dialogue."""
    return AuditDialogue("r1", users, calls, tools=kw.get("tools", TOOLS), read_only=kw.get("read_only", {}))


def flawed(check: str, d: AuditDialogue) -> int:
    """How many items `check` finds flawed in `d`."""
    return len(CHECKS[check](d)[1])


def po(turn: int = 0, call: int = 0, path: str = "$.x") -> dict:
    """A declared prev_output provenance entry."""
    return {"tag": "prev_output", "source": {"turn": turn, "call": call, "path": path}}


def test_ambiguous_reference_needs_the_value_or_a_distinguishing_word():
    ls = AuditCall(0, "ls", {}, LS, {})
    mv = lambda: AuditCall(1, "mv", {"source": "b.txt", "destination": "x"}, {}, {"source": po()})  # noqa: E731
    assert flawed("ambiguous_reference", dialogue({0: "list", 1: "move the file from the listing to x"},
                                                  [ls, mv()])) == 1
    assert flawed("ambiguous_reference", dialogue({0: "list", 1: "move b.txt to x"}, [ls, mv()])) == 0
    assert flawed("ambiguous_reference", dialogue({0: "list", 1: "move the second file listed to x"}, [ls, mv()])) == 0
    single = AuditCall(0, "ls", {}, {"current_directory_content": ["b.txt"]}, {})
    assert flawed("ambiguous_reference", dialogue({0: "list", 1: "move that file to x"}, [single, mv()])) == 0



def test_a_reference_is_ambiguous_only_where_what_it_could_mean_differs():
    """Several results of the source's tool that agree at the value's place (the same user ID in each order), the
    whole list as the value ("the items of my order"), and an ordinal past the fifth are no ambiguity; several
    results that disagree there are."""
    order = lambda oid, user: AuditCall(0, "get_order", {}, {"order_id": oid, "user_id": user}, {})  # noqa: E731
    update = AuditCall(1, "update_user", {"user_id": "u1"}, {}, {"user_id": po(0, 1, "$.user_id")})
    text = {0: "show both orders", 1: "update my account"}
    assert flawed("ambiguous_reference", dialogue(text, [order("#1", "u1"), order("#2", "u1"), update])) == 0
    other = AuditCall(1, "update_user", {"user_id": "u1"}, {}, {"user_id": po(0, 0, "$.user_id")})
    assert flawed("ambiguous_reference", dialogue(text, [order("#1", "u1"), order("#2", "u2"), other])) == 1
    items = AuditCall(0, "get_order", {}, {"item_ids": ["i1", "i2"]}, {})
    ret = AuditCall(1, "return_items", {"item_ids": ["i1", "i2"]}, {}, {"item_ids": po(0, 0, "$.item_ids")})
    assert flawed("ambiguous_reference", dialogue({0: "show it", 1: "return the items"}, [items, ret])) == 0
    many = AuditCall(0, "ls", {}, {"current_directory_content": [f"{c}.txt" for c in "abcdefghij"]}, {})
    ninth = AuditCall(1, "mv", {"source": "i.txt", "destination": "x"}, {}, {"source": po()})
    assert flawed("ambiguous_reference", dialogue({0: "list", 1: "move the ninth file to x"}, [many, ninth])) == 0


def test_a_one_character_value_counts_as_said_only_as_a_token_of_its_own():
    listing = AuditCall(0, "ls", {}, {"current_directory_content": ["a", "b"]}, {})
    mv = AuditCall(1, "mv", {"source": "a", "destination": "x"}, {}, {"source": po()})
    assert flawed("ambiguous_reference", dialogue({0: "list", 1: 'move the file "a" to x'}, [listing, mv])) == 0
    assert flawed("ambiguous_reference", dialogue({0: "list", 1: "move a file to x"}, [listing, mv])) == 1
    assert flawed("ambiguous_reference", dialogue({0: "list", 1: "move that one to x"}, [listing, mv])) == 1
    seven = AuditCall(1, "get_ticket", {"ticket_id": 7}, {}, {"ticket_id": po()})
    tickets = AuditCall(0, "list_tickets", {}, {"tickets": [{"id": 7}, {"id": 17}]}, {})
    assert flawed("ambiguous_reference", dialogue({0: "list", 1: "open ticket 7"}, [tickets, seven])) == 0
    assert flawed("ambiguous_reference", dialogue({0: "list", 1: "open ticket 17's twin"}, [tickets, seven])) == 1

def test_noop_write_by_replay_and_by_earlier_reads():
    assert flawed("noop_write", dialogue({}, [AuditCall(0, "set_x", {"x": 1}, {}, changed=False)])) == 1
    assert flawed("noop_write", dialogue({}, [AuditCall(0, "set_x", {"x": 1}, {}, changed=True)])) == 0
    read = AuditCall(0, "get_user", {"user_id": "u"}, {"address": {"city": "Oslo"}})
    same = AuditCall(1, "update_address", {"user_id": "u", "city": "Oslo"}, {})
    other = AuditCall(1, "update_address", {"user_id": "u", "city": "Rome"}, {})
    assert flawed("noop_write", dialogue({}, [read, same])) == 1
    assert flawed("noop_write", dialogue({}, [read, other])) == 0


def test_repeated_call_only_without_a_state_change_between():
    a = AuditCall(0, "get_x", {"k": 1}, {}, changed=False)
    write = AuditCall(1, "set_x", {"k": 2}, {}, changed=True)
    assert flawed("repeated_call", dialogue({}, [a, AuditCall(1, "get_x", {"k": 1}, {}, changed=False)])) == 1
    assert flawed("repeated_call", dialogue({}, [a, write, AuditCall(2, "get_x", {"k": 1}, {}, changed=False)])) == 0


@pytest.mark.parametrize("result", [{"error": "no"}, [{"error": "User not authenticated."}], ["Error: nope"],
                                    "Error: Order not found", {"authentication_status": False}])
def test_error_result_catches_every_shape(result):
    assert flawed("error_result", dialogue({}, [AuditCall(0, "authenticate_twitter", {}, result)])) == 1


def test_error_result_passes_normal_answers_and_tool_specific_shapes():
    assert flawed("error_result", dialogue({}, [AuditCall(0, "posting_get_login_status", {}, {"login_status": False}),
                                                AuditCall(0, "ls", {}, LS)])) == 0
    assert flawed("error_result", dialogue({}, [AuditCall(0, "message_login", {}, {"login_status": False})])) == 1


def test_soft_failure_of_each_declared_shape_fails_and_its_true_passes():
    for shape in BFCL_FAILURE_SHAPES:
        tool = next(iter(shape.tools), "any_tool")
        assert failure_text(tool, {shape.field: False}, BFCL_FAILURE_SHAPES) is not None
        assert failure_text(tool, {shape.field: True}, BFCL_FAILURE_SHAPES) is None
    assert failure_text("t", {"ok": 0}, (FailureShape("ok"),)) is None  # 0 is not False


def test_placeholder_value_for_names_but_not_files():
    sc = {"tag": "self_create"}
    bad = AuditCall(0, "buy", {"symbol": "archive_report"}, {}, {"symbol": sc})
    good = AuditCall(0, "buy", {"symbol": "AAPL"}, {}, {"symbol": sc})
    file = AuditCall(0, "touch", {"file_name": "archive_report"}, {}, {"file_name": sc})
    assert flawed("placeholder_value", dialogue({}, [bad])) == 1
    assert flawed("placeholder_value", dialogue({}, [good, file])) == 0


def test_a_value_the_doc_offers_is_no_placeholder():
    sc = {"tag": "self_create"}
    tools = {"auth": {"parameters": {"properties": {
        "grant_type": {"description": "Here are the options: read_write, read, write"},
        "scope": {"enum": ["read_only", "all"]}, "note": {"description": "Any note."}}}}}
    offered = AuditCall(0, "auth", {"grant_type": "read_write", "scope": "read_only"}, {},
                        {"grant_type": sc, "scope": sc})
    invented = AuditCall(0, "auth", {"note": "draft_ideas"}, {}, {"note": sc})
    assert flawed("placeholder_value", dialogue({}, [offered], tools=tools)) == 0
    assert flawed("placeholder_value", dialogue({}, [invented], tools=tools)) == 1


def test_internals_leak_of_raw_names_paths_and_positions():
    calls = [AuditCall(0, "set_pedal", {"pedalPosition": 0.3}, {})]
    for text in ("keep in mind the pedalPosition will be 0.3", "use $.orders[0].id", "the result of turn 1 call 0",
                 "please set_pedal now"):
        assert flawed("internals_leak", dialogue({0: text}, calls)) == 1
    assert flawed("internals_leak", dialogue({0: "press the pedal to 0.3"}, calls)) == 0


def test_dictated_call_is_the_tools_own_description():
    mv = [AuditCall(0, "mv", {"source": "a", "destination": "b"}, {})]
    assert flawed("dictated_call", dialogue({0: "Please move a file or directory from one location to another"},
                                            mv)) == 1
    assert flawed("dictated_call", dialogue({0: "Put a.txt into the b folder"}, mv)) == 0


def test_thresholds_parse_and_reject():
    assert parse_thresholds("error_result=0,repeated_call=2%") == {"error_result": 0.0, "repeated_call": 0.02}
    with pytest.raises(ValueError, match="unknown check 'nope'"):
        parse_thresholds("nope=1")


def _openai(tmp_path, records) -> str:
    path = tmp_path / "data.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return str(path)


def test_openai_file_audit_and_fail_on_exit(tmp_path, capsys):
    rec = {"id": "x", "messages": [
        {"role": "user", "content": "log me in"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "login", "arguments": "{\"user\": \"bob\"}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "{\"error\": \"bad password\"}"}]}
    path = _openai(tmp_path, [rec])
    report = audit_file(path)
    assert report.format == "openai" and len(report.findings["error_result"]) == 1
    assert main(["audit", path, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["checks"]["error_result"]["count"] == 1
    assert main(["audit", path, "--fail-on", "error_result=0"]) == 1


@pytest.mark.parametrize("content,where", [("", ":1: empty file"), ("{\"a\": 1}\n", ":1: unknown record format"),
                                           ("not json\n", ":1")])
def test_bad_input_is_one_line_naming_file_and_line(tmp_path, capsys, content, where):
    path = tmp_path / "bad.jsonl"
    path.write_text(content)
    with pytest.raises(AuditInputError, match=str(path)):
        audit_file(path)
    assert main(["audit", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert str(path) + where.split(":", 2)[0] in err and where.split(" ")[0] in err and "\n" not in err


def test_a_write_verb_after_a_namespace_is_a_change_between_repeated_calls() -> None:
    calls = [AuditCall(0, "git_reset", {"repo_path": "/w"}, "reset"),
             AuditCall(1, "git_add", {"repo_path": "/w", "files": ["a"]}, "staged"),
             AuditCall(2, "git_reset", {"repo_path": "/w"}, "reset")]
    assert flawed("repeated_call", dialogue({0: "", 1: "", 2: ""}, calls)) == 0
    looked = [AuditCall(0, "git_status", {"repo_path": "/w"}, "clean"),
              AuditCall(1, "git_log", {"repo_path": "/w"}, "log"),
              AuditCall(2, "git_status", {"repo_path": "/w"}, "clean")]
    assert flawed("repeated_call", dialogue({0: "", 1: "", 2: ""}, looked)) == 1  # git_log writes nothing


def test_a_git_commit_between_two_status_reads_is_a_write_without_a_replay():
    from sap.audit.checks import is_write, repeated_call

    calls = [AuditCall(0, "git_status", {"repo_path": "/w"}, "On branch main"),
             AuditCall(1, "git_commit", {"repo_path": "/w", "message": "m"}, "Changes committed"),
             AuditCall(2, "git_status", {"repo_path": "/w"}, "On branch main")]
    d = AuditDialogue("mcp", {0: "status", 1: "commit", 2: "status"}, calls)  # an MCP record: not replayed
    assert is_write(d, "git_commit") and is_write(d, "git_checkout") and not is_write(d, "git_status")
    assert repeated_call(d)[1] == []


def test_an_element_is_not_ambiguous_among_siblings_that_lack_its_field():
    bookings = {"bookings": [{"booking_id": "BK1", "booking_type": "hotel", "city": "Lisbon"},
                             {"booking_id": "BK2", "booking_type": "flight", "origin_location_id": "LOC8"}]}
    routes = AuditCall(0, "get_flight_routes", {"origin_location_id": "LOC8"}, {"routes": []},
                       prov={"origin_location_id": {"tag": "prev_output", "source": {"turn": 0, "call": 0}}})
    users = {0: "Work out the direct routes out of my departure location."}
    d = AuditDialogue("t", users, [AuditCall(0, "list_bookings", {}, bookings), routes])
    assert flawed("ambiguous_reference", d) == 0  # only the flight booking has a departure location
    both = {"bookings": [{**bookings["bookings"][0], "origin_location_id": "LOC9"}, bookings["bookings"][1]]}
    d2 = AuditDialogue("t", users, [AuditCall(0, "list_bookings", {}, both), routes])
    assert flawed("ambiguous_reference", d2) == 1  # two departure locations: which one?


def test_a_value_only_one_result_holds_names_that_result():
    watch = {"name": "Smart Watch", "variants": {"11": {"item_id": "11", "price": 381.87}}}
    purifier = {"name": "Air Purifier", "variants": {"22": {"item_id": "22", "price": 489.5}}}
    swap = AuditCall(1, "exchange", {"new_item_ids": ["22"]}, {"ok": True},
                     prov={"new_item_ids": {"tag": "prev_output", "source": {"turn": 0, "call": 1}}})
    lookups = [AuditCall(0, "get_product_details", {"product_id": "w"}, watch),
               AuditCall(0, "get_product_details", {"product_id": "p"}, purifier)]
    said_price = AuditDialogue("x", {0: "show both", 1: "exchange it for the variant at $489.50"}, [*lookups, swap])
    assert flawed("ambiguous_reference", said_price) == 0
    unsaid = AuditDialogue("x", {0: "show both", 1: "exchange it for that variant"}, [*lookups, swap])
    assert flawed("ambiguous_reference", unsaid) == 1
