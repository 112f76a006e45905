"""Tests for the tool-doc loaders: OpenAI tools JSON, BFCL func-doc JSON lines and Python classes."""
import json
from typing import Literal, Optional

import pytest

from sap.model import ToolSpec
from sap.toolsets.loaders import (
    ToolDocError,
    load_bfcl_func_doc,
    load_openai_tools,
    load_tool_docs,
    tools_from_class,
    validate_tool_spec,
)

GET_ORDER = {
    "name": "get_order",
    "description": "Look up an order by id.",
    "parameters": {
        "type": "object",
        "properties": {
            "order_id": {"type": "string", "description": "The order id."},
            "status": {"type": "string", "enum": ["open", "closed"], "description": "Status filter."},
        },
        "required": ["order_id"],
    },
    "response": {"type": "object", "properties": {"total": {"type": "number"}}},
    "read_only": True,
}

BFCL_LS = {
    "name": "GorillaFileSystem.ls",
    "description": "List the directory.",
    "parameters": {
        "type": "dict",
        "properties": {
            "a": {"type": "boolean", "description": "Show hidden files."},
            "size": {"type": "float", "description": "Minimum size."},
            "point": {"type": "tuple", "items": {"type": "integer"}},
            "entries": {
                "type": "array",
                "items": {"type": "dict", "properties": {"name": {"type": "string"}, "extra": {"type": "any"}}},
            },
            "anything": {"type": "any", "description": "Any value."},
        },
        "required": ["a"],
        "optional": [],
    },
    "response": {"type": "dict", "properties": {"current_directory_content": {"type": "array", "items": {"type": "string"}}}},
}


def write_json(tmp_path, name, data):
    path = tmp_path / name
    path.write_text(json.dumps(data, indent=2), encoding="utf-8")
    return path


def write_lines(tmp_path, name, rows):
    path = tmp_path / name
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    return path


def assert_located(exc: ToolDocError, file, tool, field, *fragments):
    assert exc.file == str(file)
    assert exc.tool == tool
    assert exc.field == field
    text = str(exc)
    assert text.startswith(f"{file}: ")
    assert (f"tool {tool}" if tool.startswith("#") else f"tool {tool!r}") in text
    if field is not None:
        assert f"field {field!r}" in text
    for fragment in fragments:
        assert fragment in text


# ----- ToolDocError ----------------------------------------------------------


def test_error_str_format():
    exc = ToolDocError("unknown JSON type 'strng'", file="tools.json", tool="get_order", field="parameters.properties.order_id.type")
    assert str(exc) == "tools.json: tool 'get_order' field 'parameters.properties.order_id.type': unknown JSON type 'strng'"
    assert isinstance(exc, ValueError)
    assert str(ToolDocError("missing tool name", file="t.json", tool="#2", field="name")) == "t.json: tool #2 field 'name': missing tool name"
    assert str(ToolDocError("no such file", file="x.json")) == "x.json: no such file"


# ----- OpenAI ----------------------------------------------------------------


def test_openai_wrapped_list(tmp_path):
    path = write_json(tmp_path, "tools.json", [{"type": "function", "function": GET_ORDER}])
    [spec] = load_openai_tools(path)
    assert isinstance(spec, ToolSpec)
    assert spec.name == "get_order"
    assert spec.description == "Look up an order by id."
    assert spec.required == ["order_id"]
    assert spec.properties["order_id"] == {"type": "string", "description": "The order id."}
    assert spec.properties["status"]["enum"] == ["open", "closed"]
    assert spec.response == {"type": "object", "properties": {"total": {"type": "number"}}}
    assert spec.read_only is True
    assert spec.owner is None


def test_openai_tools_dict_and_bare_functions(tmp_path):
    no_params = {"name": "logout", "description": "Log out."}
    path = write_json(tmp_path, "tools.json", {"tools": [GET_ORDER, {"type": "function", "function": no_params}]})
    specs = load_openai_tools(path)
    assert [s.name for s in specs] == ["get_order", "logout"]
    assert specs[1].parameters == {"type": "object", "properties": {}, "required": []}
    assert specs[1].response is None and specs[1].read_only is None


def test_openai_rejects_non_function_tool(tmp_path):
    path = write_json(tmp_path, "tools.json", [{"type": "web_search"}])
    with pytest.raises(ToolDocError) as info:
        load_openai_tools(path)
    assert_located(info.value, path, "#0", "type", "unsupported tool type 'web_search'")


# ----- BFCL ------------------------------------------------------------------


