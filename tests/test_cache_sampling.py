"""Templates (paths, checks with file/field/value errors) and constraint-aware sampling with restarts."""
from __future__ import annotations

import random

import pytest

from sap.cache import CacheIndex
from sap.cache.sampling import Sampler, TemplateAbandoned
from sap.cache.templates import Template, TemplateError, extract, parse_templates
from sap.model import ToolSpec


def _spec(name: str, *params: str) -> ToolSpec:
    return ToolSpec(name=name, parameters={"type": "object", "properties": {p: {"type": "string"} for p in params},
                                           "required": list(params)})


SPECS = {s.name: s for s in (_spec("search_hotels", "city"), _spec("get_hotel", "hotel_id"),
                             _spec("book_room", "hotel_id", "room_id", "guest"))}
CHAIN = """
templates:
  - name: search-get-book
    steps:
      - function: search_hotels
      - function: get_hotel
        bind: {hotel_id: {step: 0, path: "$.hotels[*].id"}}
      - function: book_room
        bind:
          hotel_id: {step: 1, path: "$.hotel_id"}
          room_id: {step: 1, path: "$.rooms[*].room_id"}
"""


def _index() -> CacheIndex:
    index = CacheIndex()
    index.add("search_hotels", {"city": "Oslo"}, {"hotels": [{"id": "H1"}, {"id": "H2"}]})
    index.add("search_hotels", {"city": "Rome"}, {"hotels": [{"id": "H3"}]})
    index.add("get_hotel", {"hotel_id": "H2"}, {"hotel_id": "H2", "rooms": [{"room_id": "R7"}, {"room_id": "R8"}]})
    index.add("get_hotel", {"hotel_id": "H3"}, {"hotel_id": "H3", "rooms": [{"room_id": "R9"}]})
    index.add("book_room", {"hotel_id": "H2", "room_id": "R8", "guest": "Ana Silva"}, {"booking": "B1"})
    index.add("book_room", {"hotel_id": "H3", "room_id": "R1", "guest": "Ana Silva"}, {"booking": "B2"})  # no R1 in H3
    return index


def test_extract_selects_every_item_with_its_concrete_path():
    doc = {"hotels": [{"id": "H1", "tags": ["a"]}, {"id": "H2"}], "odd key": 1}
    assert extract(doc, "$.hotels[*].id") == [("$.hotels[0].id", "H1"), ("$.hotels[1].id", "H2")]
    assert extract(doc, "$.hotels[1].id") == [("$.hotels[1].id", "H2")]
    assert extract(doc, '$["odd key"]') == [('$["odd key"]', 1)]
    assert extract(doc, "$.missing[*].id") == []


def test_sampling_follows_bindings_through_the_reverse_index():
    template = parse_templates(CHAIN, SPECS)[0]
    sampler = Sampler(_index(), max_restarts=50)
    for seed in range(20):
        sample = sampler.sample(template, random.Random(seed))
        search, hotel, booking = sample.steps
        # only Oslo -> H2 -> R8 is a complete chain: Rome's H3 has no booking of a room it lists
        assert (search.args, hotel.args["hotel_id"], booking.args["room_id"]) == ({"city": "Oslo"}, "H2", "R8")
        assert hotel.sources == {"hotel_id": (0, "$.hotels[1].id")}
        assert booking.sources == {"hotel_id": (1, "$.hotel_id"), "room_id": (1, "$.rooms[1].room_id")}
        assert sample.stated() == [{"function": "search_hotels", "arguments": {"city": "Oslo"}},
                                   {"function": "get_hotel", "arguments": {}},
                                   {"function": "book_room", "arguments": {"guest": "Ana Silva"}}]


class CountingSampler(Sampler):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.attempts = 0

    def _attempt(self, template, rng):
        self.attempts += 1
        return super()._attempt(template, rng)


def test_unsatisfiable_template_is_abandoned_after_the_set_number_of_restarts():
    index = _index()
    index.add("get_hotel", {"hotel_id": "H1"}, {"hotel_id": "H1", "rooms": [{"room_id": "R2"}]})  # no booking of R2
    template = parse_templates(CHAIN, SPECS)[0]
    template.steps[2].bind["hotel_id"].path = "$.rooms[*].room_id"  # a room id never equals a hotel id
    sampler = CountingSampler(index, max_restarts=7)
    with pytest.raises(TemplateAbandoned, match=r"abandoned after 7 restarts .*step 2 \(book_room\)"):
        sampler.sample(template, random.Random(0))
    assert sampler.attempts == 8  # the first try plus 7 restarts


def test_restarts_are_counted_when_a_later_choice_succeeds():
    template = parse_templates(CHAIN, SPECS)[0]
    restarts = [Sampler(_index(), max_restarts=50).sample(template, random.Random(s)).restarts for s in range(30)]
    assert max(restarts) > 0 and min(restarts) == 0


def test_optional_step_is_sometimes_left_out_with_its_dependents():
    text = CHAIN.replace("      - function: get_hotel\n", "      - function: get_hotel\n        optional: true\n")
    text = text.replace("      - function: book_room\n", "      - function: book_room\n        optional: true\n")
    template = parse_templates(text, SPECS)[0]
    shapes = {tuple(st.function for st in Sampler(_index(), max_restarts=50, skip_rate=0.5)
                    .sample(template, random.Random(s)).steps) for s in range(40)}
    # book_room needs get_hotel's response: it never appears without it
    assert shapes == {("search_hotels",), ("search_hotels", "get_hotel"), ("search_hotels", "get_hotel", "book_room")}


