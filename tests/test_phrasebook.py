"""Phrase books and the rule messenger's user text: docstrings made imperative, phrase files checked against their
toolset, values a wording conveys, withheld values left out silently, and no internals in the text."""
from __future__ import annotations

import random
import re
from pathlib import Path

import pytest

from sap.agents.judge import content_words, stem
from sap.agents.messenger import Mention, RuleMessenger, reveal_message
from sap.provenance.leaks import find_leaks, names_of
from sap.provenance.phrasebook import (PHRASE_DIR, PLACEHOLDER, PhraseBookError, _conditionals, conveyed,
                                      load_phrase_file, phrase_book, phrase_file_names, phrase_regex)
from sap.api import synthesize
from sap.errors import ToolsetError
from sap.model import ArgProvenance, Selector, Tag, ToolCall, ToolSpec, Turn
from sap.provenance.checks import mentions, states_value
from sap.text import task_phrase
from sap.toolsets import load_toolset

BUILT_IN = ["filesystem", "store", "travel", "tau2/retail", "tau2/airline"]
BFCL_SETS = ["bfcl/VehicleControlAPI", "bfcl/TravelAPI", "bfcl/TradingBot", "bfcl/GorillaFileSystem+TwitterAPI",
             "bfcl/MessageAPI+TicketAPI", "bfcl/MathAPI"]
SHELL_NAMES = {"pwd", "ls", "cd", "du", "mkdir", "rmdir", "wc", "grep", "rm", "cp", "mv", "echo"}


def _toolset(name: str):
    """A built-in toolset, or a skip when its optional backend is not installed."""
    try:
        return load_toolset(name)
    except ToolsetError as exc:
        pytest.skip(f"{name}: {exc}")


@pytest.mark.parametrize("doc, phrase", [
    ("Checks the tire pressure of the vehicle.", "check the tire pressure of the vehicle"),
    ("Retrieves the list of flights. More text.", "retrieve the list of flights"),
    ("Applies the brake.", "apply the brake"),
    ("Presses the brake pedal based on pedal position.", "press the brake pedal based on pedal position"),
    ("Lists all files (hidden too) in the folder; sorted.", "list all files in the folder"),
    ("Gets the current speed.", "get the current speed"),
    ("This tool fetches the weather.", "fetch the weather"),
    ("Cancel an order.", "cancel an order"),
])
def test_a_third_person_docstring_becomes_an_imperative(doc, phrase):
    assert task_phrase(ToolSpec(name="x", description=doc)) == phrase


SPECS = {"mv": ToolSpec(name="mv", description="Move a file.", parameters={
    "type": "object", "properties": {"source": {"type": "string"}, "destination": {"type": "string"},
                                     "force": {"type": "boolean"}}, "required": ["source", "destination"]})}


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "demo.toml"
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize("body, tool, field, words", [
    ('[tools.mv]\nrequests = ["move {source} to {target}"]\n', "mv", "requests[0]", "{target}"),
    ('[tools.move_file]\nrequests = ["move {source}"]\n', "move_file", None, "unknown tool"),
    ('[tools.mv]\nrequests = ["move {source} to {destination}"]\n'
     'when = [{ if = { overwrite = true }, requests = ["move {source} over {destination}"] }]\n', "mv", "when[0].if",
     "'overwrite'"),
    ('[tools.mv]\nrequests = ["move {source}"]\n[tools.mv.nouns]\nsrc = "file"\n', "mv", "nouns", "'src'"),
    ('[tools.mv]\nrequests = ["[move|shift {source} to {destination}"]\n', "mv", "requests", "unclosed '['"),
])
def test_a_bad_phrase_file_is_refused_naming_file_tool_and_field(tmp_path, body, tool, field, words):
    path = _write(tmp_path, body)
    with pytest.raises(PhraseBookError) as err:
        load_phrase_file(path, SPECS)
    text = str(err.value)
    assert str(path) in text and f"tool {tool!r}" in text and words in text
    assert field is None or f"field {field!r}" in text


