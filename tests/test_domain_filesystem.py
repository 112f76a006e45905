"""Tests for the built-in `filesystem` domain (virtual in-memory file system with a current directory)."""
import copy
import json

import pytest
from langchain_core.utils.function_calling import convert_to_openai_tool

from sap.toolsets.domains import filesystem
from sap.toolsets.domains.filesystem import FileSystem, sample_config

SEEDS = range(30)

SMALL = {
    "root": {
        "alice": {
            "type": "directory",
            "contents": {
                "notes.txt": {"type": "file", "content": "buy milk\ncall bob\nBuy bread\n"},
                "projects": {
                    "type": "directory",
                    "contents": {
                        "site": {"type": "directory", "contents": {}},
                        "plan.md": {"type": "file", "content": "one two three\nfour five\n"},
                    },
                },
                "empty": {"type": "directory", "contents": {}},
                ".hidden": {"type": "file", "content": "secret\n"},
            },
        }
    },
    "current_directory": "/alice",
}


def tool_names(instance):
    return sorted(n for n in dir(instance) if not n.startswith("_") and callable(getattr(instance, n)))


def small():
    fs = FileSystem()
    fs._load_scenario(SMALL)
    return fs


def loaded(seed):
    config = sample_config(seed)
    fs = FileSystem()
    fs._load_scenario(config)
    return fs, config


def walk(node, depth=0):
    """(files, max folder depth) below a c0 directory node."""
    files, deepest = [], depth
    for name, child in node["contents"].items():
        if child["type"] == "file":
            files.append((name, child["content"]))
        else:
            sub_files, sub_depth = walk(child, depth + 1)
            files += sub_files
            deepest = max(deepest, sub_depth)
    return files, deepest


# ----- module contract ----------------------------------------------------------

def test_module_constants():
    assert filesystem.NAME == "filesystem"
    assert filesystem.DESCRIPTION and "\n" not in filesystem.DESCRIPTION
    assert filesystem.TOOL_CLASS is FileSystem
    assert filesystem.__doc__.strip()


def test_tools_convert_to_clean_schemas():
    names = tool_names(FileSystem())
    assert len(names) >= 14
    assert {"pwd", "ls", "cd", "mkdir", "touch", "echo", "cat", "grep", "find", "cp", "mv", "rm", "rmdir",
            "wc", "sort", "head", "tail", "du", "diff"} <= set(names)
    for name in names:
        spec = convert_to_openai_tool(getattr(FileSystem(), name))["function"]
        assert spec["name"] == name
        assert spec["description"].strip()
        for pname, pschema in spec["parameters"].get("properties", {}).items():
            assert pschema.get("description", "").strip(), f"{name}.{pname} lacks a description"
    spec = convert_to_openai_tool(FileSystem().wc)["function"]["parameters"]
    assert spec["required"] == ["file_name"]
    assert spec["properties"]["mode"]["enum"] == ["lines", "words", "chars"]
    spec = convert_to_openai_tool(FileSystem().cp)["function"]["parameters"]
    assert spec["required"] == ["file_name", "destination"]
    spec = convert_to_openai_tool(FileSystem().find)["function"]["parameters"]
    assert not spec.get("required")
    lines = convert_to_openai_tool(FileSystem().head)["function"]["parameters"]["properties"]["lines"]
    assert lines["type"] == "integer" and lines["default"] == 10


def test_empty_instance():
    fs = FileSystem()
    assert fs.pwd() == {"current_directory": "/root"}
    assert fs.ls()["files"] == [] and fs.ls()["directories"] == []
    json.dumps(fs._state())


# ----- sample_config ------------------------------------------------------------

def test_sample_config_is_deterministic_and_json():
    assert sample_config(11) == sample_config(11)
    assert json.loads(json.dumps(sample_config(11))) == sample_config(11)


def test_sample_config_varies_across_seeds():
    configs = [sample_config(s) for s in SEEDS]
    assert len({json.dumps(c, sort_keys=True) for c in configs}) == len(configs)
    assert len({next(iter(c["root"])) for c in configs}) > 15
    roots = [next(iter(c["root"].values())) for c in configs]
    assert len({len(walk(r)[0]) for r in roots}) > 5
    assert len({walk(r)[1] for r in roots}) == 3
    assert len({tuple(sorted(r["contents"])) for r in roots}) > 15
    assert len({c["current_directory"].count("/") for c in configs}) == 2


@pytest.mark.parametrize("seed", SEEDS)
def test_sample_config_shape(seed):
    config = sample_config(seed)
    (root_name, root), = config["root"].items()
    assert root["type"] == "directory"
    files, depth = walk(root)
    assert 8 <= len(files) <= 20
    assert 2 <= depth <= 4
    for name, content in files:
        assert "." in name and content.count("\n") >= 3
    fs = FileSystem()
    fs._load_scenario(config)
    assert fs.pwd()["current_directory"] == config["current_directory"]
    assert config["current_directory"].startswith(f"/{root_name}")
    assert fs._state() == config


