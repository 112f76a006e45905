"""Values for MCP tool parameters that name things in the state: enums read from descriptions, path, ref and old-text
aliases, new-path samplers, the git builder's branches and changes, the staging area as state, and an edit's path
taken from the read that gave its old text."""
from __future__ import annotations

import random
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from helpers import call, request, spec
from sap.agents.planner import HistoryCall, RulePlanner
from sap.executors.mcp import build_git, git_index_view
from sap.model import ArgProvenance, Tag
from sap.toolsets.mcp import sample_tree
from sap.toolsets.mcp_values import description_enum, new_file, param_kind, with_state_values

STRING = {"type": "string"}
EDITS = {"type": "array", "items": {"type": "object", "required": ["oldText", "newText"],
                                    "properties": {"oldText": STRING, "newText": STRING}}}


def test_enum_read_from_a_description_but_not_from_examples() -> None:
    listed = {"type": "string", "description": "Whether to list local branches ('local'), remote branches ('remote') "
                                               "or all branches('all')."}
    assert description_enum(listed) == ["local", "remote", "all"]
    examples = {"type": "string", "description": "Accepts: relative dates (e.g., 'yesterday', 'today')"}
    assert description_enum(examples) is None
    assert description_enum({**listed, "enum": ["local"]}) is None  # its own enum stands
    assert description_enum({"type": "string", "description": "Only 'local' here"}) is None  # one word is no set


@pytest.mark.parametrize(("tool", "param", "kind"), [
    (spec("move_file", "Move or rename files and directories", {"source": STRING}), "source", "path"),
    (spec("move_file", "Move or rename files and directories", {"destination": STRING}), "destination", "new_path"),
    (spec("git_diff", "Shows differences between branches or commits", {"target": STRING}), "target", "ref"),
    (spec("git_show", "Shows the contents of a commit", {"revision": STRING}), "revision", "ref"),
    (spec("git_add", "Adds file contents to the staging area",
          {"files": {"type": "array", "items": STRING}}), "files", "path"),
    (spec("edit_file", "Make line-based edits to a text file", {"oldText": STRING}), "oldText", "old_text"),
    (spec("edit_file", "Make line-based edits to a text file", {"newText": STRING}), "newText", None),
    (spec("get_weather", "The forecast of a city", {"target": STRING}), "target", None),
    (spec("git_branch", "List Git branches", {"branch_type": {**STRING, "enum": ["local", "all"]}}), "branch_type",
     None),
])
def test_param_kind(tool, param: str, kind: str | None) -> None:
    assert param_kind(tool, param, tool.properties[param]) == kind


def test_aliases_only_where_c0_has_no_field_of_the_name_and_samplers_for_new_paths() -> None:
    c0 = sample_tree(1, repository=True)
    tools = [spec("move_file", "Move files", {"source": STRING, "destination": STRING}),
             spec("git_add", "Adds file contents", {"repo_path": STRING, "files": {"type": "array", "items": STRING}}),
             spec("git_checkout", "Switches branches", {"branch_name": STRING}),
             spec("git_show", "Shows a commit", {"revision": STRING}),
             spec("edit_file", "Edit a text file", {"path": STRING, "edits": EDITS}),
             spec("git_branch", "List branches", {"branch_type": {"type": "string", "description":
                                                                  "local ('local') or all ('all')"}})]
    out, samplers = with_state_values(tools, c0)
    fields = {t.name: t.value_fields for t in out}
    assert fields["move_file"] == {"source": ["path"]}
    assert fields["git_add"] == {"files": ["path"]}  # repo_path is c0's own field
    assert fields["git_checkout"] == {} and fields["git_show"] == {"revision": ["branch_name"]}
    assert fields["edit_file"] == {"edits.oldText": ["content", "text"]}
    assert out[-1].properties["branch_type"]["enum"] == ["local", "all"]
    assert "enum" not in tools[-1].properties["branch_type"]  # the given specs are left as they were
    # not repo_path (a directory c0 has) nor branch_type (an enum now)
    assert set(samplers) == {"move_file.source", "move_file.destination", "git_add.files", "git_checkout.branch_name",
                             "git_show.revision", "edit_file.path"}
    new = {name: sampler(random.Random(0), c0) for name, sampler in samplers.items()}
    paths = {f["path"] for f in c0["files"] + c0["changes"]} | {d["path"] for d in c0["directories"]}
    assert new["move_file.source"] in paths and new["edit_file.path"] in paths  # what the user has
    assert new["move_file.destination"] not in paths and new["move_file.destination"].endswith(".txt")
    assert isinstance(new["git_add.files"], list) and new["git_add.files"][0] in paths
    assert {new["git_checkout.branch_name"], new["git_show.revision"]} <= {b["name"] for b in c0["branches"]}


def test_a_creating_tool_gets_new_names_but_its_base_an_existing_one() -> None:
    c0 = sample_tree(1, repository=True)
    create = spec("git_create_branch", "Creates a new branch from an optional base branch",
                  {"branch_name": STRING}, {"base_branch": STRING})
    mkdir = spec("create_directory", "Create a new directory or ensure a directory exists", {"path": STRING})
    _, samplers = with_state_values([create, mkdir], c0)
    branches = {b["name"] for b in c0["branches"]}
    for seed in range(10):
        name = samplers["git_create_branch.branch_name"](random.Random(seed), c0)
        assert re.fullmatch(r"[a-z]+/[a-z-]+", name) and name not in branches  # no snake_case placeholder
        assert samplers["git_create_branch.base_branch"](random.Random(seed), c0) in branches
        folder = samplers["create_directory.path"](random.Random(seed), c0)
        assert "." not in folder.rpartition("/")[2] and folder not in {f["path"] for f in c0["files"]}