@pytest.mark.parametrize("intro, field, words", [
    ('{ text = "I moved house.", tools = ["move_file"] }', "intros[1].tools", "unknown tools ['move_file']"),
    ('{ text = "I moved house.", tools = [] }', "intros[1].tools", "non-empty list"),
    ('{ text = "I moved house.", tool = ["mv"] }', "intros[1]", "exactly the keys"),
    ('3', "intros[1]", "non-empty strings"),
])
def test_a_bad_intro_is_refused_naming_file_and_entry(tmp_path, intro, field, words):
    path = _write(tmp_path, f'intros = ["Hi.", {intro}]\n[tools.mv]\nrequests = ["move {{source}} to {{destination}}"]\n')
    with pytest.raises(PhraseBookError) as err:
        load_phrase_file(path, SPECS)
    assert str(path) in str(err.value) and f"field {field!r}" in str(err.value) and words in str(err.value)


def test_an_intro_about_a_task_opens_only_a_dialogue_that_does_it(tmp_path):
    """"I need to add a bag to my trip" opens a dialogue that updates the bags, never one that only reads a
    reservation; intros about nothing in particular open any dialogue."""
    path = _write(tmp_path, 'intros = ["[Hi|Hello] there.", { text = "I [just |]moved house.", tools = ["mv"] }]\n'
                            '[tools.mv]\nrequests = ["move {source} to {destination}"]\n')
    book = load_phrase_file(path, SPECS)
    assert book.intros_for(["mv"])[0] == ("Hi there.", "Hello there.", "I just moved house.", "I moved house.")
    assert book.intros_for(["cat"]) == (("Hi there.", "Hello there."), (0.5, 0.5))
    airline = phrase_book({t.name: t for t in load_toolset("tau2/airline").tools})
    reading = [i for i in airline.intros if "add some luggage" in i]
    assert reading and not set(reading) & set(airline.intros_for(["get_reservation_details"])[0])
    assert set(reading) <= set(airline.intros_for(["get_user_details", "update_reservation_baggages"])[0])


def test_alternations_read_every_way_and_each_reading_is_checked(tmp_path):
    path = _write(tmp_path, '[tools.mv]\nrequests = ["[move|shift] {source} [over |]to {destination}[| for me]"]\n')
    readings = load_phrase_file(path, SPECS).tools["mv"].requests
    assert len(readings) == 8 and "shift {source} over to {destination} for me" in readings
    assert "move {source} to {destination}" in readings and not any("  " in r or "[" in r for r in readings)
    bad = _write(tmp_path, '[tools.mv]\nrequests = ["move {source} [to {destination}|into {target}]"]\n')
    with pytest.raises(PhraseBookError, match=r"\{target\}"):
        load_phrase_file(bad, SPECS)


def test_a_draw_picks_an_entry_first_then_one_of_its_readings(tmp_path):
    path = _write(tmp_path, '[tools.mv]\nrequests = ["[move|shift|put|carry|haul|take|send|push] {source} to '
                            '{destination}", "relocate {source} into {destination}"]\n')
    entry = load_phrase_file(path, SPECS).tools["mv"]
    assert entry.weight("relocate {source} into {destination}") == 1.0 and entry.weight("haul {source} to "
                                                                                          "{destination}") == 0.125
    assert sum(entry.weight(r) for r in entry.requests) == pytest.approx(2.0)


def _toolset_of_file(path: Path) -> str:
    """The toolset key a phrase file is for: bfcl_X.toml -> bfcl/X, tau2_retail.toml -> tau2/retail."""
    for prefix in ("bfcl", "tau2"):
        if path.stem.startswith(prefix + "_"):
            return prefix + "/" + path.stem.removeprefix(prefix + "_")
    return path.stem


