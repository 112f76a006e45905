"""Score exported BFCL entries with bfcl-eval's own multi-turn checker and executor (tests and bench only)."""
from __future__ import annotations

import ast
import json
import re
import uuid
from typing import Any


NUMBER_OBJECT = re.compile(r"(?:mpf|Decimal)\('([^']*)'\)")


def _value(text: str) -> Any:
    """A BFCL execution result string back as a JSON value (json.dumps for dicts, str() for the rest; the str()
    of MathAPI's `mpf('2.0')` and `Decimal('2.0')` numbers read as floats, as sap's executor returns them)."""
    try:
        return json.loads(text)
    except ValueError:
        pass
    try:
        return json.loads(json.dumps(ast.literal_eval(NUMBER_OBJECT.sub(r"\1", text))))
    except (ValueError, SyntaxError, TypeError):
        return text


def check_entry(question: dict[str, Any], truth: list[list[str]], answer: list[list[str]] | None = None) -> dict:
    """BFCL's `multi_turn_checker` verdict on `answer` (default: the ground truth itself) as the model's calls,
    one step per turn; a fresh model name per call keeps BFCL's instance cache from carrying state over."""
    from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker import multi_turn_checker

    answer = truth if answer is None else answer
    decoded = [[turn] if turn else [] for turn in answer]
    return multi_turn_checker(decoded, truth, question, "multi_turn", f"sap_check_{uuid.uuid4().hex}")


def bfcl_results(question: dict[str, Any], truth: list[list[str]]) -> list[list[Any]]:
    """What BFCL's executor returns for each ground-truth call, turn by turn, as JSON values."""
    from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_utils import execute_multi_turn_func_call

    model = f"sap_exec_{uuid.uuid4().hex}"
    out = []
    for turn in truth:
        results, _ = execute_multi_turn_func_call(turn, question["initial_config"], question["involved_classes"],
                                                  model, question["id"],
                                                  long_context="long_context" in question["id"])
        out.append([_value(r) for r in results])
    return out


def drop_one_call(truth: list[list[str]]) -> list[list[str]]:
    """The ground truth with the last call of its first non-empty turn removed (a negative control)."""
    out = [list(turn) for turn in truth]
    first = next(i for i, turn in enumerate(out) if turn)
    out[first].pop()
    return out
