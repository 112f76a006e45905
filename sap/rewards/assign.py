"""One-to-one assignment of predicted calls to ground-truth calls: the maximum-weight matching (Hungarian method)."""
from __future__ import annotations

from collections.abc import Sequence

_INF = float("inf")


def _min_cost_rows(cost: list[list[float]]) -> list[int]:
    """For a cost matrix with no more rows than columns, the column of each row in a minimum-cost assignment
    (Kuhn-Munkres with potentials, O(rows^2 * columns))."""
    n, m = len(cost), len(cost[0])
    u, v = [0.0] * (n + 1), [0.0] * (m + 1)
    owner, way = [0] * (m + 1), [0] * (m + 1)  # owner[j]: the row (1-based) holding column j; 0 for none
    for row in range(1, n + 1):
        owner[0], col = row, 0
        slack, used = [_INF] * (m + 1), [False] * (m + 1)
        while True:
            used[col] = True
            r, delta, nxt = owner[col], _INF, 0
            for j in range(1, m + 1):
                if used[j]:
                    continue
                reduced = cost[r - 1][j - 1] - u[r] - v[j]
                if reduced < slack[j]:
                    slack[j], way[j] = reduced, col
                if slack[j] < delta:
                    delta, nxt = slack[j], j
            for j in range(m + 1):
                if used[j]:
                    u[owner[j]] += delta
                    v[j] -= delta
                else:
                    slack[j] -= delta
            col = nxt
            if owner[col] == 0:
                break
        while col:
            prev = way[col]
            owner[col] = owner[prev]
            col = prev
    rows = [0] * n
    for j in range(1, m + 1):
        if owner[j]:
            rows[owner[j] - 1] = j - 1
    return rows


def max_weight_assignment(weights: Sequence[Sequence[float]]) -> dict[int, int]:
    """Row -> column pairs, each row and column used at most once, with the largest summed weight; pairs of
    weight <= 0 are left out (such a row or column stays unassigned)."""
    if not weights or not weights[0]:
        return {}
    transposed = len(weights) > len(weights[0])
    matrix = [list(col) for col in zip(*weights)] if transposed else [list(row) for row in weights]
    top = max(max(row) for row in matrix)
    chosen = _min_cost_rows([[top - w for w in row] for row in matrix])
    pairs = {c: r for r, c in enumerate(chosen)} if transposed else dict(enumerate(chosen))
    return {r: c for r, c in pairs.items() if weights[r][c] > 0}
