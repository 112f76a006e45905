"""Virtual in-memory file system with a current directory: folders and text files handled by shell-like tools."""
from __future__ import annotations

import copy
import difflib
import random
from typing import Iterator, Literal, Optional

from sap.jsonutil import json_copy
from sap.toolsets.domains.common import ToolError, tool_method

NAME = "filesystem"
DESCRIPTION = (
    "Virtual file system with a current directory: list, navigate, create, read, search, copy, move, "
    "compare and delete folders and text files with shell-like commands."
)

WcMode = Literal["lines", "words", "chars"]
MAX_LISTED = 10
MAX_CHARS = 2000
MAX_DIFF_LINES = 20
DEFAULT_ROOT = "root"

# Path conventions shared by all tools:
# - a path is relative to the current directory ("notes.txt", "projects/site", "../logs") or absolute,
#   starting with the root folder ("/alice/projects/site");
# - every result names files with `file_name` and folders with `folder` (and `dir_name`), given relative
#   to the current directory when they lie below it, so they can be passed straight to the next tool.




def _new_dir() -> dict:
    return {"type": "directory", "contents": {}}


def _new_file(content: str = "") -> dict:
    return {"type": "file", "content": content}


def _is_dir(node: dict | None) -> bool:
    return node is not None and node["type"] == "directory"


def _is_file(node: dict | None) -> bool:
    return node is not None and node["type"] == "file"


def _size(node: dict) -> int:
    """Size in bytes of a file, or of all files below a directory."""
    if _is_file(node):
        return len(node["content"].encode("utf-8"))
    return sum(_size(child) for child in node["contents"].values())


def _file_count(node: dict) -> int:
    if _is_file(node):
        return 1
    return sum(_file_count(child) for child in node["contents"].values())


def _human(size: int) -> str:
    if size < 1024:
        return f"{size} B"
    if size < 1024 * 1024:
        return f"{size / 1024:.1f} KB"
    return f"{size / (1024 * 1024):.1f} MB"


def _text(content: str) -> dict:
    """A text field, truncated to MAX_CHARS characters."""
    if len(content) <= MAX_CHARS:
        return {"content": content}
    return {"content": content[:MAX_CHARS], "truncated": True}