@pytest.mark.parametrize("path", sorted(PHRASE_DIR.glob("*.toml")), ids=lambda p: p.stem)
def test_each_built_in_phrase_file_fits_its_toolset_and_names_each_task(path):
    name = _toolset_of_file(path)
    ts = _toolset(name)
    specs = {t.name: t for t in ts.tools}
    assert path.name in phrase_file_names(name)
    book = load_phrase_file(path, specs)
    owned = {t for t in specs if not path.stem.startswith("bfcl_") or specs[t].owner == path.stem[5:]}
    assert set(book.tools) == owned, f"{path.name} misses tools {sorted(owned - set(book.tools))}"
    for tool, entry in book.tools.items():
        texts = list(entry.requests) + [r for c in entry.when for r in c.requests]
        assert len(texts) >= 4, f"{path.name} {tool}: fewer than 4 requests"
        for text in texts:  # the rule judge wants a word of the tool's description in the request
            words = {stem(w) for w in re.findall(r"[a-z]+", re.sub(r"\{\w+\}", "", text.lower()))}
            assert content_words(specs[tool]) & words, f"{path.name} {tool}: {text!r} names nothing of the task"


@pytest.mark.parametrize("path", sorted(PHRASE_DIR.glob("*.toml")), ids=lambda p: p.stem)
def test_each_phrase_names_no_tool_and_reads_after_an_opener(path):
    ts = _toolset(_toolset_of_file(path))
    specs = {t.name: t for t in ts.tools}
    tools, params = names_of(ts.tools)
    book = load_phrase_file(path, specs)
    for tool, entry in book.tools.items():
        for text in list(entry.requests) + [r for c in entry.when for r in c.requests] + list(entry.goals):
            filled = re.sub(r"\{\w+\}", "X", text)
            assert find_leaks(filled, tools, params) == [], f"{path.name} {tool}: {text!r}"
            assert "?" not in text, f"{path.name} {tool}: {text!r} is a question, not a request after 'Could you'"
            first = text.split()[0].lower()
            assert not re.fullmatch(r"[a-z]+(?<!s)s", first) or first in ("is", "this", "access"), \
                f"{path.name} {tool}: {text!r} opens with a third-person verb"


def test_a_varied_conditional_wording_still_states_its_value():
    from sap.provenance.paraphrase import vary
    from sap.provenance.phrasebook import conveyed

    for seed in range(20):
        message = "Could you " + vary("show me all the contents here, even the hidden files", random.Random(seed))
        assert conveyed(message, "ls", "a", True) and not conveyed(message, "ls", "a", False), message
    assert conveyed("Please lock the driver doors.", "lockDoors", "unlock", False)
    assert not conveyed("Please unlock the driver doors.", "lockDoors", "unlock", False)  # "lock" is not in "unlock"


def test_a_swapped_word_takes_the_article_it_needs_and_is_still_recognised():
    """"create an empty file" varied to "make a blank file", never "an blank file"; the varied pattern reads both."""
    from sap.provenance.paraphrase import varied_pattern, vary

    said = {vary("create an empty file", random.Random(seed)) for seed in range(30)}
    assert not any(re.search(r"\ban b|\ba e", s) for s in said) and any(" a blank " in s for s in said), said
    assert all(re.search(varied_pattern("create an empty file"), s) for s in said)


def test_instead_of_keeps_its_preposition():
    """"use X instead of the current method" never becomes "use X this time of the current method"."""
    from sap.provenance.paraphrase import vary

    said = {vary("use card 7 instead of the current method", random.Random(seed)) for seed in range(40)}
    assert all("instead of the current" in s for s in said), said
    alone = {vary("use card 7 instead", random.Random(seed)) for seed in range(40)}
    assert any("rather" in s or "this time" in s for s in alone)


def test_show_before_a_pronoun_stays_a_verb_that_takes_it():
    """"arrange the lines and show them to me" never becomes "bring up them to me"; "show the lines" still varies."""
    from sap.provenance.paraphrase import vary

    said = {vary("arrange the lines in order and show them to me", random.Random(seed)) for seed in range(40)}
    assert all("show them to me" in s for s in said), said
    plain = {vary("show the lines sorted", random.Random(seed)) for seed in range(40)}
    assert any(s.startswith("bring up") for s in plain), plain

