"""A domain module's own value samplers (issue 24): SAMPLERS gives new values of named parameters, so a search
finds what the initial state holds; a bad SAMPLERS table is one line naming the module and the parameter."""
from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from sap.api import synthesize
from sap.toolsets.errors import DomainModuleError
from sap.toolsets.modules import module_from_path, toolset_from_module

LIBRARY = '''"""A small library: search the catalogue by a phrase, borrow a book."""
import random

from sap.toolsets.domains.common import ToolError, tool_method

NAME = "library"
TITLES = ["The Silent River", "A Winter Garden", "Notes on Bridges", "The Copper Lantern", "Small Gods of Rain",
          "An Atlas of Tides", "The Glass Orchard", "Letters to a Baker"]


class Library:
    """A library catalogue."""

    def _load_scenario(self, config: dict) -> None:
        self._books = {b["book_id"]: dict(b) for b in config["books"]}

    @tool_method
    def search_catalogue(self, phrase: str) -> dict:
        """Find books whose title holds every word of a phrase.

        Args:
            phrase: words of the title
        """
        words = phrase.lower().split()
        hits = [b for b in self._books.values() if words and all(w in b["title"].lower() for w in words)]
        return {"books": [{"book_id": b["book_id"], "title": b["title"]} for b in hits], "count": len(hits)}

    @tool_method
    def borrow_book(self, book_id: str) -> dict:
        """Borrow a book that is on the shelf.

        Args:
            book_id: the book's id
        """
        book = self._books.get(book_id)
        if book is None:
            raise ToolError(f"no book {book_id!r}")
        if book["out"]:
            raise ToolError(f"book {book_id!r} is already out")
        book["out"] = True
        return {"book_id": book_id, "out": True}


    @tool_method
    def return_book(self, book_id: str) -> dict:
        """Return a borrowed book.

        Args:
            book_id: the book's id
        """
        book = self._books.get(book_id)
        if book is None or not book["out"]:
            raise ToolError(f"book {book_id!r} is not out")
        book["out"] = False
        return {"book_id": book_id, "out": False}

    @tool_method
    def get_book(self, book_id: str) -> dict:
        """Show a book of the catalogue.

        Args:
            book_id: the book's id
        """
        if book_id not in self._books:
            raise ToolError(f"no book {book_id!r}")
        return dict(self._books[book_id])


TOOL_CLASS = Library


def sample_config(seed: int) -> dict:
    """Four of the titles on the shelf."""
    rng = random.Random(seed)
    return {"books": [{"book_id": f"B{i}", "title": t, "out": False}
                      for i, t in enumerate(rng.sample(TITLES, 4))]}
'''
WITH_SAMPLERS = LIBRARY + '''

def _title_word(rng, c0):
    """A word of a title on the shelf, as a reader would type it."""
    title = rng.choice(c0["books"])["title"]
    return rng.choice([w for w in title.split() if len(w) > 3]).lower()


SAMPLERS = {"phrase": _title_word}
'''


def _toolset(tmp_path: Path, text: str, name: str = "library.py"):
    (tmp_path / name).write_text(text)
    return toolset_from_module(module_from_path(tmp_path / name))


def _search_hit_rate(records: list[dict]) -> tuple[int, float]:
    """Search calls in the records, and the share that found at least one book."""
    results = [json.loads(m["content"]) for r in records for m in r["messages"]
               if m["role"] == "tool" and '"books"' in m["content"]]
    return len(results), sum(r["count"] > 0 for r in results) / max(len(results), 1)


@pytest.mark.parametrize("key", ["phrase", "search_catalogue.phrase"])
def test_a_domains_own_sampler_makes_its_searches_find_books(tmp_path, key):
    """A sampler keyed by the parameter, or by `tool.parameter` (that tool's alone), gives the searches' phrases."""
    run = synthesize(_toolset(tmp_path, WITH_SAMPLERS.replace('{"phrase": _title_word}', f'{{"{key}": _title_word}}')),
                     100, seed=0)
    calls, rate = _search_hit_rate(list(run.records))
    assert calls >= 50 and rate >= 0.8, (calls, rate)
    bare = synthesize(_toolset(tmp_path, LIBRARY, "bare.py"), 100, seed=0)
    bare_calls, bare_rate = _search_hit_rate(list(bare.records))
    assert bare_calls and bare_rate < rate, (bare_rate, rate)  # generic words rarely hit a title


@pytest.mark.parametrize("table, says", [
    ('SAMPLERS = {"title": lambda rng, c0: "x"}', "SAMPLERS['title']: no tool takes a parameter 'title'"),
    ('SAMPLERS = {"phrase": "river"}', "SAMPLERS['phrase'] is not callable"),
    ('SAMPLERS = {"phrase": lambda rng, c0: c0["shelves"]}', "SAMPLERS['phrase'](rng, sample_config(0)) failed: "
                                                              "KeyError: 'shelves'"),
    ('SAMPLERS = ["phrase"]', "SAMPLERS must be a dict"),
    ('SAMPLERS = {"borrow_book.phrase": lambda rng, c0: "x"}', "SAMPLERS['borrow_book.phrase']: no tool takes a parameter"),
])
def test_a_bad_samplers_table_is_one_line_naming_the_module_and_parameter(tmp_path, table, says):
    with pytest.raises(DomainModuleError) as err:
        _toolset(tmp_path, LIBRARY + "\n" + table + "\n")
    assert says in str(err.value) and "library.py" in str(err.value)


def test_a_sampler_draws_from_the_planners_seeded_rng():
    from sap.agents.planner import PlanRequest, RulePlanner
    from sap.model import Tag, ToolSpec

    spec = ToolSpec(name="search", description="Search.", parameters={
        "type": "object", "required": ["phrase"], "properties": {"phrase": {"type": "string"}}})
    draw = lambda seed: RulePlanner().bind(PlanRequest(  # noqa: E731
        spec=spec, tags={"phrase": Tag.self_create}, turn=0, index=0, history=[], stated=[], c0={"w": ["a", "b"]},
        rng=random.Random(seed), samplers={"phrase": lambda rng, c0: rng.choice(c0["w"]) + "!"})).args_exec["phrase"]
    assert draw(1) == draw(1) and {draw(s) for s in range(20)} == {"a!", "b!"}