class FileSystem:
    """A tree of folders and text files below one root folder, with a current directory."""

    def __init__(self) -> None:
        self._root_name = DEFAULT_ROOT
        self._root = _new_dir()
        self._cwd: list[str] = []

    def _load_scenario(self, config: dict) -> None:
        tree = config.get("root") or {DEFAULT_ROOT: _new_dir()}
        if len(tree) != 1:
            raise ValueError(f"config 'root' must hold exactly one root folder, got {sorted(tree)!r}")
        (self._root_name, root), = tree.items()
        if not _is_dir(root):
            raise ValueError(f"root {self._root_name!r} must be a directory")
        self._root = json_copy(root)
        self._cwd = []
        start = config.get("current_directory")
        if start:
            try:
                self._cwd = self._dir(start, "current_directory")[0]
            except ToolError as exc:
                raise ValueError(f"bad config: {exc}") from exc

    def _state(self) -> dict:
        return {"root": {self._root_name: self._root}, "current_directory": self._abs(self._cwd)}

    # ----- path helpers --------------------------------------------------------

    def _abs(self, parts: list[str]) -> str:
        return "/" + "/".join([self._root_name, *parts])

    def _rel(self, parts: list[str]) -> str:
        """`parts` relative to the current directory if below it, else as an absolute path."""
        depth = len(self._cwd)
        if len(parts) > depth and parts[:depth] == self._cwd:
            return "/".join(parts[depth:])
        return self._abs(parts)

    def _resolve(self, path: str, label: str) -> list[str]:
        """The components below the root of `path` (relative to the current directory unless absolute)."""
        if not isinstance(path, str) or not path.strip():
            raise ToolError(f"{label} must be a non-empty path, got {path!r}")
        path = path.strip()
        names = [n for n in path.split("/") if n]
        parts = list(self._cwd)
        if path.startswith("/"):
            if names and names[0] != self._root_name:
                raise ToolError(f"{label} {path!r} is outside the file system: absolute paths start with "
                                 f"{self._abs([])!r}")
            names, parts = names[1:], []
        for name in names:
            if name == "..":
                if not parts:
                    raise ToolError(f"{label} {path!r} goes above the root folder {self._abs([])!r}")
                parts.pop()
            elif name != ".":
                parts.append(name)
        return parts

    def _lookup(self, parts: list[str]) -> dict | None:
        node = self._root
        for name in parts:
            if not _is_dir(node) or name not in node["contents"]:
                return None
            node = node["contents"][name]
        return node

    def _existing(self, path: str, label: str) -> tuple[list[str], dict]:
        parts = self._resolve(path, label)
        node = self._lookup(parts)
        if node is None:
            raise ToolError(f"no such file or folder: {label} {path!r} in {self._abs(self._cwd)!r}")
        return parts, node

    def _file(self, path: str, label: str = "file_name") -> tuple[list[str], dict]:
        parts, node = self._existing(path, label)
        if not _is_file(node):
            raise ToolError(f"{label} {path!r} is a folder, not a file")
        return parts, node

    def _dir(self, path: str, label: str) -> tuple[list[str], dict]:
        parts, node = self._existing(path, label)
        if not _is_dir(node):
            raise ToolError(f"{label} {path!r} is a file, not a folder")
        return parts, node

    def _slot(self, path: str, label: str) -> tuple[list[str], dict]:
        """Components of a path whose parent folder exists, and that parent folder."""
        parts = self._resolve(path, label)
        if not parts:
            raise ToolError(f"{label} {path!r} is the root folder")
        parent = self._lookup(parts[:-1])
        if not _is_dir(parent):
            raise ToolError(f"{label} {path!r}: parent folder {self._abs(parts[:-1])!r} does not exist")
        return parts, parent

    def _vacant(self, path: str, label: str) -> tuple[list[str], dict]:
        parts, parent = self._slot(path, label)
        if parts[-1] in parent["contents"]:
            raise ToolError(f"{label} {path!r} already exists in {self._abs(parts[:-1])!r}")
        return parts, parent

    def _lines(self, file_name: str) -> tuple[str, list[str]]:
        parts, node = self._file(file_name)
        return self._rel(parts), node["content"].splitlines()

    def _folder_ref(self, parts: list[str]) -> dict:
        """How results name a folder: as `folder` (for cd) and `dir_name` (for rmdir)."""
        return {"folder": self._rel(parts), "dir_name": self._rel(parts)}

    def _ref(self, parts: list[str], node: dict) -> dict:
        """How results name a file or a folder so that later tools can take it as an argument."""
        return {"file_name": self._rel(parts)} if _is_file(node) else self._folder_ref(parts)

    def _transfer(self, file_name: str, destination: str, keep_source: bool) -> dict:
        """Copy (keep_source) or move a file or folder to `destination` (an existing folder or a new name)."""
        source, node = self._existing(file_name, "file_name")
        if not source:
            raise ToolError(f"file_name {file_name!r} is the root folder")
        target = self._resolve(destination, "destination")
        if _is_dir(self._lookup(target)):
            target = target + [source[-1]]
        verb = "copy" if keep_source else "move"
        if _is_dir(node) and target[:len(source)] == source:
            raise ToolError(f"cannot {verb} folder {file_name!r} into itself ({destination!r})")
        if not keep_source and self._cwd[:len(source)] == source:
            raise ToolError(f"cannot move {file_name!r}: it contains the current directory")
        target, parent = self._vacant(self._abs(target), "destination")
        parent["contents"][target[-1]] = copy.deepcopy(node) if keep_source else node
        if not keep_source:
            del self._lookup(source[:-1])["contents"][source[-1]]
        return {**self._ref(target, node), "source": self._rel(source), "path": self._abs(target)}

    # ----- navigation ------------------------------------------------------------

    @tool_method
    def pwd(self) -> dict:
        """Show the absolute path of the current directory."""
        return {"current_directory": self._abs(self._cwd)}

    @tool_method
    def ls(self, show_hidden: bool = False) -> dict:
        """List the files and folders in the current directory (at most 10 of each, sorted by name).

        Args:
            show_hidden: Also list hidden entries, whose names start with a dot.
        """
        contents = self._lookup(self._cwd)["contents"]
        names = sorted(n for n in contents if show_hidden or not n.startswith("."))
        files = [n for n in names if _is_file(contents[n])]
        folders = [n for n in names if _is_dir(contents[n])]
        return {
            "current_directory": self._abs(self._cwd),
            "files": [{"file_name": n, "size": _size(contents[n])} for n in files[:MAX_LISTED]],
            "directories": [{"folder": n, "dir_name": n} for n in folders[:MAX_LISTED]],
            "file_count": len(files),
            "directory_count": len(folders),
        }

    @tool_method
    def cd(self, folder: str) -> dict:
        """Change the current directory to a folder; ".." goes to the parent folder.

        Args:
            folder: The folder to enter: a name in the current directory, "..", or a path such as "projects/site".
        """
        self._cwd = self._dir(folder, "folder")[0]
        return {"current_directory": self._abs(self._cwd)}

    @tool_method
    def find(self, path: str = ".", name: Optional[str] = None) -> dict:
        """Search a folder recursively for files and folders whose name contains a text (case-insensitive).

        Args:
            path: The folder to search in; defaults to the current directory.
            name: Text the file or folder name must contain; omit to list everything below the folder.
        """
        start, node = self._dir(path, "path")
        wanted = (name or "").lower()
        hits = [(parts, child) for parts, child in self._walk(start, node) if wanted in parts[-1].lower()]
        files = [parts for parts, child in hits if _is_file(child)]
        folders = [parts for parts, child in hits if _is_dir(child)]
        return {
            "matches": [{"path": self._abs(p), "file_name": self._rel(p)} for p in files[:MAX_LISTED]],
            "folders": [{"path": self._abs(p), **self._folder_ref(p)} for p in folders[:MAX_LISTED]],
            "match_count": len(files),
            "folder_count": len(folders),
        }

    def _walk(self, parts: list[str], node: dict) -> Iterator[tuple[list[str], dict]]:
        """Every entry below folder `node` (depth first, sorted by name) with its components."""
        for child_name in sorted(node["contents"]):
            child = node["contents"][child_name]
            yield parts + [child_name], child
            if _is_dir(child):
                yield from self._walk(parts + [child_name], child)

    @tool_method
    def du(self, human_readable: bool = False) -> dict:
        """Show the total size of all files in the current directory and below it.

        Args:
            human_readable: Give the size as text with a unit (e.g. "1.4 KB") instead of a number of bytes.
        """
        node = self._lookup(self._cwd)
        size = _size(node)
        return {
            "current_directory": self._abs(self._cwd),
            "disk_usage": _human(size) if human_readable else size,
            "file_count": _file_count(node),
        }

    # ----- creating and changing -----------------------------------------------------

    @tool_method
    def mkdir(self, dir_name: str) -> dict:
        """Create a new, empty folder (its parent folder must exist).

        Args:
            dir_name: Name (or path) of the new folder, e.g. "archive" or "projects/old".
        """
        parts, parent = self._vacant(dir_name, "dir_name")
        parent["contents"][parts[-1]] = _new_dir()
        return {**self._folder_ref(parts), "path": self._abs(parts)}

    @tool_method
    def touch(self, file_name: str) -> dict:
        """Create an empty file if it does not exist yet (an existing file is left unchanged).

        Args:
            file_name: Name (or path) of the file, e.g. "notes.txt" or "reports/summary.txt".
        """
        parts, parent = self._slot(file_name, "file_name")
        existing = parent["contents"].get(parts[-1])
        if _is_dir(existing):
            raise ToolError(f"file_name {file_name!r} is a folder, not a file")
        if existing is None:
            parent["contents"][parts[-1]] = _new_file()
        return {"file_name": self._rel(parts), "created": existing is None}

    @tool_method
    def echo(self, content: str, file_name: str, append: bool = False) -> dict:
        """Write text to a file, creating the file if needed; replaces its contents unless appending.

        Args:
            content: The text to write.
            file_name: Name (or path) of the file to write to.
            append: Add the text as new line(s) at the end of the file instead of replacing its contents.
        """
        if not isinstance(content, str):
            raise ToolError(f"content must be text, got {content!r}")
        parts, parent = self._slot(file_name, "file_name")
        node = parent["contents"].get(parts[-1]) or _new_file()
        if _is_dir(node):
            raise ToolError(f"file_name {file_name!r} is a folder, not a file")
        old = node["content"] if append else ""
        node["content"] = old + ("\n" if old and not old.endswith("\n") else "") + content
        parent["contents"][parts[-1]] = node
        return {"file_name": self._rel(parts), "chars": len(node["content"]), "appended": append}

    @tool_method
    def cp(self, file_name: str, destination: str) -> dict:
        """Copy a file (or a whole folder) into an existing folder or to a new name; never overwrites.

        Args:
            file_name: The file or folder to copy (the source), e.g. "notes.txt".
            destination: An existing folder to copy into, or the new name (or path) of the copy.
        """
        return self._transfer(file_name, destination, keep_source=True)

    @tool_method
    def mv(self, file_name: str, destination: str) -> dict:
        """Move or rename a file (or a folder) into an existing folder or to a new name; never overwrites.

        Args:
            file_name: The file or folder to move (the source), e.g. "draft.txt".
            destination: An existing folder to move into, or the new name (or path).
        """
        return self._transfer(file_name, destination, keep_source=False)

    @tool_method
    def rm(self, file_name: str) -> dict:
        """Delete a file (use rmdir for folders).

        Args:
            file_name: Name (or path) of the file to delete.
        """
        parts, _ = self._file(file_name)
        del self._lookup(parts[:-1])["contents"][parts[-1]]
        return {"removed": self._rel(parts), "current_directory": self._abs(self._cwd)}

    @tool_method
    def rmdir(self, dir_name: str, recursive: bool = False) -> dict:
        """Delete a folder; it must be empty unless recursive is set.

        Args:
            dir_name: Name (or path) of the folder to delete.
            recursive: Also delete everything inside the folder.
        """
        parts, node = self._dir(dir_name, "dir_name")
        if self._cwd[:len(parts)] == parts:
            raise ToolError(f"cannot remove dir_name {dir_name!r}: it is or contains the current directory")
        if node["contents"] and not recursive:
            raise ToolError(f"folder {dir_name!r} is not empty ({len(node['contents'])} entries); "
                             f"set recursive to delete it with its contents")
        del self._lookup(parts[:-1])["contents"][parts[-1]]
        return {"removed": self._rel(parts), "removed_files": _file_count(node)}

    # ----- reading ------------------------------------------------------------------

    @tool_method
    def cat(self, file_name: str) -> dict:
        """Show the full text of a file (long files are truncated to 2000 characters).

        Args:
            file_name: Name (or path) of the file to read.
        """
        parts, node = self._file(file_name)
        return {"file_name": self._rel(parts), **_text(node["content"])}

    @tool_method
    def head(self, file_name: str, lines: int = 10) -> dict:
        """Show the first lines of a file.

        Args:
            file_name: Name (or path) of the file to read.
            lines: How many lines to show from the start.
        """
        return self._slice(file_name, lines, from_end=False)

    @tool_method
    def tail(self, file_name: str, lines: int = 10) -> dict:
        """Show the last lines of a file.

        Args:
            file_name: Name (or path) of the file to read.
            lines: How many lines to show from the end.
        """
        return self._slice(file_name, lines, from_end=True)

    def _slice(self, file_name: str, lines: int, from_end: bool) -> dict:
        if isinstance(lines, bool) or not isinstance(lines, int) or lines < 0:
            raise ToolError(f"lines must be a non-negative whole number, got {lines!r}")
        name, all_lines = self._lines(file_name)
        chosen = (all_lines[-lines:] if lines else []) if from_end else all_lines[:lines]
        return {"file_name": name, **_text("\n".join(chosen)), "line_count": len(chosen)}

    @tool_method
    def grep(self, file_name: str, pattern: str, ignore_case: bool = False) -> dict:
        """Find the lines of a file that contain a text (plain text, not a regular expression).

        Args:
            file_name: Name (or path) of the file to search.
            pattern: The text to look for.
            ignore_case: Match regardless of upper or lower case.
        """
        if not isinstance(pattern, str) or not pattern:
            raise ToolError(f"pattern must be non-empty text, got {pattern!r}")
        name, lines = self._lines(file_name)
        fold = str.lower if ignore_case else str
        found = [line for line in lines if fold(pattern) in fold(line)]
        return {"file_name": name, "pattern": pattern, "matching_lines": found[:MAX_LISTED],
                "match_count": len(found)}

    @tool_method
    def wc(self, file_name: str, mode: WcMode = "lines") -> dict:
        """Count the lines, words or characters of a file.

        Args:
            file_name: Name (or path) of the file to count.
            mode: What to count: "lines", "words" or "chars".
        """
        parts, node = self._file(file_name)
        content = node["content"]
        counters = {"lines": lambda: len(content.splitlines()), "words": lambda: len(content.split()),
                    "chars": lambda: len(content)}
        if mode not in counters:
            raise ToolError(f"mode must be one of {sorted(counters)}, got {mode!r}")
        return {"file_name": self._rel(parts), "mode": mode, "count": counters[mode]()}

    @tool_method
    def sort(self, file_name: str, reverse: bool = False) -> dict:
        """Show the lines of a file sorted alphabetically (the file itself is not changed).

        Args:
            file_name: Name (or path) of the file to sort.
            reverse: Sort in descending order.
        """
        name, lines = self._lines(file_name)
        return {"file_name": name, **_text("\n".join(sorted(lines, reverse=reverse)))}

    @tool_method
    def diff(self, file_name1: str, file_name2: str) -> dict:
        """Compare two files line by line and show the differences in unified diff format.

        Args:
            file_name1: Name (or path) of the first (original) file.
            file_name2: Name (or path) of the second (changed) file.
        """
        name1, lines1 = self._lines(file_name1)
        name2, lines2 = self._lines(file_name2)
        changes = list(difflib.unified_diff(lines1, lines2, fromfile=name1, tofile=name2, lineterm=""))
        result = {"file_name1": name1, "file_name2": name2, "identical": not changes,
                  "diff_lines": changes[:MAX_DIFF_LINES]}
        if len(changes) > MAX_DIFF_LINES:
            result["truncated"] = True
        return result