def test_bfcl_converts_types_recursively(tmp_path):
    other = {"name": "pwd", "description": "Print the working directory.", "parameters": {"type": "dict", "properties": {}, "required": []}}
    path = write_lines(tmp_path, "gorilla_file_system.json", [BFCL_LS, other])
    ls, pwd = load_bfcl_func_doc(path)
    assert ls.name == "GorillaFileSystem.ls"
    assert ls.description == "List the directory."
    assert ls.parameters["type"] == "object"
    assert ls.required == ["a"]
    props = ls.properties
    assert props["a"] == {"type": "boolean", "description": "Show hidden files."}
    assert props["size"]["type"] == "number"
    assert props["point"] == {"type": "array", "items": {"type": "integer"}}
    item = props["entries"]["items"]
    assert item["type"] == "object"
    assert item["properties"]["name"] == {"type": "string"}
    assert item["properties"]["extra"] == {}
    assert props["anything"] == {"description": "Any value."}
    assert ls.response == {
        "type": "object",
        "properties": {"current_directory_content": {"type": "array", "items": {"type": "string"}}},
    }
    assert pwd.parameters["type"] == "object" and pwd.properties == {} and pwd.required == []


def test_bfcl_does_not_mutate_or_accept_bfcl_types_in_openai(tmp_path):
    path = write_json(tmp_path, "tools.json", [BFCL_LS])
    with pytest.raises(ToolDocError) as info:
        load_openai_tools(path)
    assert_located(info.value, path, "GorillaFileSystem.ls", "parameters.type", "unknown JSON type 'dict'")
    assert BFCL_LS["parameters"]["type"] == "dict"


def test_bfcl_bad_json_reports_line(tmp_path):
    path = tmp_path / "func.jsonl"
    path.write_text(json.dumps(BFCL_LS) + "\n\n" + '{"name": "cd", "description": oops}\n', encoding="utf-8")
    with pytest.raises(ToolDocError) as info:
        load_bfcl_func_doc(path)
    assert info.value.file == str(path)
    assert "line 3 column" in str(info.value)
    assert str(info.value).startswith(f"{path}: invalid JSON")


# ----- load_tool_docs --------------------------------------------------------


def test_load_tool_docs_dispatch(tmp_path):
    jsonl = write_lines(tmp_path, "one.jsonl", [BFCL_LS])
    assert load_tool_docs(jsonl)[0].parameters["type"] == "object"
    sniffed = write_lines(tmp_path, "gfs.json", [BFCL_LS, {**BFCL_LS, "name": "cd"}])
    assert [s.name for s in load_tool_docs(sniffed)] == ["GorillaFileSystem.ls", "cd"]
    assert load_tool_docs(sniffed)[0].properties["size"]["type"] == "number"
    openai = write_json(tmp_path, "tools.json", {"tools": [{"type": "function", "function": GET_ORDER}]})
    assert [s.name for s in load_tool_docs(openai)] == ["get_order"]
    one_line = tmp_path / "flat.json"
    one_line.write_text(json.dumps([GET_ORDER]), encoding="utf-8")
    assert [s.name for s in load_tool_docs(one_line)] == ["get_order"]


# ----- malformed docs --------------------------------------------------------


def test_missing_file(tmp_path):
    path = tmp_path / "nope.json"
    for loader in (load_openai_tools, load_bfcl_func_doc, load_tool_docs):
        with pytest.raises(ToolDocError) as info:
            loader(path)
        assert info.value.file == str(path)
        assert str(path) in str(info.value) and "no such file" in str(info.value)


def test_bad_json_reports_line_and_column(tmp_path):
    path = tmp_path / "tools.json"
    path.write_text('[\n  {"name": "a",\n   "description": "x",,\n  }\n]\n', encoding="utf-8")
    with pytest.raises(ToolDocError) as info:
        load_openai_tools(path)
    assert info.value.file == str(path)
    assert "line 3 column 23" in str(info.value)


def test_missing_name(tmp_path):
    path = write_json(tmp_path, "tools.json", [GET_ORDER, {"description": "nameless", "parameters": {"type": "object", "properties": {}}}])
    with pytest.raises(ToolDocError) as info:
        load_openai_tools(path)
    assert_located(info.value, path, "#1", "name", "missing tool name")


def test_invalid_name(tmp_path):
    path = write_json(tmp_path, "tools.json", [{**GET_ORDER, "name": "get order"}])
    with pytest.raises(ToolDocError) as info:
        load_openai_tools(path)
    assert_located(info.value, path, "#0", "name", "invalid tool name 'get order'")