def test_a_new_file_lies_in_a_c0_directory_and_is_no_c0_file() -> None:
    c0 = sample_tree(2, repository=True)
    dirs = {d["path"] for d in c0["directories"]}
    taken = {f["path"] for f in c0["files"] + c0["changes"]}
    for seed in range(30):
        path = new_file(random.Random(seed), c0)
        assert path.rpartition("/")[0] in dirs and path not in taken


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_git_state_has_branches_changes_and_the_staging_area(tmp_path: Path) -> None:
    c0 = sample_tree(0, repository=True)  # seed 0 has its edit staged
    assert [b["name"] for b in c0["branches"]][0] == "main" and len(c0["branches"]) == 3
    assert "branches" not in sample_tree(3)  # a plain file tree has no git parts
    build_git(c0, tmp_path)
    heads = subprocess.run(["git", "branch", "--format=%(refname:short)"], cwd=tmp_path, capture_output=True,
                           text=True, check=True).stdout.split()
    assert sorted(heads) == sorted(b["name"] for b in c0["branches"])
    status = subprocess.run(["git", "status", "--porcelain"], cwd=tmp_path, capture_output=True, text=True,
                            check=True).stdout
    assert sorted(line[:2] for line in status.splitlines()) == ["??", "M "]  # one file edited and staged, one new
    staged = git_index_view(tmp_path)
    subprocess.run(["git", "reset", "-q"], cwd=tmp_path, check=True)
    unstaged = git_index_view(tmp_path)
    assert unstaged != staged  # the staging area is state, though .git/index itself is left out
    subprocess.run(["git", "add", "--", c0["changes"][0]["path"].removeprefix("/workspace/")], cwd=tmp_path,
                   check=True)
    assert git_index_view(tmp_path) == staged  # the same blobs staged again: the same state, whatever the timestamps
    plain = tmp_path.parent / f"{tmp_path.name}-plain"
    plain.mkdir()
    assert git_index_view(plain) == {}  # no repository, no staging area
    with pytest.raises(ValueError, match=r"branches\[0\]\.name"):
        build_git({"branches": [{"name": "-x"}]}, plain)


def test_an_edit_takes_its_path_from_the_read_that_gave_its_old_text() -> None:
    edit = spec("edit_file", "Edit a text file", {"path": STRING, "edits": EDITS})
    edit = edit.model_copy(update={"value_fields": {"edits.oldText": ["content"]}})
    c0 = {"files": [{"path": "/w/a.txt", "content": "a"}, {"path": "/w/b.txt", "content": "b"}]}
    read = call("read_text_file", {"path": "/w/b.txt"}, result={"content": "b\n"},
                prov={"path": ArgProvenance(tag=Tag.initial_state, path="$.files[1].path")})
    for seed in range(5):
        req = request(edit, {"path": Tag.initial_state, "edits": Tag.self_create}, turn=0, index=1,
                      history=[HistoryCall(0, 0, read)], c0=c0, seed=seed)
        bound = RulePlanner().bind(req)
        assert bound.args_exec["edits"][0]["oldText"] == "b\n"
        assert bound.args_exec["path"] == "/w/b.txt"
        assert bound.args_prov["path"].tag == Tag.self_create  # stated in this turn, where the read took it


def test_an_edit_with_no_read_before_takes_a_file_of_c0_whole_and_not_the_one_that_failed() -> None:
    edit = spec("edit_file", "Edit a text file", {"path": STRING, "edits": EDITS})
    edit = edit.model_copy(update={"value_fields": {"edits.oldText": ["content"]}})
    c0 = {"files": [{"path": "/w/a.txt", "content": "a\n"}, {"path": "/w/b.txt", "content": "b\n"}]}
    seen = set()
    for seed in range(8):
        bound = RulePlanner().bind(request(edit, {"path": Tag.initial_state, "edits": Tag.self_create}, turn=0,
                                           c0=c0, seed=seed))
        old, path = bound.args_exec["edits"][0]["oldText"], bound.args_exec["path"]
        assert {"path": path, "content": old} in c0["files"]  # text and path of one file
        prov = bound.args_prov["edits[0].oldText"]
        assert prov.tag == Tag.initial_state and prov.path.endswith(".content")
        assert bound.args_prov["path"].path == prov.path.replace(".content", ".path")
        seen.add(path)
        failed = [{"path": path, "edits": [{"oldText": old, "newText": "x"}]}]
        again = RulePlanner().bind(request(edit, {"path": Tag.initial_state, "edits": Tag.self_create}, turn=0,
                                           c0=c0, seed=seed, failed_args=failed, last_error="no match"))
        assert again.args_exec["edits"][0]["oldText"] != old
    assert seen == {"/w/a.txt", "/w/b.txt"}


def test_a_tool_qualified_sampler_wins_over_the_parameter_s_own() -> None:
    samplers = {"git_checkout.branch_name": lambda rng, c0: "develop", "branch_name": lambda rng, c0: "feature/x"}
    for name, want in (("git_checkout", "develop"), ("git_create_branch", "feature/x")):
        req = request(spec(name, "", {"branch_name": STRING}), {"branch_name": Tag.self_create}, turn=0)
        req.samplers = samplers
        assert RulePlanner().bind(req).args_exec["branch_name"] == want
