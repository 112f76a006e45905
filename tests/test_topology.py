"""Call-graph topology: what makes two trajectories isomorphic (functions, provenance edges, turn grouping),
including graphs whose every node looks alike locally but whose edges connect differently."""
from __future__ import annotations

from sap.model import ArgProvenance, Tag, Trajectory, Turn
from sap.provenance.topology import call_graph, isomorphism, topology_difference
from helpers import call


def _traj(turns: list[list[tuple[str, dict[str, ArgProvenance]]]]) -> Trajectory:
    return Trajectory(id="t", toolset="x", seed=0, c0={}, turns=[
        Turn(index=k, state="s", transition=0, calls=[call(name, {a: 1 for a in prov}, prov=prov) for name, prov in calls])
        for k, calls in enumerate(turns)])


def po(turn: int, c: int = 0) -> ArgProvenance:
    return ArgProvenance(tag=Tag.prev_output, turn=turn, call=c, path="$.id")


def pu(turn: int) -> ArgProvenance:
    return ArgProvenance(tag=Tag.prev_user_msg, turn=turn)


NEW = ArgProvenance(tag=Tag.self_create)
CFG = ArgProvenance(tag=Tag.initial_state, path="$.user")


def test_same_structure_with_other_values_and_sources_of_the_same_kind_is_isomorphic():
    seed = _traj([[("login", {"user": CFG})], [("find", {"q": NEW}), ("get", {"id": po(1, 0)})],
                  [("cancel", {"id": po(1, 1), "why": pu(1)})]])
    # the same graph, with new/config values swapped (neither makes an edge) and calls of a turn reordered
    variant = _traj([[("login", {"user": NEW})],
                     [("get", {"id": po(1, 1)}), ("find", {"q": CFG})],
                     [("cancel", {"id": po(1, 0), "why": pu(1)})]])
    assert topology_difference(seed, variant) is None
    mapping = isomorphism(call_graph(seed), call_graph(variant))
    assert mapping["c1.0"] == "c1.1" and mapping["c1.1"] == "c1.0"


def test_a_missing_or_moved_edge_or_another_function_breaks_isomorphism():
    seed = _traj([[("find", {"q": NEW})], [("get", {"id": po(0)})], [("cancel", {"id": po(1), "why": pu(0)})]])
    no_edge = _traj([[("find", {"q": NEW})], [("get", {"id": NEW})], [("cancel", {"id": po(1), "why": pu(0)})]])
    moved = _traj([[("find", {"q": NEW})], [("get", {"id": po(0)})], [("cancel", {"id": po(0), "why": pu(0)})]])
    anchor = _traj([[("find", {"q": NEW})], [("get", {"id": po(0)})], [("cancel", {"id": po(1), "why": pu(1)})]])
    other = _traj([[("find", {"q": NEW})], [("get", {"id": po(0)})], [("refund", {"id": po(1), "why": pu(0)})]])
    assert "edges differ" in topology_difference(seed, no_edge)
    assert topology_difference(seed, moved) == "same nodes and edge counts, but the dependency edges connect different calls"
    assert topology_difference(seed, anchor) is not None
    assert "refund" in topology_difference(seed, other)
    assert topology_difference(seed, other, label=lambda n: "act" if n in ("cancel", "refund") else n) is None


def test_fallback_counts_as_the_source_it_used():
    located = ArgProvenance(tag=Tag.fallback, turn=0, call=0, path="$.id", fallback_from=Tag.initial_state)
    seed = _traj([[("find", {"q": NEW})], [("get", {"id": po(0)})]])
    assert topology_difference(seed, _traj([[("find", {"q": NEW})], [("get", {"id": located})]])) is None


def test_locally_alike_graphs_that_connect_differently_are_told_apart():
    # every turn holds one f and one g, every g takes an f's output: within the turn (seed) or across turns
    seed = _traj([[("f", {}), ("g", {"id": po(0, 0)})], [("f", {}), ("g", {"id": po(1, 0)})]])
    crossed = _traj([[("f", {}), ("g", {"id": po(1, 0)})], [("f", {}), ("g", {"id": po(0, 0)})]])
    g, h = call_graph(seed), call_graph(crossed)
    assert sorted(g.signature(n) for n in g.labels) == sorted(h.signature(n) for n in h.labels)
    assert isomorphism(g, h) is None
    assert isomorphism(g, call_graph(_traj([[("f", {}), ("g", {"id": po(0, 0)})],
                                            [("f", {}), ("g", {"id": po(1, 0)})]]))) is not None