def test_required_names_unknown_property(tmp_path):
    bad = json.loads(json.dumps(GET_ORDER))
    bad["parameters"]["required"] = ["order_id", "customer_id"]
    path = write_json(tmp_path, "tools.json", [bad])
    with pytest.raises(ToolDocError) as info:
        load_openai_tools(path)
    assert_located(info.value, path, "get_order", "parameters.required", "'customer_id'")


def test_nested_required_checked(tmp_path):
    row = json.loads(json.dumps(BFCL_LS))
    row["parameters"]["properties"]["entries"]["items"]["required"] = ["size"]
    path = write_lines(tmp_path, "func.jsonl", [row])
    with pytest.raises(ToolDocError) as info:
        load_bfcl_func_doc(path)
    assert_located(info.value, path, "GorillaFileSystem.ls", "parameters.properties.entries.items.required", "'size'")


def test_unknown_type(tmp_path):
    bad = json.loads(json.dumps(GET_ORDER))
    bad["parameters"]["properties"]["order_id"]["type"] = "strng"
    path = write_json(tmp_path, "tools.json", [bad])
    with pytest.raises(ToolDocError) as info:
        load_openai_tools(path)
    assert str(info.value) == f"{path}: tool 'get_order' field 'parameters.properties.order_id.type': unknown JSON type 'strng'"


def test_unknown_nested_bfcl_type(tmp_path):
    row = json.loads(json.dumps(BFCL_LS))
    row["parameters"]["properties"]["entries"]["items"]["properties"]["name"]["type"] = "str"
    path = write_lines(tmp_path, "func.jsonl", [row])
    with pytest.raises(ToolDocError) as info:
        load_bfcl_func_doc(path)
    assert_located(info.value, path, "GorillaFileSystem.ls", "parameters.properties.entries.items.properties.name.type", "'str'")


def test_property_without_type(tmp_path):
    bad = json.loads(json.dumps(GET_ORDER))
    bad["parameters"]["properties"]["order_id"] = {"description": "The order id."}
    path = write_json(tmp_path, "tools.json", [bad])
    with pytest.raises(ToolDocError) as info:
        load_openai_tools(path)
    assert_located(info.value, path, "get_order", "parameters.properties.order_id", "no 'type'")


def test_anyof_property_accepted(tmp_path):
    tool = json.loads(json.dumps(GET_ORDER))
    tool["parameters"]["properties"]["note"] = {"anyOf": [{"type": "string"}, {"type": "null"}]}
    [spec] = load_openai_tools(write_json(tmp_path, "tools.json", [tool]))
    assert spec.properties["note"]["anyOf"][1] == {"type": "null"}


def test_bad_description_and_parameters(tmp_path):
    path = write_json(tmp_path, "tools.json", [{**GET_ORDER, "description": 3}])
    with pytest.raises(ToolDocError) as info:
        load_openai_tools(path)
    assert_located(info.value, path, "get_order", "description", "must be a string")
    path = write_json(tmp_path, "tools2.json", [{**GET_ORDER, "parameters": {"type": "object", "properties": []}}])
    with pytest.raises(ToolDocError) as info:
        load_openai_tools(path)
    assert_located(info.value, path, "get_order", "parameters.properties", "must be a JSON object")


def test_duplicate_names(tmp_path):
    path = write_lines(tmp_path, "func.jsonl", [BFCL_LS, BFCL_LS])
    with pytest.raises(ToolDocError) as info:
        load_bfcl_func_doc(path)
    assert_located(info.value, path, "GorillaFileSystem.ls", "name", "duplicate tool name", "#0")


def test_validate_tool_spec_directly():
    spec = validate_tool_spec(GET_ORDER, "tools.json", 0)
    assert spec.name == "get_order" and spec.required == ["order_id"]
    with pytest.raises(ToolDocError) as info:
        validate_tool_spec({**GET_ORDER, "read_only": "yes"}, "tools.json", 4)
    assert str(info.value).startswith("tools.json: tool 'get_order' field 'read_only':")


# ----- Python classes --------------------------------------------------------


class Shop:
    """A toy shop."""

    def __init__(self) -> None:
        self.orders: dict = {}

    def get_order(self, order_id: str, status: Literal["open", "closed"] = "open", note: Optional[str] = None, limit: int = 5) -> dict:
        """Look up an order.

        Args:
            order_id: The order id, e.g. "#W1".
            status: Which orders to match.
            note: A free-text note.
            limit: At most this many results.

        Returns:
            The order.
        """
        return {}

    def _private(self, x: int) -> None:
        """Not a tool."""

    @staticmethod
    def ping(host: str) -> dict:
        """Ping a host.

        Args:
            host: The host name.
        """
        return {}

    @classmethod
    def make(cls, kind: str) -> dict:
        """Make something.

        Args:
            kind: What to make.
        """
        return {}

    def add_items(self, item_ids: list[str], quantity: int) -> dict:
        """Add items to the cart.

        Args:
            item_ids: The item ids.
            quantity: How many of each.
        """
        return {}

    banner = "not callable"