DIFF = ToolCall(call_id="c", name="diff", args_exec={"file_name1": "q3_report.csv", "file_name2": "budget_2024.csv"},
                args_prov={"file_name1": ArgProvenance(tag=Tag.prev_output, turn=0, call=0, path="$.matches[2]",
                                                       selector=Selector(noun="match", position=3)),
                           "file_name2": ArgProvenance(tag=Tag.prev_output, turn=0, call=0, path="$.matches[8]",
                                                       selector=Selector(noun="match", position=9))})


def test_two_files_from_one_listing_are_told_apart_by_position_only():
    specs = {t.name: t for t in load_toolset("bfcl/GorillaFileSystem").tools}
    for seed in range(20):
        message = RuleMessenger().write([Turn(index=1, state="s", transition=0, calls=[DIFF])], specs,
                                        random.Random(seed))[0].user_message
        assert "third" in message and "ninth" in message, message
        assert not re.search(r"\b(?:first|second) file\b", message), message  # the parameters' own ordinals


RMDIR = ToolCall(call_id="c", name="rmdir", args_exec={"dir_name": "old", "recursive": True},
                 args_prov={"dir_name": ArgProvenance(tag=Tag.self_create),
                            "recursive": ArgProvenance(tag=Tag.self_create)})


def test_a_conditional_wording_states_its_value_and_nothing_else_does():
    specs = {t.name: t for t in load_toolset("filesystem").tools}
    for seed in range(20):
        turn = RuleMessenger().write([Turn(index=0, state="s", transition=0, calls=[RMDIR])], specs,
                                     random.Random(seed))[0]
        assert states_value(turn.user_message, "rmdir", "recursive", True), turn.user_message
        assert "true" not in turn.user_message.lower()
    assert not states_value("Please delete the folder old.", "rmdir", "recursive", True)
    assert not states_value("Delete the folder old and everything inside it.", "rmdir", "recursive", False)


MV = ToolCall(call_id="c", name="mv", args_exec={"file_name": "budget_2024.xlsx", "destination": "archive"},
              args_prov={"file_name": ArgProvenance(tag=Tag.self_create),
                         "destination": ArgProvenance(tag=Tag.self_create)})
ANNOUNCING = re.compile(r"\b(later|in a moment|give me a (?:moment|sec)|tell you|let you know|I'll (?:give|send|say)|"
                        r"not sure yet|to be decided)\b", re.I)


@pytest.mark.parametrize("withheld", ["file_name", "destination"])
def test_a_withheld_value_is_left_out_without_announcing_it(withheld):
    specs = {t.name: t for t in load_toolset("filesystem").tools}
    kept = "archive" if withheld == "file_name" else "budget_2024.xlsx"
    hidden = MV.args_exec[withheld]
    for seed in range(30):
        turn = RuleMessenger().write([Turn(index=0, state="s", transition=0, calls=[MV])], specs, random.Random(seed),
                                     withheld={(0, 0): frozenset({withheld})})[0]
        message = turn.user_message
        assert not mentions(message, hidden) and mentions(message, kept), message
        assert not ANNOUNCING.search(message), message
        assert "{" not in message and "  " not in message, message


@pytest.mark.parametrize("withheld", ["state", "zip", "city"])
def test_a_withheld_part_of_an_address_is_left_out_not_named_vaguely(withheld):
    from sap.agents.requests import _leave_out

    phrases = ["set my default address to {address1} {address2} in {city}, {state} {zip}",
               "update my account address: {address1}, {address2}, {city}, {state}, zip {zip}"]
    for phrase in phrases:
        for seed in range(10):
            said = _leave_out(phrase, withheld, withheld, random.Random(seed))
            assert "{" + withheld + "}" not in said and "one of the" not in said and f"a {withheld}" not in said, said
            assert not re.search(r",\s*,|,\s*$", said), said