def test_load_scenario_deep_copies_and_rejects_bad_start():
    config = sample_config(3)
    snapshot = json.dumps(config, sort_keys=True)
    fs = FileSystem()
    fs._load_scenario(config)
    fs.cd("/" + next(iter(config["root"])))
    target = fs.find()["matches"][0]["file_name"]
    fs.echo("changed", target)
    fs.rm(target)
    assert json.dumps(config, sort_keys=True) == snapshot
    with pytest.raises(ValueError):
        FileSystem()._load_scenario({**SMALL, "current_directory": "/alice/nowhere"})


# ----- dependency chains ------------------------------------------------------------

def test_chain_mkdir_cd_touch_echo_cat_wc():
    fs = small()
    folder = fs.mkdir("archive")["folder"]
    assert fs.cd(folder) == {"current_directory": "/alice/archive"}
    file_name = fs.touch("log.txt")["file_name"]
    written = fs.echo("first line", file_name)
    fs.echo("second line", written["file_name"], append=True)
    assert fs.cat(file_name)["content"] == "first line\nsecond line"
    assert fs.wc(file_name, "lines")["count"] == 2
    assert fs.wc(file_name, "words")["count"] == 4
    assert fs.cd("..")["current_directory"] == "/alice"
    state = fs._state()["root"]["alice"]["contents"]["archive"]["contents"]
    assert state == {"log.txt": {"type": "file", "content": "first line\nsecond line"}}


def test_chain_ls_cd_ls_cat_through_result_fields():
    fs = small()
    listing = fs.ls()
    assert listing["current_directory"] == "/alice"
    assert [f["file_name"] for f in listing["files"]] == ["notes.txt"]
    assert [d["folder"] for d in listing["directories"]] == ["empty", "projects"]
    assert ".hidden" in [f["file_name"] for f in fs.ls(show_hidden=True)["files"]]
    fs.cd(listing["directories"][1]["folder"])
    inner = fs.ls()
    assert inner["current_directory"] == "/alice/projects"
    assert fs.cat(inner["files"][0]["file_name"])["content"] == "one two three\nfour five\n"
    rmdir = fs.rmdir(inner["directories"][0]["dir_name"])
    assert rmdir["removed"] == "site" and "site" not in fs._state()["root"]["alice"]["contents"]["projects"]["contents"]


@pytest.mark.parametrize("seed", range(10))
def test_chain_find_cp_diff_mv_rm_on_sample(seed):
    fs, config = loaded(seed)
    root_path = "/" + next(iter(config["root"]))
    assert "error" not in fs.cd(root_path)
    found = fs.find(".")
    assert found["match_count"] == len(walk(config["root"][root_path[1:]])[0])
    assert len(found["matches"]) == min(10, found["match_count"])
    match = found["matches"][0]
    original = fs.cat(match["file_name"])["content"]
    copied = fs.cp(match["file_name"], "copy_of_file.txt")
    assert copied["file_name"] == "copy_of_file.txt"
    assert fs.diff(match["file_name"], copied["file_name"])["identical"] is True
    fs.echo("an extra line", copied["file_name"], append=True)
    changes = fs.diff(match["file_name"], copied["file_name"])
    assert changes["identical"] is False and "+an extra line" in changes["diff_lines"]
    folder = fs.mkdir("archive")["folder"]
    moved = fs.mv(copied["file_name"], folder)
    assert moved["file_name"] == "archive/copy_of_file.txt" and moved["path"] == f"{root_path}/archive/copy_of_file.txt"
    assert "error" in fs.cat(copied["file_name"])
    assert fs.cat(moved["file_name"])["content"] == original + "an extra line"
    assert fs.rm(moved["file_name"])["removed"] == "archive/copy_of_file.txt"
    assert fs.rmdir(folder)["removed"] == "archive"
    assert fs._state() == {**config, "current_directory": root_path}


def test_find_by_name_feeds_file_tools_and_cd():
    fs = small()
    result = fs.find(name="PLAN")
    assert result["matches"] == [{"path": "/alice/projects/plan.md", "file_name": "projects/plan.md"}]
    assert fs.head(result["matches"][0]["file_name"], 1)["content"] == "one two three"
    folders = fs.find(name="sit")["folders"]
    assert folders[0]["folder"] == "projects/site" and folders[0]["path"] == "/alice/projects/site"
    assert fs.cd(folders[0]["folder"])["current_directory"] == "/alice/projects/site"
    assert fs.find(folders[0]["path"])["matches"] == []
    # results name entries outside the current directory by absolute paths, still usable as arguments
    outside = fs.find("/alice", "notes")["matches"][0]
    assert outside["file_name"] == "/alice/notes.txt"
    assert fs.grep(outside["file_name"], "milk")["matching_lines"] == ["buy milk"]