@pytest.mark.parametrize("edit,message", [
    (("function: get_hotel", "function: get_hotels"), "templates[0].steps[1].function: unknown function 'get_hotels'"),
    (("hotel_id: {step: 0", "hotelid: {step: 0"), "templates[0].steps[1].bind.hotelid: get_hotel has no parameter"),
    (("hotel_id: {step: 1", "hotel_id: {step: 2"), "templates[0].steps[2].bind.hotel_id.step: 2 is not an earlier step"),
    (('"$.hotels[*].id"', '"hotels.id"'), "templates[0].steps[1].bind.hotel_id.path: path 'hotels.id' does not start"),
    (("{step: 0, path", "{step: zero, path"), "templates[0].steps[1].bind.hotel_id.step: Input should be a valid integer"),
    (("optional", "optional"), None),
])
def test_bad_templates_are_refused_naming_file_field_and_value(edit, message):
    text = CHAIN.replace(*edit)
    if message is None:
        assert parse_templates(text, SPECS, "t.yaml")[0].name == "search-get-book"
        return
    with pytest.raises(TemplateError) as err:
        parse_templates(text, SPECS, "t.yaml")
    assert str(err.value).startswith("t.yaml: ") and message in str(err.value)


def test_required_step_cannot_depend_on_an_optional_one():
    text = CHAIN.replace("      - function: get_hotel\n", "      - function: get_hotel\n        optional: true\n")
    with pytest.raises(TemplateError, match=r"steps\[2\].bind.hotel_id.step: 1 is optional"):
        parse_templates(text, SPECS, "t.yaml")


def test_template_roundtrips_through_json():
    template = parse_templates(CHAIN, SPECS)[0]
    assert Template.model_validate_json(template.model_dump_json()) == template


def test_arguments_bound_through_one_listing_come_from_the_same_item():
    """A hotel and one of its rooms, both bound from one search: a cached booking that pairs a hotel with another
    hotel's room is never drawn, and the sources point into the same hotel."""
    specs = {s.name: s for s in (_spec("search_rooms", "city"), _spec("book", "hotel_id", "room_id"))}
    template = parse_templates("""
templates:
  - name: search-book
    steps:
      - function: search_rooms
      - function: book
        bind:
          hotel_id: {step: 0, path: "$.hotels[*].id"}
          room_id: {step: 0, path: "$.hotels[*].rooms[*].room_id"}
""", specs)[0]
    index = CacheIndex()
    index.add("search_rooms", {"city": "Oslo"}, {"hotels": [{"id": "H1", "rooms": [{"room_id": "R1"}]},
                                                            {"id": "H2", "rooms": [{"room_id": "R2"}]}]})
    index.add("book", {"hotel_id": "H1", "room_id": "R2"}, {"booking": "mixed"})  # H2's room booked at H1
    index.add("book", {"hotel_id": "H2", "room_id": "R2"}, {"booking": "B2"})
    for seed in range(20):
        _, book = Sampler(index).sample(template, random.Random(seed)).steps
        assert book.args == {"hotel_id": "H2", "room_id": "R2"}
        assert book.sources == {"hotel_id": (0, "$.hotels[1].id"), "room_id": (0, "$.hotels[1].rooms[0].room_id")}
    index = CacheIndex()
    index.add("search_rooms", {"city": "Oslo"}, {"hotels": [{"id": "H1", "rooms": [{"room_id": "R1"}]},
                                                            {"id": "H2", "rooms": [{"room_id": "R2"}]}]})
    index.add("book", {"hotel_id": "H1", "room_id": "R2"}, {"booking": "mixed"})
    with pytest.raises(TemplateAbandoned, match="from one item"):
        Sampler(index, max_restarts=3).sample(template, random.Random(0))


def test_templates_are_chosen_by_coverage_before_any_repeat():
    from sap.cache.templates import Binding, Step, by_coverage, coverage_units

    def chain(*names: str) -> Template:
        steps = [Step(function=names[0])] + [Step(function=n, bind={"x": Binding(step=k, path="$.x")})
                                             for k, n in enumerate(names[1:])]
        return Template(name="->".join(names), steps=steps)

    ab, abc, cd, ac = chain("a", "b"), chain("a", "b", "c"), chain("c", "d"), chain("a", "c")
    # the first two in the given order would leave out d and the edges c->d and a->c
    assert [t.name for t in by_coverage([ab, abc, cd, ac], 2)] == ["a->b->c", "c->d"]
    picked = by_coverage([ab, abc, cd, ac], 10)
    assert [t.name for t in picked] == ["a->b->c", "c->d", "a->c", "a->b"]  # a->b adds nothing: it comes last
    assert set().union(*map(coverage_units, picked[:3])) == set().union(*map(coverage_units, [ab, abc, cd, ac]))
    assert coverage_units(ac) == {("tool", "a"), ("tool", "c"), ("edge", "a", "c")}
