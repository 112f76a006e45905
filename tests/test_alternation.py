"""Alternations in wording: every reading listed, nesting and optional parts, brackets that do not pair refused."""
from __future__ import annotations

import re

import pytest

from sap.alternation import MAX_EXPANSIONS, AlternationError, expand_all, expansions


def test_nested_and_optional_groups_give_every_reading_with_tidy_spaces():
    readings = expansions("[just |]check [the [tire |]pressure|it] , please")
    assert readings == ["just check the tire pressure, please", "just check the pressure, please",
                        "just check it, please", "check the tire pressure, please", "check the pressure, please",
                        "check it, please"]


def test_duplicate_readings_are_dropped_in_order():
    assert expand_all(["[a|a] b", "a b", "c"]) == ["a b", "c"]


def test_a_piece_keeps_its_leading_space():
    assert expansions(" and [then |]{y}") == [" and then {y}", " and {y}"]


@pytest.mark.parametrize("text, words", [("[a|b", "unclosed '['"), ("a]b", "']' outside a group"),
                                         ("a|b", "'|' outside a group")])
def test_brackets_that_do_not_pair_are_refused_naming_the_place(text, words):
    with pytest.raises(AlternationError, match=re.escape(words)):
        expansions(text)


def test_a_phrase_with_too_many_readings_is_refused():
    with pytest.raises(AlternationError, match=str(MAX_EXPANSIONS)):
        expansions("[a|b|c][d|e|f][g|h|i][j|k|l][m|n|o][p|q|r]")