def test_tools_from_class():
    specs = tools_from_class(Shop)
    assert [s.name for s in specs] == ["get_order", "ping", "make", "add_items"]
    assert all(s.owner == "Shop" for s in specs)
    get_order = specs[0]
    assert "self" not in get_order.properties
    assert list(get_order.properties) == ["order_id", "status", "note", "limit"]
    assert get_order.description == "Look up an order."
    assert get_order.required == ["order_id"]
    props = get_order.properties
    assert props["order_id"]["type"] == "string"
    assert props["order_id"]["description"] == 'The order id, e.g. "#W1".'
    assert props["status"]["enum"] == ["open", "closed"]
    assert props["status"]["default"] == "open"
    assert props["note"]["description"] == "A free-text note."
    assert {"type": "null"} in props["note"]["anyOf"]
    assert props["limit"] == {"type": "integer", "default": 5, "description": "At most this many results."}
    assert specs[1].properties == {"host": {"type": "string", "description": "The host name."}}
    assert "cls" not in specs[2].properties and specs[2].required == ["kind"]
    assert specs[3].properties["item_ids"]["type"] == "array"
    assert specs[3].properties["item_ids"]["items"] == {"type": "string"}
    assert specs[3].required == ["item_ids", "quantity"]


def test_tools_from_class_owner_and_inheritance():
    class BigShop(Shop):
        def refund(self, order_id: str) -> dict:
            """Refund an order.

            Args:
                order_id: The order id.
            """
            return {}

    specs = tools_from_class(BigShop, owner="shop")
    assert [s.name for s in specs] == ["get_order", "ping", "make", "add_items", "refund"]
    assert {s.owner for s in specs} == {"shop"}


def test_self_dropped_even_when_not_named_self():
    class Odd:
        def lookup(this, key: str) -> str:  # noqa: N805
            """Look a key up.

            Args:
                key: The key.
            """
            return key

    [spec] = tools_from_class(Odd)
    assert list(spec.properties) == ["key"] and spec.required == ["key"]


def test_class_method_without_docstring():
    class NoDoc:
        def documented(self, x: int) -> int:
            """Fine.

            Args:
                x: A number.
            """
            return x

        def bare(self, x: int) -> int:
            return x

    with pytest.raises(ToolDocError) as info:
        tools_from_class(NoDoc)
    exc = info.value
    assert exc.tool == "NoDoc.bare" and exc.field == "description"
    assert "tool 'NoDoc.bare'" in str(exc) and "no docstring" in str(exc)


def test_class_parameter_without_hint():
    class NoHint:
        def find(self, name: str, limit) -> dict:
            """Find things.

            Args:
                name: The name.
                limit: How many.
            """
            return {}

    with pytest.raises(ToolDocError) as info:
        tools_from_class(NoHint)
    exc = info.value
    assert exc.tool == "NoHint.find"
    assert exc.field == "parameters.properties.limit"
    assert "tool 'NoHint.find'" in str(exc) and "'limit'" in str(exc) and "no type hint" in str(exc)


def test_store_domain_loads():
    from sap.toolsets.domains.store import OnlineStore

    specs = tools_from_class(OnlineStore)
    names = [s.name for s in specs]
    assert names[0] == "login_by_email" and "checkout" in names
    assert not any(n.startswith("_") for n in names)
    assert all(s.description and "self" not in s.properties for s in specs)
    cancel = next(s for s in specs if s.name == "cancel_pending_order")
    assert cancel.properties["reason"]["enum"] == ["no longer needed", "ordered by mistake"]


def test_docstring_sections_and_continued_argument_lines():
    class Notes:
        def write(self, title: str, body: str = "") -> dict:
            """Write a note.

            Keeps it in the notebook.

            Args:
                title: The note's title,
                    as shown in the list.
                body: Its text.

            Returns:
                title: not an argument.
            """
            return {}

    [spec] = tools_from_class(Notes)
    assert spec.description == "Write a note.\n\nKeeps it in the notebook."
    assert spec.properties["title"] == {"description": "The note's title, as shown in the list.", "type": "string"}
    assert spec.properties["body"]["description"] == "Its text." and spec.required == ["title"]