def test_a_withheld_amount_takes_its_unit_with_it():
    from sap.agents.requests import _leave_out

    for phrase in ["fill the tank with {fuelAmount} gallons of fuel", "refuel with {fuelAmount} gallons, fill the tank"]:
        said = _leave_out(phrase, "fuelAmount", "amount of fuel", random.Random(0))
        assert "gallons" not in said and "of fuel" not in said.replace("fill the tank", ""), said
    assert _leave_out("book the Deluxe King for {guests} guests", "guests", "number of guests",
                      random.Random(0)) == "book the Deluxe King"


def test_a_withheld_value_said_last_after_a_colon_goes_with_the_clause_that_leads_to_it():
    """"hand this over to a human, here's the issue in brief: {summary}" without the summary is "hand this over to a
    human", never "..., here's the issue in brief: a summary of the issue"."""
    from sap.agents.requests import _droppable, _leave_out

    cases = {"hand this over to a human, here's the issue in brief: {summary}": "hand this over to a human",
             "get me a human agent; in short: {summary}": "get me a human agent",
             "I'd like to talk to a human agent about this: {summary}": "I'd like to talk to a human agent about this"}
    for phrase, said in cases.items():
        assert _droppable(phrase, "summary")
        assert _leave_out(phrase, "summary", "summary of the issue", random.Random(0)) == said
    assert not _droppable("adjust my bags for {reservation_id}: {total} in total", "total")


def test_a_withheld_yes_no_value_is_not_conveyed_by_a_conditional_wording():
    specs = {t.name: t for t in load_toolset("filesystem").tools}
    for seed in range(20):
        turn = RuleMessenger().write([Turn(index=0, state="s", transition=0, calls=[RMDIR])], specs,
                                     random.Random(seed), withheld={(0, 0): frozenset({"recursive"})})[0]
        assert not states_value(turn.user_message, "rmdir", "recursive", True), turn.user_message


def test_the_reveal_gives_the_asked_for_values_verbatim():
    values = [Mention("file_name", "budget_2024.xlsx", "NEW", True), Mention("destination", "archive", "NEW", True)]
    for seed in range(10):
        one = reveal_message(values[:1], random.Random(seed), {"file_name": "file"})
        both = reveal_message(values, random.Random(seed), {"file_name": "file", "destination": "folder"})
        assert mentions(one, "budget_2024.xlsx") and "file_name" not in one
        assert mentions(both, "budget_2024.xlsx") and mentions(both, "archive") and "destination" not in both.split()[0]


@pytest.mark.parametrize("name", BUILT_IN + BFCL_SETS)
def test_user_text_names_no_tool_and_no_raw_parameter(name):
    ts = _toolset(name)
    records = synthesize(ts, 4, seed=3, mix={"base": 1.0}).records
    tools, params = names_of(ts.tools)
    forbidden = SHELL_NAMES if name in ("filesystem", "bfcl/GorillaFileSystem+TwitterAPI") else set()
    messages = [m["content"] for r in records for m in r["messages"] if m["role"] == "user"]
    assert len(messages) >= 8
    for message in messages:
        assert find_leaks(message, tools, params) == [], message
        words = " ".join(re.findall(r"[A-Za-z0-9_]+", message))
        hits = [f for f in forbidden if re.search(rf"(?<![\w.]){re.escape(f)}(?![\w.])", words)]
        assert not hits, f"{hits} in {message!r}"
        assert "(" not in message or not re.search(r"\(\w+ \"", message), message  # no parenthesised value lists


def test_word_variation_leaves_placeholders_alone():
    from sap.provenance.paraphrase import vary

    for seed in range(30):
        varied = vary("open the {folder} folder and show me the details of {file}", random.Random(seed))
        assert "{folder}" in varied and "{file}" in varied, varied


@pytest.mark.parametrize("phrase, never", [
    ("double-check the doors are locked", r"double-(?!check)"), ("tell me whether it is open", r"fill me in on"),
    ("show me what is in the file", r"give me what|display what"), ("make sure the doors are locked", r"double"),
    ("we are close to empty", r"blank"), ("work out where we are", r"calculate where"),
    ("fund my account", r"my profile")])
