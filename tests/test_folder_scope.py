"""GorillaFileSystem's names resolve in the current folder: `cd` is learned as the prerequisite of a file tool whose
file is in a subfolder, planned on the way there (up with `..` first where needed) and said by the user as where
the file is; a `cd` is real state for replays and repeats, not for BFCL's own comparison."""
from __future__ import annotations

import random

import pytest

from sap.agents.planner import HistoryCall, PlanRequest
from sap.api import synthesize
from sap.eval.rollout import compared
from sap.fsm.build import RuleFSMBuilder
from sap.graphs.coherence import execute_coherently
from sap.graphs.routes import circles, route_values, worth_moving
from sap.model import ArgProvenance, Tag, ToolCall
from helpers import HAVE_BFCL, needs_bfcl
from sap.toolsets import load_toolset
from sap.toolsets.bfcl import FolderScope
from sap.validate import validate_record

C0 = {"GorillaFileSystem": {"root": {"ann": {"type": "directory", "contents": {
    "docs": {"type": "directory", "contents": {
        "a.txt": {"type": "file", "content": "alpha"},
        "old": {"type": "directory", "contents": {"b.md": {"type": "file", "content": "beta"}}}}},
    "music": {"type": "directory", "contents": {"c.csv": {"type": "file", "content": "gamma"}}}}}}}}


def _ok(name: str, **args) -> ToolCall:
    return ToolCall(call_id="c", name=name, args_exec=args, args_prov={}, ok=True, result={})


def test_the_scope_reads_folders_off_c0_paths_and_cd_calls():
    scope = FolderScope()
    assert scope.folder_of('$.GorillaFileSystem.root.ann.contents.docs.contents["a.txt"]~') == ("docs",)
    assert scope.folder_of("$.GorillaFileSystem.root.ann.contents.docs.contents.old~") == ("docs",)
    assert scope.folder_of("$.GorillaFileSystem.root.ann.contents.music~") == ()
    assert scope.folder_of("$.TwitterAPI.username") is None
    assert scope.current([_ok("cd", folder="docs"), _ok("cd", folder="old"), _ok("cd", folder="..")]) == ("docs",)
    assert scope.current([_ok("cd", folder="docs"), ToolCall(call_id="x", name="cd", args_exec={"folder": "nope"},
                                                               args_prov={}, ok=False)]) == ("docs",)
    assert scope.where(C0, "b.md") == ("docs", "old") and scope.where(C0, "c.csv") == ("music",)
    assert scope.where(C0, "zzz.txt") is None


def test_a_move_toward_a_folder_elsewhere_goes_up_first_and_never_circles():
    """Inside docs/old, a `cd` bound to c0's `music` (a folder of the top) becomes `..`, stated by the user; a
    folder below the current one that holds what the error could not find stays."""
    spec = load_toolset("bfcl/GorillaFileSystem").tool("cd") if HAVE_BFCL else None
    if spec is None:
        pytest.skip("bfcl-eval is not installed")
    history = [HistoryCall(0, 0, _ok("cd", folder="docs")), HistoryCall(0, 1, _ok("cd", folder="old"))]
    req = PlanRequest(spec=spec, tags={}, turn=1, index=0, history=history, stated=[], c0=C0,
                      rng=random.Random(0), last_error="cat: 'c.csv': No such file or directory", scope=FolderScope())
    args = {"folder": "music"}
    prov = {"folder": ArgProvenance(tag=Tag.initial_state, path="$.GorillaFileSystem.root.ann.contents.music~")}
    route_values(req, args, prov)
    assert args == {"folder": ".."} and prov["folder"].tag == Tag.self_create
    down = PlanRequest(spec=spec, tags={}, turn=1, index=0, history=history[:1], stated=[], c0=C0,
                       rng=random.Random(0), last_error="cat: 'b.md': No such file or directory", scope=FolderScope())
    args = {"folder": "old"}
    prov = {"folder": ArgProvenance(tag=Tag.initial_state,
                                    path="$.GorillaFileSystem.root.ann.contents.docs.contents.old~")}
    route_values(down, args, prov)
    assert args == {"folder": "old"}
    scope = FolderScope()
    assert circles(scope, [], [_ok("cd", folder="docs"), _ok("cd", folder="..")])
    assert not circles(scope, [], [_ok("cd", folder="docs"), _ok("cd", folder="old")])
    # a move helps only toward another folder holding the name: not where the file already is, not a second
    # move for a name c0 does not hold, not one that would come back
    assert worth_moving(scope, C0, [], [], "cat: 'b.md': No such file or directory")
    assert not worth_moving(scope, C0, [_ok("cd", folder="docs"), _ok("cd", folder="old")], [],
                            "cat: 'b.md': No such file or directory")
    assert worth_moving(scope, C0, [], [], "cat: 'new.txt': No such file or directory")
    assert not worth_moving(scope, C0, [], [_ok("cd", folder="music")], "cat: 'new.txt': No such file or directory")
    assert not worth_moving(scope, C0, [], [_ok("cd", folder="music"), _ok("cd", folder="..")],
                            "cat: 'b.md': No such file or directory")


@needs_bfcl
def test_the_current_folder_is_state_for_replays_and_repeats_but_not_for_bfcls_comparison():
    ts = load_toolset("bfcl/GorillaFileSystem")
    ex = ts.executor_factory()
    ex.reset(C0)
    before = ex.state()
    assert ex.execute(ToolCall(call_id="a", name="cd", args_exec={"folder": "docs"}, args_prov={})).ok
    assert ex.state() != before and ex.state()["GorillaFileSystem"]["_cwd"] == "/ann/docs"
    assert compared(ex) == {k: {f: v for f, v in s.items() if f != "_cwd"} for k, s in ex.state().items()}
    committed = [ToolCall(call_id="call_0_0", name="cd", args_exec={"folder": ".."}, args_prov={}, ok=True)]
    res, changed = execute_coherently(ex, ts.tool("cd"), ToolCall(call_id="call_1_0", name="cd",
                                                                  args_exec={"folder": ".."}, args_prov={}),
                                      committed, [], relative=True)
    assert res.ok and changed  # `cd ..` again is a move of its own, not a repeat


@needs_bfcl
def test_cd_is_learned_for_files_in_subfolders_and_planned_with_the_folder_said_by_the_user():
    toolset = load_toolset("bfcl/GorillaFileSystem")
    fsm = RuleFSMBuilder().build(toolset)
    learned = {(p.tool, p.needs) for p in fsm.preconditions}
    assert {("cat", "cd"), ("grep", "cd"), ("tail", "cd")} <= learned
    assert all(p.args == {} for p in fsm.preconditions if p.needs == "cd")  # no folder of one c0 kept as a value
    run = synthesize(toolset, 16, seed=1, mix={"base": 1.0})
    assert all(validate_record(r, toolset, i) == [] for i, r in enumerate(run.records))
    entered = 0
    for r in run.records:
        calls = [c for m in r["messages"] if m["role"] == "assistant" for c in m.get("tool_calls") or []]
        names = [c["function"]["name"] for c in calls]
        for k, name in enumerate(names[1:], 1):
            if name in ("cat", "grep", "tail", "sort", "wc") and names[k - 1] == "cd":
                entered += 1
    assert entered >= 3, entered
