"""Cache executor validators: every kind of refusal, in the structured shape a real API gives, before any lookup."""
from __future__ import annotations

import pytest

from sap.cache import NO_RESULTS, CacheExecutor, CacheIndex, ParamRule, ToolRules, ToolValidator
from sap.model import ArgProvenance, Tag, ToolCall, ToolSpec

SPEC = ToolSpec(name="search_places", description="Find places.", parameters={
    "type": "object",
    "properties": {
        "query": {"type": "string", "minLength": 2},
        "limit": {"type": "integer", "minimum": 1, "maximum": 50},
        "sort": {"type": "string", "enum": ["price", "rating"]},
        "zip": {"type": "string", "pattern": "^[0-9]{5}$"},
        "check_in": {"type": "string", "description": "Arrival, in YYYY-MM-DD format."},
        "check_out": {"type": "string", "description": "Departure, in YYYY-MM-DD format, after check_in."},
        "latitude": {"type": "number"},
        "longitude": {"type": "number"},
        "place_id": {"type": "string"},
        "city": {"type": "string"},
        "status": {"anyOf": [{"type": "string", "enum": ["open", "closed"]}, {"type": "null"}]},
    },
    "required": ["query"],
})
RULES = ToolRules(params={"check_in": ParamRule(min_date="2026-01-01", max_date="2026-12-31"),
                          "limit": ParamRule(maximum=20)},
                  exclusive=[["place_id", "city"]])


@pytest.mark.parametrize("args,code,param", [
    ({}, "missing_required", "query"),
    ({"query": "spa", "colour": "red"}, "unknown_parameter", "colour"),
    ({"query": 42}, "invalid_type", "query"),
    ({"query": "spa", "limit": True}, "invalid_type", "limit"),
    ({"query": "spa", "sort": "distance"}, "invalid_enum", "sort"),
    ({"query": "spa", "status": "pending"}, "invalid_enum", "status"),
    ({"query": "spa", "limit": 0}, "out_of_range", "limit"),
    ({"query": "spa", "limit": 30}, "out_of_range", "limit"),  # the schema allows 50, the tool's rule 20
    ({"query": "s"}, "out_of_range", "query"),
    ({"query": "spa", "zip": "9021"}, "invalid_pattern", "zip"),
    ({"query": "spa", "check_in": "03/04/2026"}, "invalid_date", "check_in"),
    ({"query": "spa", "check_in": "2026-02-30"}, "invalid_date", "check_in"),
    ({"query": "spa", "check_in": "2027-01-02"}, "date_out_of_range", "check_in"),
    ({"query": "spa", "latitude": 91.5}, "invalid_coordinate", "latitude"),
    ({"query": "spa", "longitude": -180.5}, "invalid_coordinate", "longitude"),
    ({"query": "spa", "place_id": "P1", "city": "Oslo"}, "mutually_exclusive", "city"),
    ({"query": "spa", "check_in": "2026-03-04", "check_out": "2026-03-04"}, "invalid_order", "check_out"),
])
def test_each_kind_of_violation_is_reported_with_its_code_and_parameter(args, code, param):
    violation = ToolValidator(SPEC, RULES).check(args)
    assert violation is not None and (violation.code, violation.param) == (code, param)
    body = violation.response()["error"]
    assert body["status"] == 400 and body["code"] == code and body["param"] == param
    assert param in body["message"]


def test_valid_arguments_pass_every_check():
    args = {"query": "spa", "limit": 20, "sort": "price", "zip": "90210", "check_in": "2026-03-04",
            "check_out": "2026-03-06", "latitude": -33.9, "longitude": 151.2, "city": "Oslo", "status": None}
    assert ToolValidator(SPEC, RULES).check(args) is None


def _call(args: dict) -> ToolCall:
    return ToolCall(call_id="c", name="search_places", args_exec=args,
                    args_prov={k: ArgProvenance(tag=Tag.self_create) for k in args})


def test_executor_validates_before_lookup_and_answers_a_miss_without_naming_the_cache():
    index = CacheIndex()
    index.add("search_places", {"query": "spa", "limit": 5}, {"places": [{"id": "P1"}]})
    ex = CacheExecutor(index, [SPEC], {"search_places": RULES})
    hit = ex.execute(_call({"limit": 5, "query": "spa"}))  # argument order does not matter
    assert hit.ok and hit.value == {"places": [{"id": "P1"}]}
    bad = ex.execute(_call({"query": "spa", "limit": 500}))
    assert not bad.ok and bad.value["error"]["code"] == "out_of_range" and "limit" in bad.error
    miss = ex.execute(_call({"query": "spa", "limit": 6}))
    assert not miss.ok and miss.value == NO_RESULTS and "cache" not in miss.error.lower()
    unknown = ex.execute(ToolCall(call_id="c", name="nope", args_exec={}, args_prov={}))
    assert not unknown.ok and unknown.value["error"]["code"] == "unknown_function"