def test_word_variation_keeps_the_sense(phrase, never):
    from sap.provenance.paraphrase import vary

    for seed in range(40):
        assert not re.search(never, vary(phrase, random.Random(seed))), phrase


def test_a_multi_line_value_is_quoted_on_one_line_and_still_stated():
    from sap.agents.requests import said_value

    text = "Status plan pending.\nReport research plan.\n- [x] Clean up"
    said = said_value(text)
    assert "\n" not in said and said.startswith('"') and mentions(f"Please tweet {said}.", text)
    assert said_value("Meeting notes are attached") == '"Meeting notes are attached"'  # a sentence, not a name:
    assert said_value("Salt Lake City") == "Salt Lake City" and said_value("8260 Oak Street") == "8260 Oak Street"


def test_a_conditional_wording_is_recognised_when_a_reference_took_the_determiner_and_the_noun():
    """"cancel my pending order {order_id}, I ordered it by mistake" rendered with a reference in place of "my
    pending order {order_id}" still conveys the reason; a wording of another reason does not."""
    said = "and when you're done cancel the order you get from that, I ordered it by mistake so I know"
    assert conveyed(said, "cancel_pending_order", "reason", "ordered by mistake")
    assert not conveyed(said, "cancel_pending_order", "reason", "no longer needed")


def test_a_value_the_assistant_finds_anew_is_referred_to_as_it_stands_now():
    """A same-turn lookup whose value differs from what earlier lookups showed carries a `latest` selector; the
    user's wording from their own side says so, and the code check takes that wording as the selector."""
    from sap.agents.requests import found_reference
    from sap.model import Selector
    from sap.provenance.checks import states_selector

    latest = Selector(noun="result", latest=True)
    for seed in range(12):
        words = found_reference("street address", latest, "5390 Lakeview Road", random.Random(seed))
        assert states_selector(f"update the order to {words}", latest, "5390 Lakeview Road"), words
    assert not states_selector("update the order to my street address", latest, "5390 Lakeview Road")


@pytest.mark.parametrize("phrase", ["add variant {item_id} to my cart", "add the variant {item_id} to my cart"])
def test_a_reference_replaces_the_phrase_word_for_its_thing(phrase):
    """A store item is a product variant: "add variant {item_id}" with a reference reads "add the item for the
    variant with price 152.76", not "add variant the item for ..."."""
    from sap.agents.requests import Argument, _fill

    item = Argument("item_id", "item", "the item for the variant with price 152.76", False, False, "6921760560")
    assert _fill(phrase, {"item_id": item}, random.Random(0)) == \
        "add the item for the variant with price 152.76 to my cart"

def test_a_reference_after_titled_or_called_is_said_with_with():
    from sap.agents.requests import Argument, _fill

    title = Argument("title", "title", "the title I mentioned earlier", False, False, "Login bug")
    said = _fill("raise a ticket titled {title}", {"title": title}, random.Random(0))
    assert said == "raise a ticket with the title I mentioned earlier", said
    verbatim = Argument("title", "title", '"Login bug"', True, False, "Login bug")
    assert _fill("raise a ticket titled {title}", {"title": verbatim}, random.Random(0)) == \
        'raise a ticket titled "Login bug"'


def test_one_of_a_value_reads_as_the_thing_when_a_reference_says_it():
    from sap.agents.requests import Argument, _fill

    ref = Argument("item_id", "item", "the item named Running Shoes", verbatim=False, withheld=False,
                   value="5282900252")
    assert _fill("add one of {item_id} to my cart", {"item_id": ref}, random.Random(0)) == \
        "add the item named Running Shoes to my cart"


