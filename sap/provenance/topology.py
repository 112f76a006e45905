"""Call-graph topology of a trajectory and an isomorphism test: turns and calls are nodes (calls labelled by
function, or by role class for substituted functions), edges are `in` (turn -> its call), `prev_output` (source
call -> consuming call) and `prev_user_msg` (anchor turn -> consuming call). RODS keeps a variant only if its
graph is isomorphic to its seed's."""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Callable

from sap.model import Tag, Trajectory

Node = str  # "t3" (turn 3) or "c3.1" (turn 3, call 1)
Edge = tuple[Node, Node, str]


@dataclass(frozen=True)
class CallGraph:
    """Labelled nodes and labelled directed edges (no duplicates)."""

    labels: dict[Node, str]
    edges: frozenset[Edge]

    def signature(self, node: Node) -> tuple:
        """What any isomorphism must preserve about one node: its label and its labelled in- and out-edges."""
        out = Counter((label, self.labels[b]) for a, b, label in self.edges if a == node)
        into = Counter((label, self.labels[a]) for a, b, label in self.edges if b == node)
        return self.labels[node], tuple(sorted(out.items())), tuple(sorted(into.items()))


def call_graph(traj: Trajectory, label: Callable[[str], str] = lambda name: name) -> CallGraph:
    """The trajectory's call graph; `label` maps a function name to its node label (e.g. a role class)."""
    labels: dict[Node, str] = {}
    edges: set[Edge] = set()
    for turn in traj.turns:
        if not turn.calls:
            continue
        labels[f"t{turn.index}"] = "turn"
        for i, call in enumerate(turn.calls):
            node = f"c{turn.index}.{i}"
            labels[node] = label(call.name)
            edges.add((f"t{turn.index}", node, "in"))
            for prov in call.args_prov.values():
                tag = prov.effective_tag()
                if tag == Tag.prev_output and prov.turn is not None:
                    edges.add((f"c{prov.turn}.{prov.call or 0}", node, "prev_output"))
                elif tag == Tag.prev_user_msg and prov.turn is not None:
                    edges.add((f"t{prov.turn}", node, "prev_user_msg"))
    for a, b, _ in edges:  # an anchor turn without calls still counts as a node
        for n in (a, b):
            labels.setdefault(n, "turn")
    return CallGraph(labels, frozenset(edges))


def isomorphism(g: CallGraph, h: CallGraph) -> dict[Node, Node] | None:
    """A label- and edge-preserving bijection from g's nodes to h's, or None; backtracking over nodes with equal
    signatures (the graphs are small: a dialogue's calls and turns)."""
    if len(g.labels) != len(h.labels) or len(g.edges) != len(h.edges):
        return None
    sig_g = {n: g.signature(n) for n in g.labels}
    sig_h = {n: h.signature(n) for n in h.labels}
    if Counter(sig_g.values()) != Counter(sig_h.values()):
        return None
    classes: dict[tuple, list[Node]] = {}
    for n, s in sig_h.items():
        classes.setdefault(s, []).append(n)
    order = sorted(g.labels, key=lambda n: (len(classes[sig_g[n]]), n))  # the most constrained first
    g_adj = {(a, b): label for a, b, label in g.edges}
    h_adj = {(a, b): label for a, b, label in h.edges}
    mapping: dict[Node, Node] = {}
    used: set[Node] = set()

    def fits(n: Node, m: Node) -> bool:
        for other, image in mapping.items():
            if g_adj.get((n, other)) != h_adj.get((m, image)) or g_adj.get((other, n)) != h_adj.get((image, m)):
                return False
        return g_adj.get((n, n)) == h_adj.get((m, m))

    def extend(k: int) -> bool:
        if k == len(order):
            return True
        n = order[k]
        for m in classes[sig_g[n]]:
            if m not in used and fits(n, m):
                mapping[n], _ = m, used.add(m)
                if extend(k + 1):
                    return True
                del mapping[n]
                used.discard(m)
        return False

    return dict(mapping) if extend(0) else None


def topology_difference(seed: Trajectory, variant: Trajectory, label: Callable[[str], str] = lambda name: name) -> str | None:
    """None if the two call graphs are isomorphic, else a short account of how they differ."""
    g, h = call_graph(seed, label), call_graph(variant, label)
    if isomorphism(g, h) is not None:
        return None
    lg, lh = Counter(g.labels.values()), Counter(h.labels.values())
    if lg != lh:
        return f"nodes differ: seed has {dict(lg - lh)} more, variant has {dict(lh - lg)} more"
    eg, eh = Counter(e[2] for e in g.edges), Counter(e[2] for e in h.edges)
    if eg != eh:
        return f"edges differ: seed {dict(sorted(eg.items()))}, variant {dict(sorted(eh.items()))}"
    return "same nodes and edge counts, but the dependency edges connect different calls"