def test_cp_and_mv_of_folders_and_renames():
    fs = small()
    copied = fs.cp("projects", "projects_backup")
    assert copied["folder"] == "projects_backup"
    assert fs.cat("projects_backup/plan.md")["content"] == fs.cat("projects/plan.md")["content"]
    renamed = fs.mv("notes.txt", "todo.txt")
    assert renamed == {"file_name": "todo.txt", "source": "notes.txt", "path": "/alice/todo.txt"}
    assert "cannot copy folder" in fs.cp("projects", "projects/site")["error"]
    fs.cd("projects")
    assert "current directory" in fs.mv("/alice/projects", "/alice/empty")["error"]
    moved = fs.mv("plan.md", "..")
    assert moved["file_name"] == "/alice/plan.md"


def test_reading_tools():
    fs = small()
    assert fs.grep("notes.txt", "buy")["matching_lines"] == ["buy milk"]
    assert fs.grep("notes.txt", "buy", ignore_case=True)["match_count"] == 2
    assert fs.sort("notes.txt")["content"] == "Buy bread\nbuy milk\ncall bob"
    assert fs.sort("notes.txt", reverse=True)["content"] == "call bob\nbuy milk\nBuy bread"
    assert fs.head("notes.txt", 2)["content"] == "buy milk\ncall bob"
    assert fs.tail("notes.txt", 1)["content"] == "Buy bread"
    assert fs.tail("notes.txt", 0)["content"] == ""
    assert fs.wc("notes.txt", "chars")["count"] == len("buy milk\ncall bob\nBuy bread\n")
    usage = fs.du()
    assert usage["disk_usage"] == len("buy milk\ncall bob\nBuy bread\n") + len("one two three\nfour five\n") + 7
    assert usage["file_count"] == 3
    assert fs.du(human_readable=True)["disk_usage"].endswith(" B")
    fs.echo("x" * 5000, "big.txt")
    assert fs.cat("big.txt")["truncated"] is True and len(fs.cat("big.txt")["content"]) == 2000
    assert fs.du(human_readable=True)["disk_usage"] == "4.9 KB"  # 5059 bytes


def test_touch_existing_file_keeps_content():
    fs = small()
    assert fs.touch("notes.txt") == {"file_name": "notes.txt", "created": False}
    assert fs.cat("notes.txt")["content"].startswith("buy milk")


# ----- errors -------------------------------------------------------------------

def test_errors_name_the_bad_value_and_leave_state_unchanged():
    fs = small()
    before = copy.deepcopy(fs._state())  # _state() gives the live structures
    errors = {
        "nowhere": fs.cd("nowhere"),
        "notes.txt": fs.cd("notes.txt"),
        "missing.txt": fs.cat("missing.txt"),
        "projects": fs.rm("projects"),
        "empty": fs.mkdir("empty"),
        "ghost/new": fs.mkdir("ghost/new"),
        "/bob/x": fs.cd("/bob/x"),
        "../..": fs.cd("../.."),
        "nope.txt": fs.cp("nope.txt", "a.txt"),
        "/alice/projects/plan.md": fs.mv("notes.txt", "/alice/projects/plan.md"),
        "site": fs.rmdir("site"),
        "plan.md": fs.rmdir("projects/plan.md"),
        "missing1.txt": fs.diff("missing1.txt", "notes.txt"),
        "bogus": fs.wc("notes.txt", "bogus"),
        "-1": fs.head("notes.txt", -1),
        "''": fs.grep("notes.txt", ""),
    }
    for value, result in errors.items():
        assert set(result) == {"error"}, result
        assert value in result["error"], (value, result["error"])
    assert "not empty" in fs.rmdir("projects")["error"]
    assert fs.cd("..")["error"].startswith("folder '..' goes above the root")
    assert fs._state() == before


def test_cannot_remove_current_directory():
    fs = small()
    fs.cd("projects/site")
    assert "current directory" in fs.rmdir("/alice/projects", recursive=True)["error"]
    fs.cd("/alice")
    assert fs.rmdir("projects", recursive=True) == {"removed": "projects", "removed_files": 1}


def test_state_changes_after_mutation_and_is_json():
    fs, _ = loaded(5)
    before = copy.deepcopy(fs._state())  # _state() gives the live structures
    json.dumps(before)
    created = fs.touch("fresh.txt")
    after = fs._state()
    assert after != before
    json.dumps(after)
    assert fs.cat(created["file_name"]) == {"file_name": "fresh.txt", "content": ""}
    folder = fs.mkdir("fresh_folder")["folder"]
    fs.cd(folder)
    assert fs._state()["current_directory"] == after["current_directory"] + "/fresh_folder"
