"""Valid parameter values read from a method's code: dict-literal keys, comprehensions over them, f-string keys,
lookups with a fallback."""
from sap.toolsets.code_enums import accepted_combinations, checked_values


def convert(value: float, unit_in: str, unit_out: str) -> dict:
    to_base = {"km": 1000, "m": 1, "cm": 0.01}
    from_base = {unit: 1 / factor for unit, factor in to_base.items()}
    if unit_in not in to_base or unit_out not in from_base:
        return {"error": "unsupported"}
    return {"result": value * to_base[unit_in] * from_base[unit_out]}


def pairwise(value: float, unit_in: str, unit_out: str) -> dict:
    table = {"cm_to_in": 0.39, "in_to_cm": 2.54, "kg_to_lb": 2.2}
    key = f"{unit_in}_to_{unit_out}"
    if key not in table:
        return {"error": "unsupported"}
    return {"result": value * table[key]}


def unchecked(mode: str, label: str) -> dict:
    modes = {"fast": 1, "slow": 2}
    other = {"x": 1}
    if label in other.values():  # not a membership test against a dict's keys by name
        return {}
    return {"speed": modes.get(mode)}


def symbol_of(name: str, sector: str, mode: str) -> dict:
    symbols = {"Apple": "AAPL", "Tesla": "TSLA"}
    sectors = {"Technology": ["AAPL"], "Automobile": ["TSLA"]}
    speeds = {"fast": 1, "slow": 2}
    return {"symbol": symbols.get(name, "Stock not found"), "stocks": sectors.get(sector, []),
            "speed": speeds.get(mode)}


def zipcode(city: str, mode: str) -> dict:
    if mode == "debug":  # one special value is no closed set
        return {}
    if city == "Rivermist":
        return {"zipcode": "83214"}
    elif city == "Stonebrook":
        return {"zipcode": "74532"}
    elif city == "Maplecrest":
        return {"zipcode": "56108"}
    return {"zipcode": "00000"}


def test_an_equality_chain_of_three_or_more_literals_is_a_closed_set():
    assert checked_values(zipcode) == {"city": ["Rivermist", "Stonebrook", "Maplecrest"]}


def test_keys_of_the_checked_table_and_of_a_comprehension_over_it():
    assert checked_values(convert) == {"unit_in": ["km", "m", "cm"], "unit_out": ["km", "m", "cm"]}


def test_an_f_string_key_splits_the_table_keys_per_parameter():
    assert checked_values(pairwise) == {"unit_in": ["cm", "in", "kg"], "unit_out": ["in", "cm", "lb"]}


def test_a_lookup_with_a_fallback_answer_knows_the_table_keys_only():
    assert checked_values(symbol_of) == {"name": ["Apple", "Tesla"], "sector": ["Technology", "Automobile"]}


def distance(cityA: str, cityB: str) -> dict:
    if (cityA == "1" and cityB == "2") or (cityA == "2" and cityB == "1"):
        return {"distance": 5.0}
    elif cityA == "3" and cityB == "4":
        return {"distance": 7.0}
    return {"error": "distance not found in database."}


def test_values_tested_together_are_accepted_combinations():
    assert accepted_combinations(distance) == [{"cityA": "1", "cityB": "2"}, {"cityA": "2", "cityB": "1"},
                                               {"cityA": "3", "cityB": "4"}]
    assert accepted_combinations(zipcode) == []  # single tests: no combinations
    assert accepted_combinations(len) == []


def test_parameters_never_tested_against_a_table_get_nothing():
    assert checked_values(unchecked) == {}
    assert checked_values(len) == {}  # a builtin has no Python source
