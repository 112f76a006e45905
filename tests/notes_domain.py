"""A notes vault whose tool docs are written as MCP servers write them (long first sentences: "Read the complete
text of a note from the vault as plain text."), with no phrase book: the generic wording tests run on it."""
from __future__ import annotations

import random

from sap.toolsets.domains.common import ToolError, tool_method

NAME = "notes"
DESCRIPTION = "A vault of text notes in folders: read, list, create, write, move and search them."
ERROR_RESULTS_CHANGE_NOTHING = True


class NotesVault:
    """Notes (path and text) and folders by path; "/" separates folders."""

    def __init__(self) -> None:
        self._notes: dict[str, str] = {}
        self._folders: set[str] = set()

    def _load_scenario(self, config: dict) -> None:
        self._notes = {n["path"]: n["text"] for n in config.get("notes", [])}
        self._folders = set(config.get("folders", []))

    def _state(self) -> dict:
        return {"notes": [{"path": p, "text": t} for p, t in sorted(self._notes.items())],
                "folders": sorted(self._folders)}

    def _place(self, path: str) -> None:
        """A note's folder exists once a note is put in it."""
        if "/" in path:
            self._folders.add(path.rsplit("/", 1)[0])

    @tool_method
    def read_note(self, path: str) -> dict:
        """Read the complete text of a note from the vault as plain text.

        Args:
            path: the note's path
        """
        if path not in self._notes:
            raise ToolError(f"no note {path}")
        return {"path": path, "text": self._notes[path]}

    @tool_method
    def list_folder(self, path: str) -> dict:
        """Get a detailed listing of every note and folder in a specified folder path.

        Args:
            path: the folder's path
        """
        if path not in self._folders:
            raise ToolError(f"no folder {path}")
        notes = [p for p in self._notes if p.rsplit("/", 1)[0] == path]
        return {"path": path, "notes": sorted(notes)}

    @tool_method
    def create_folder(self, path: str) -> dict:
        """Create a new folder or make sure that a folder exists in the vault.

        Args:
            path: the folder's path
        """
        self._folders.add(path)
        return {"path": path, "created": True}

    @tool_method
    def write_note(self, path: str, content: str) -> dict:
        """Create a new note or completely overwrite an existing note with new text.

        Args:
            path: the note's path
            content: the note's new text
        """
        self._place(path)
        self._notes[path] = content
        return {"path": path, "written": len(content)}

    @tool_method
    def move_note(self, source: str, destination: str) -> dict:
        """Move or rename a note, from one folder of the vault to another one.

        Args:
            source: the note's path
            destination: the note's new path
        """
        if source not in self._notes:
            raise ToolError(f"no note {source}")
        self._place(destination)
        self._notes[destination] = self._notes.pop(source)
        return {"source": source, "destination": destination}

    @tool_method
    def search_notes(self, path: str, pattern: str) -> dict:
        """Recursively search for notes whose text contains a given word or pattern.

        Args:
            path: the folder to search in
            pattern: the word to look for
        """
        found = [p for p, text in self._notes.items() if p.startswith(path + "/") and pattern in text]
        return {"matches": sorted(found)}


TOOL_CLASS = NotesVault

_WORDS = ["budget", "meeting", "travel", "ideas", "groceries", "release", "garden"]


def sample_config(seed: int) -> dict:
    """Two folders with two or three notes each, their texts drawn from a few words."""
    rng = random.Random(seed)
    folders = rng.sample(["work", "home", "trips", "drafts"], 2)
    notes = [{"path": f"{f}/{w}.txt", "text": f"{w}: " + " ".join(rng.sample(_WORDS, 3))} for f in folders
             for w in rng.sample(_WORDS, rng.randint(2, 3))]
    return {"notes": notes, "folders": folders}