TOOL_CLASS = FileSystem
# Error results leave the state untouched (checked in tests/test_domains_contract.py).
ERROR_RESULTS_CHANGE_NOTHING = True


# ----- sample configurations -----------------------------------------------------------

_FIRST_NAMES = ["alice", "bruno", "chen", "dana", "emeka", "fatima", "gustav", "hana", "ivan", "julia",
                "kofi", "leila", "marco", "nina", "omar", "priya", "quentin", "rosa", "sven", "tara"]
_LAST_NAMES = ["garcia", "kim", "novak", "okafor", "patel", "rossi", "schmidt", "tanaka", "walsh", "yilmaz"]

_TOP_FOLDERS = {
    "projects": ["website", "data_pipeline", "mobile_app", "thesis", "scripts", "prototype"],
    "reports": ["2023", "2024", "quarterly", "monthly", "drafts"],
    "logs": ["server", "application", "nginx", "cron", "old_logs"],
    "photos": ["vacation", "family", "events", "raw", "edited"],
    "documents": ["letters", "contracts", "receipts", "taxes", "manuals"],
    "notes": ["meetings", "ideas", "journal", "reading"],
    "backups": ["weekly", "monthly", "config_backup"],
    "music": ["playlists", "lyrics", "practice"],
}
_SUBFOLDERS = ["archive", "drafts", "final", "misc", "shared", "v1", "v2", "temp", "old", "review"]

