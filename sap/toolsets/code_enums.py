"""Valid values of string parameters read from a method's own code: the keys of the dict it tests them against
or looks them up in with a fallback answer, or the literals of an if/elif chain comparing them with `==`; and the
combinations of values several parameters are tested for together."""
from __future__ import annotations

import ast
import functools
import inspect
import re
import textwrap
from typing import Any, Callable


def _literal_keys(node: ast.expr, tables: dict[str, list[str]]) -> list[str] | None:
    """The string keys of a dict literal, or of a dict comprehension over one (`{u: 1 / f for u, f in t.items()}`)."""
    if isinstance(node, ast.Dict) and node.keys and all(
            isinstance(k, ast.Constant) and isinstance(k.value, str) for k in node.keys):
        return [k.value for k in node.keys]  # type: ignore[union-attr]
    if isinstance(node, ast.DictComp) and len(node.generators) == 1 and isinstance(node.key, ast.Name):
        gen = node.generators[0]
        target = gen.target.elts[0] if isinstance(gen.target, ast.Tuple) and gen.target.elts else gen.target
        source = gen.iter.func.value if (isinstance(gen.iter, ast.Call) and isinstance(gen.iter.func, ast.Attribute)
                                         and gen.iter.func.attr in ("items", "keys")) else gen.iter
        if isinstance(target, ast.Name) and target.id == node.key.id and isinstance(source, ast.Name):
            return tables.get(source.id)
    return None


def _template(node: ast.JoinedStr, params: set[str]) -> tuple[re.Pattern[str], list[str]] | None:
    """A regex matching what an f-string of parameters and constants (`f"{unit_in}_to_{unit_out}"`) can produce,
    with one named group per parameter; None if it formats anything else."""
    parts, names = [], []
    for value in node.values:
        if isinstance(value, ast.Constant) and isinstance(value.value, str):
            parts.append(re.escape(value.value))
        elif isinstance(value, ast.FormattedValue) and isinstance(value.value, ast.Name) and value.value.id in params:
            parts.append(f"(?P<{value.value.id}>.+?)")
            names.append(value.value.id)
        else:
            return None
    return (re.compile("".join(parts) + r"\Z"), names) if names else None


EQUALITY_CHAIN = 3  # distinct `param == "literal"` tests that make a closed set (fewer may be special cases)


def _equality_literals(func: ast.AST, params: set[str]) -> dict[str, list[str]]:
    """Per parameter, the string literals it is compared with by `==` (`if city == "Rivermist": ... elif ...`),
    kept when there are at least EQUALITY_CHAIN of them."""
    found: dict[str, list[str]] = {}
    for node in ast.walk(func):
        if (test := _equality(node, params)) is not None:
            found.setdefault(test[0], []).append(test[1])
    return {name: list(dict.fromkeys(v)) for name, v in found.items() if len(set(v)) >= EQUALITY_CHAIN}


def _fallback_lookups(func: ast.AST, params: set[str], tables: dict[str, list[str]]) -> dict[str, list[str]]:
    """Per parameter, the keys of a dict literal it is looked up in with a fallback for any other value
    (`symbol_map.get(name, "Stock not found")`, `sector_map.get(sector, [])`): the keys are what it knows."""
    found: dict[str, list[str]] = {}
    for node in ast.walk(func):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
                and isinstance(node.func.value, ast.Name) and node.func.value.id in tables and len(node.args) == 2
                and isinstance(node.args[0], ast.Name) and node.args[0].id in params):
            found.setdefault(node.args[0].id, []).extend(tables[node.func.value.id])
    return found


@functools.cache
def _source_function(method: Callable[..., Any]) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    """The parsed definition of `method` (parsed once for `checked_values` and `accepted_combinations`), or None if
    its source is unavailable."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(method)))
    except (OSError, TypeError, SyntaxError):
        return None
    func = tree.body[0]
    return func if isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)) else None


def _equality(node: ast.expr, params: set[str]) -> tuple[str, str] | None:
    """(parameter, literal) of a `param == "literal"` test, else None."""
    if (isinstance(node, ast.Compare) and isinstance(node.left, ast.Name) and node.left.id in params
            and len(node.ops) == 1 and isinstance(node.ops[0], ast.Eq)
            and isinstance(node.comparators[0], ast.Constant) and isinstance(node.comparators[0].value, str)):
        return node.left.id, node.comparators[0].value
    return None


def accepted_combinations(method: Callable[..., Any]) -> list[dict[str, str]]:
    """The joint values of several parameters that `method`'s code tests together, each `and` of `==` tests one
    combination (`(cityA == "83214" and cityB == "74532") or ...`), kept when there are at least EQUALITY_CHAIN
    of them; empty if the source is unavailable or tests no such combinations."""
    func = _source_function(method)
    if func is None:
        return []
    params = {a.arg for a in func.args.args + func.args.kwonlyargs}
    found: list[dict[str, str]] = []
    for node in ast.walk(func):
        if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.And) and len(node.values) >= 2:
            tests = [_equality(v, params) for v in node.values]
            combo = dict(t for t in tests if t is not None)
            if None not in tests and len(combo) == len(tests) and combo not in found:
                found.append(combo)
    return found if len(found) >= EQUALITY_CHAIN else []


def checked_values(method: Callable[..., Any]) -> dict[str, list[str]]:
    """Per parameter of `method`, the values its code accepts: the keys of a dict literal that the parameter (or
    an f-string of parameters) is tested against with `in` / `not in` or looked up in with a fallback, else the
    literals of an `==` chain; empty if the source is unavailable."""
    func = _source_function(method)
    if func is None:
        return {}
    params = {a.arg for a in func.args.args + func.args.kwonlyargs}
    tables: dict[str, list[str]] = {}
    templates: dict[str, tuple[re.Pattern[str], list[str]]] = {}
    for node in ast.walk(func):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            name = node.targets[0].id
            if (keys := _literal_keys(node.value, tables)) is not None:
                tables[name] = keys
            elif isinstance(node.value, ast.JoinedStr) and (tpl := _template(node.value, params)) is not None:
                templates[name] = tpl
    found = _fallback_lookups(func, params, tables)
    for node in ast.walk(func):
        if not (isinstance(node, ast.Compare) and isinstance(node.left, ast.Name) and len(node.ops) == 1
                and isinstance(node.ops[0], (ast.In, ast.NotIn)) and isinstance(node.comparators[0], ast.Name)
                and node.comparators[0].id in tables):
            continue
        keys, subject = tables[node.comparators[0].id], node.left.id
        if subject in params:
            found.setdefault(subject, []).extend(keys)
        elif subject in templates:
            pattern, names = templates[subject]
            for m in filter(None, map(pattern.match, keys)):
                for name in names:
                    found.setdefault(name, []).append(m.group(name))
    return {**_equality_literals(func, params), **{name: list(dict.fromkeys(v)) for name, v in found.items()}}
