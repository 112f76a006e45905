"""Graded levels of one predicted call against one ground-truth call: name, schema, argument values, execution.

    level(c, g) = 0                                                   if c's function is not g's,
    level(c, g) = 0.1 + 0.1 * S + A * (0.6 + 0.2 * E)                 otherwise, in [0.1, 1],

- S (schema): the share of argument names, among args(g) ∪ args(c), that both calls have with a value of the
  same kind (number, string, boolean/null, list, object, after `normalize_value`); 1 when neither has any;
- A (values): the share of argument names, among the same union, whose values are equal after
  `normalize_value` (an extra argument of c counts in the union only); 1 when neither has any;
- E (execution): 1 if the executor accepted c, else 0.

Only an exact call that ran scores 1; correct arguments that failed score 0.8; the right function with every
value wrong scores at most 0.2.
"""
from __future__ import annotations

from dataclasses import dataclass

from sap.rewards.calls import GoldCall, PredCall, arg_share, normalize_value

NAME_WEIGHT, SCHEMA_WEIGHT, VALUES_WEIGHT, EXECUTION_WEIGHT = 0.1, 0.1, 0.6, 0.2


@dataclass(frozen=True)
class CallLevels:
    """The levels of one predicted call against one ground-truth call, and the resulting score."""

    name: bool
    schema: float
    values: float
    executed: bool

    @property
    def score(self) -> float:
        """level(c, g) (see the module docstring)."""
        if not self.name:
            return 0.0
        return (NAME_WEIGHT + SCHEMA_WEIGHT * self.schema
                + self.values * (VALUES_WEIGHT + EXECUTION_WEIGHT * self.executed))


def schema_share(gold: GoldCall, pred: PredCall) -> float:
    """S: shared argument names whose values are of the same kind, over all argument names of either call."""
    names = set(gold.args) | set(pred.args)
    if not names:
        return 1.0
    same = sum(1 for n in set(gold.args) & set(pred.args)
               if normalize_value(gold.args[n])[0] == normalize_value(pred.args[n])[0])
    return same / len(names)


def call_levels(gold: GoldCall, pred: PredCall) -> CallLevels:
    """The levels of `pred` against `gold`."""
    if gold.name != pred.name:
        return CallLevels(False, 0.0, 0.0, pred.ok)
    return CallLevels(True, schema_share(gold, pred), arg_share(gold, pred), pred.ok)