_KIND_FILES = {
    "log": ["server.log", "error.log", "access.log", "debug.log", "app.log", "cron.log", "system.log"],
    "csv": ["budget.csv", "sales.csv", "expenses.csv", "inventory.csv", "contacts.csv", "metrics.csv",
            "album_index.csv"],
    "prose": ["summary.txt", "report.txt", "meeting_notes.txt", "letter.txt", "README.md", "ideas.md",
              "journal.txt", "draft.txt", "captions.txt", "notes.md"],
    "todo": ["todo.txt", "checklist.txt", "tasks.md", "shopping_list.txt", "reading_list.txt"],
    "code": ["main.py", "utils.py", "cleanup.py", "analysis.py", "build.sh"],
    "config": ["config.ini", "settings.conf", "config.yaml", "preferences.cfg"],
}
_CATEGORY_KINDS = {
    "projects": ["code", "todo", "prose", "config"], "reports": ["csv", "prose"], "logs": ["log"],
    "photos": ["prose", "csv"], "documents": ["prose", "csv", "todo"], "notes": ["prose", "todo"],
    "backups": ["config", "log", "csv"], "music": ["prose", "todo"], "": ["todo", "prose", "config"],
}

_SUBJECTS = ["The team", "Our client", "The new intern", "Marketing", "The budget committee", "The vendor",
             "The design group", "Support", "The board", "My manager"]