def test_a_stated_number_before_a_reference_to_its_unit_is_joined_with_of():
    """Read in a travel record: "what 5.5, the source currency I passed you a bit ago gets me in EUR"."""
    from sap.agents.requests import Argument, _fill

    amount = Argument("amount", "amount", "5.5", verbatim=True, withheld=False, value=5.5)
    currency = Argument("from_currency", "source currency", "the source currency I gave you", verbatim=False,
                        withheld=False, value="USD")
    target = Argument("to_currency", "target currency", "EUR", verbatim=True, withheld=False, value="EUR")
    args = {"amount": amount, "from_currency": currency, "to_currency": target}
    assert _fill("convert {amount} {from_currency} into {to_currency}", args, random.Random(0)) == \
        "convert 5.5 of the source currency I gave you into EUR"
    named = Argument("from_currency", "source currency", "USD", verbatim=True, withheld=False, value="USD")
    assert _fill("convert {amount} {from_currency} into {to_currency}", {**args, "from_currency": named},
                 random.Random(0)) == "convert 5.5 USD into EUR"
    folder = Argument("folder", "folder", "the folder you found", verbatim=False, withheld=False, value="docs")
    name = Argument("name", "name", "notes.txt", verbatim=True, withheld=False, value="notes.txt")
    assert _fill("move {name} {folder}", {"name": name, "folder": folder}, random.Random(0)) == \
        "move notes.txt, the folder you found"


def test_a_reference_to_the_other_end_of_a_trip_is_named_by_where_it_comes_from():
    """Read in a travel record: a flight's destination taken as the next search's origin was "my departure location",
    which a reader finds at that flight's origin: the search went the other way."""
    from sap.agents.requests import Wording, conveyed_arguments
    from sap.toolsets import load_toolset

    specs = {s.name: s for s in load_toolset("travel").tools}
    wording = Wording(specs, phrase_book(specs))
    mentions = [Mention("origin_location_id", "LOC3163", "FROM_HISTORY", False, source=(0, 0),
                        path="$.destination.location_id"),
                Mention("destination_location_id", "LOC5993", "FROM_HISTORY", False, source=(0, 0),
                        path="$.origin_location_id"),
                Mention("date", "2026-04-09", "NEW", True)]
    args = conveyed_arguments(_search_call(), (), wording, mentions, 1, random.Random(0))
    assert "destination" in args["origin_location_id"].words and "departure" not in args["origin_location_id"].words
    assert "origin" in args["destination_location_id"].words
    same_end = [Mention("origin_location_id", "LOC5993", "FROM_HISTORY", False, source=(0, 0),
                        path="$.origin_location_id"), *mentions[1:]]
    kept = conveyed_arguments(_search_call(), (), wording, same_end, 1, random.Random(0))
    assert "departure location" in kept["origin_location_id"].words


def _search_call():
    """A search_flights call whose origin and destination come from one earlier result, the other way round."""
    prev = ArgProvenance(tag=Tag.prev_output, turn=0, call=0, path="$.x")
    return ToolCall(call_id="c1", name="search_flights", args_exec={
        "origin_location_id": "LOC3163", "destination_location_id": "LOC5993", "date": "2026-04-09"},
        args_prov={"origin_location_id": prev, "destination_location_id": prev,
                   "date": ArgProvenance(tag=Tag.self_create)})


def test_no_conditional_wording_has_two_wildcards_with_only_optional_words_between():
    """Each placeholder of a wording reads any text; two in a row with only optional words between them backtrack
    exponentially on a message that lacks the wording (book_reservation's ten placeholders: minutes per message, a
    tau2 airline run stalled in the code check). They are one stretch now, and each wording still matches itself
    rendered with values."""
    back_to_back = re.compile(r"\.\+\?(?:\\s\*|\(\?:[^()]*\)\?)*\.\+\?")
    wordings = [r for entries in _conditionals().values() for e in entries for r in e.requests]
    assert len(wordings) > 500
    for wording in wordings:
        pattern = phrase_regex(wording)
        assert not back_to_back.search(pattern.pattern), wording
        rendered = PLACEHOLDER.sub(lambda m: f"value {m.group(1)}", wording)
        assert pattern.search(f"Hi. {rendered}. Thanks!"), wording