_VERBS = ["approved", "postponed", "reviewed", "updated", "rejected", "discussed", "finalized", "questioned"]
_OBJECTS = ["the quarterly budget", "the landing page", "the release plan", "the vendor contract",
            "the backup schedule", "the onboarding guide", "the photo archive", "the travel itinerary",
            "the server migration", "the holiday schedule"]
_TAILS = ["after a long meeting", "ahead of schedule", "on Friday", "without major issues",
          "pending further input", "for the second time", "before the deadline", "with minor changes"]
_TASK_VERBS = ["Review", "Update", "Email", "Print", "Renew", "Schedule", "Back up", "Clean up", "Call about"]
_LEVELS = ["INFO", "INFO", "INFO", "WARNING", "ERROR", "DEBUG"]
_COMPONENTS = ["auth", "db", "scheduler", "api", "cache", "worker", "mailer"]
_MESSAGES = ["connection established", "request timed out", "user login succeeded", "disk usage at 85%",
             "retrying job", "cache miss for session key", "backup completed", "failed to parse config",
             "slow query detected", "certificate expires in 14 days"]
_ITEMS = ["paper", "toner", "laptop stand", "monitor", "keyboard", "coffee beans", "cables", "chairs", "lamps"]
_CITIES = ["Lisbon", "Oslo", "Kyoto", "Denver", "Nairobi", "Lima", "Porto", "Seoul", "Austin", "Dublin"]
_MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
_NOUNS = ["records", "rows", "images", "users", "orders", "events"]
_SETTINGS = {"timeout": ["30", "60", "120"], "retries": ["3", "5"], "log_level": ["info", "debug", "warning"],
             "theme": ["dark", "light"], "max_connections": ["10", "50", "100"], "language": ["en", "de", "fr"],
             "port": ["8080", "5432", "3000"], "backup_dir": ["/backups", "~/archive"]}
_COMMANDS = ["ls -la", "cd projects", "git status", "cat todo.txt", "grep ERROR server.log", "du -h",
             "python main.py", "mkdir archive", "tail -n 20 app.log"]


def _prose_line(rng: random.Random) -> str:
    return f"{rng.choice(_SUBJECTS)} {rng.choice(_VERBS)} {rng.choice(_OBJECTS)} {rng.choice(_TAILS)}."


def _todo_line(rng: random.Random) -> str:
    return f"- [{rng.choice(' x')}] {rng.choice(_TASK_VERBS)} {rng.choice(_OBJECTS)}"


def _log_line(rng: random.Random) -> str:
    stamp = (f"2024-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d} "
             f"{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}")
    return f"{stamp} {rng.choice(_LEVELS)} {rng.choice(_COMPONENTS)}: {rng.choice(_MESSAGES)}"


def _code_line(rng: random.Random) -> str:
    verb, noun = rng.choice(["load", "clean", "export", "count", "merge"]), rng.choice(_NOUNS)
    return rng.choice([f"def {verb}_{noun}(path):\n    return {verb}(path, limit={rng.randint(10, 500)})",
                       f"# TODO: {verb} {noun} in batches", f"{noun} = {verb}_{noun}('data/{noun}.csv')"])


def _item_row(rng: random.Random) -> str:
    return f"{rng.choice(_ITEMS)},{rng.randint(1, 50)},{rng.randint(2, 400)}.{rng.randint(0, 99):02d}"


def _contact_row(rng: random.Random) -> str:
    first = rng.choice(_FIRST_NAMES)
    return f"{first.title()},{first}@example.com,{rng.choice(_CITIES)}"


def _month_row(rng: random.Random) -> str:
    return f"{rng.choice(_MONTHS)},{rng.randint(1000, 9000)},{rng.randint(500, 7000)}"


def _photo_row(rng: random.Random) -> str:
    date = f"2024-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
    return f"IMG_{rng.randint(1000, 9999)}.jpg,{rng.choice(_CITIES)},{date}"


_CSV_SCHEMAS = {  # file name stem -> (header, row maker)
    "inventory": ("item,quantity,price", _item_row), "expenses": ("item,quantity,price", _item_row),
    "contacts": ("name,email,city", _contact_row), "budget": ("month,revenue,expenses", _month_row),
    "sales": ("month,revenue,expenses", _month_row), "metrics": ("month,revenue,expenses", _month_row),
    "album_index": ("file,location,date", _photo_row),
}
_LINE_MAKERS = {"log": _log_line, "prose": _prose_line, "todo": _todo_line, "code": _code_line}


def _sample_content(rng: random.Random, kind: str, name: str) -> str:
    count = rng.randint(3, 8)
    if kind == "csv":
        header, row = next(schema for stem, schema in _CSV_SCHEMAS.items() if name.startswith(stem))
        return "\n".join([header] + [row(rng) for _ in range(count)]) + "\n"
    if kind == "config":
        return "".join(f"{key} = {rng.choice(_SETTINGS[key])}\n" for key in rng.sample(sorted(_SETTINGS), count))
    return "\n".join(_LINE_MAKERS[kind](rng) for _ in range(count)) + "\n"


def _free_name(contents: dict, candidates: list[str], rng: random.Random) -> str:
    free = [n for n in candidates if n not in contents]
    if free:
        return rng.choice(free)
    stem, dot, ext = rng.choice(candidates).partition(".")
    number = 2
    while f"{stem}_{number}{dot}{ext}" in contents:
        number += 1
    return f"{stem}_{number}{dot}{ext}"


def _sample_tree(rng: random.Random) -> tuple[dict, list[tuple[dict, str, list[str]]]]:
    """A root folder with 2-4 levels of category folders; returns it and its folders with their category."""
    root = _new_dir()
    folders: list[tuple[dict, str, list[str]]] = [(root, "", [])]
    depth = rng.randint(2, 4)
    for i, category in enumerate(rng.sample(sorted(_TOP_FOLDERS), rng.randint(3, 5))):
        top = _new_dir()
        root["contents"][category] = top
        found: list = [(top, [category])]
        _grow_tree(rng, top, [category], _TOP_FOLDERS[category], depth - 1 if i == 0 else rng.randint(0, depth - 1),
                   found)
        folders += [(node, category, parts) for node, parts in found]
    return root, folders


def _grow_tree(rng: random.Random, node: dict, parts: list[str], pool: list[str], levels: int, found: list) -> None:
    """Add `levels` levels of subfolders below `node`; the first child always reaches the full depth."""
    if levels <= 0:
        return
    for i, name in enumerate(rng.sample(pool, rng.randint(1, 2))):
        child = _new_dir()
        node["contents"][name] = child
        found.append((child, parts + [name]))
        _grow_tree(rng, child, parts + [name], _SUBFOLDERS, levels - 1 if i == 0 else rng.randint(0, levels - 1),
                   found)


def _add_variant(rng: random.Random, folder: dict, name: str) -> None:
    """Add a slightly edited older copy of file `name` next to it (something for diff to find)."""
    lines = folder["contents"][name]["content"].splitlines()
    lines[rng.randrange(len(lines))] = "(older version) " + rng.choice(_TAILS)
    stem, dot, ext = name.partition(".")
    copy_name = _free_name(folder["contents"], [f"{stem}_old{dot}{ext}", f"{stem}_backup{dot}{ext}"], rng)
    folder["contents"][copy_name] = _new_file("\n".join(lines) + "\n")


def sample_config(seed: int) -> dict:
    """A random but deterministic home folder: nested folders and 8-20 text files, plus the starting directory."""
    rng = random.Random(seed)
    first, last = rng.choice(_FIRST_NAMES), rng.choice(_LAST_NAMES)
    root_name = rng.choice([first, f"{first}_{last}", f"{first[0]}{last}", f"{first}{rng.randint(1, 99)}"])
    root, folders = _sample_tree(rng)
    with_variant, with_hidden = rng.random() < 0.7, rng.random() < 0.5
    placed = []
    for _ in range(rng.randint(8, 20) - with_variant - with_hidden):
        folder, category, parts = rng.choice(folders)
        kind = rng.choice(_CATEGORY_KINDS[category])
        name = _free_name(folder["contents"], _KIND_FILES[kind], rng)
        folder["contents"][name] = _new_file(_sample_content(rng, kind, name))
        placed.append((folder, name))
    if with_variant:
        _add_variant(rng, *rng.choice(placed))
    if with_hidden:
        root["contents"][".bash_history"] = _new_file("\n".join(rng.sample(_COMMANDS, 5)) + "\n")
    tops = [parts for _, _, parts in folders if len(parts) == 1]
    start = rng.choice(tops) if rng.random() < 0.3 else []
    return {"root": {root_name: root}, "current_directory": "/" + "/".join([root_name, *start])}
