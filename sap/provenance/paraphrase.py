"""Word-level variation of a request phrase: safe synonyms for common request words ("show me" -> "pull up",
"folder" -> "directory"), each swapped at random, so that one phrase-book entry reads many ways."""
from __future__ import annotations

import random
import re

# (pattern, alternatives): the pattern's match is replaced by one alternative (itself included, so it may stay)
SYNONYMS: list[tuple[str, list[str]]] = [
    (r"\bshow me\b(?! (?:what|which|how|who|where|when|why|if|whether)\b)", ["show me", "give me", "let me see", "pull up",
                                                                                "display"]),
    (r"\bshow\b(?! (?:me|them|it|us|him|her)\b)", ["show", "display", "print", "bring up"]),  # not "bring up them"
    (r"\btell me\b(?! (?:what|which|how|who|where|when|why|if|whether)\b)", ["tell me", "let me know", "fill me in on"]),
    (r"\blook up\b", ["look up", "pull up", "check", "find"]),
    (r"\bpull up\b", ["pull up", "bring up", "look up"]),
    (r"\bfind\b(?! out| me\b)", ["find", "locate", "track down", "look for"]),
    (r"\bcheck\b(?= (?:whether|if|what|which|how))", ["check", "see", "find out", "work out"]),
    (r"(?<!\ba )(?<!-)\bcheck\b(?! (?:whether|if|what|which|how|out|on)\b)(?!-)", ["check", "verify", "look at",
                                                                                    "go over"]),
    (r"(?:^|(?<=, ))change\b(?! (?:into|to|over)\b)", ["change", "update", "switch", "adjust"]),
    (r"(?:^|(?<=, ))update\b", ["update", "change", "amend"]),
    (r"\bcreate\b", ["create", "make", "set up"]),
    (r"\bdelete\b", ["delete", "remove", "erase"]),
    (r"\bthe details\b", ["the details", "the info", "the full details", "the particulars"]),
    (r"\bfolder\b", ["folder", "directory"]),
    (r"\bfolders\b", ["folders", "directories"]),
    (r"\bcurrent directory\b", ["current directory", "current folder", "working directory"]),
    (r"\bI'd like\b", ["I'd like", "I want", "I'd love"]),
    (r"\bgo ahead and\b", ["go ahead and", "please", "just"]),
    (r"\beverything\b(?=\s*(?:$|,))", ["everything", "all of it", "the lot"]),
    (r"\bfor me\b", ["for me", "for me please", ""]),
    (r"\bright now\b", ["right now", "at the moment", "currently"]),
    (r"\bgive me\b", ["give me", "get me", "send me"]),
    (r"\blist\b(?= (?:the|my|all|every|what|this))", ["list", "give me a list of", "enumerate"]),
    (r"\bbook\b(?= (?:a|one|room|hotel|flight|\{))", ["book", "reserve"]),
    (r"\bmake sure\b", ["make sure", "ensure"]),
    (r"\bwhat's in\b", ["what's in", "what is inside", "the contents of"]),
    (r"\bthe file\b", ["the file", "the document"]),
    (r"\bcontents\b", ["contents", "content"]),
    (r"\bmy account\b", ["my account", "the account"]),
    (r"\bmy order\b(?! history)", ["my order", "the order", "order"]),
    (r"\binstead\b(?! of\b)", ["instead", "rather", "this time"]),  # "instead of" is no "rather of"
    (r"\bnew\b", ["new", "fresh"]),
    (r"(?:(?<=\ba )|(?<=\ban )|(?<=\bthe ))empty\b", ["empty", "blank"]),
    (r"\bsearch\b(?= (?:the|your)\b)", ["search", "look through", "go through", "comb through"]),
    (r"\bsearch for\b", ["search for", "look for", "hunt for"]),
    (r"\bremove\b", ["remove", "delete", "drop"]),
    (r"\bget rid of\b", ["get rid of", "remove", "clear out"]),
    (r"\bcalculate\b", ["calculate", "compute", "work out"]),
    (r"\bwork out\b(?! (?:where|who|which|whether|if|how|what|when|why)\b)", ["work out", "figure out", "calculate"]),
    (r"\bcheck whether\b", ["check whether", "see whether", "find out whether", "confirm whether"]),
    (r"\bsee if\b", ["see if", "check if", "find out if"]),
    (r"\blet me see\b", ["let me see", "show me", "let me look at"]),
    (r"\bI need\b", ["I need", "I'd like", "I want"]),
    (r"\bthe list of\b", ["the list of", "a list of", "the full list of"]),
    (r"\bevery\b", ["every", "each"]),
    (r"\bthe nearest\b", ["the nearest", "the closest"]),
    (r"\bclose by\b", ["close by", "nearby", "near here"]),
    (r"\bthe car\b", ["the car", "my car"]),
    (r"\bdetails\b", ["details", "info", "specifics"]),
    (r"\bkeep an eye on\b", ["keep an eye on", "track", "watch"]),
    (r"\bpost\b(?= a\b)", ["post", "publish", "put up"]),
    (r"\bmake\b(?= an? (?:new|empty|blank|copy)\b)", ["make", "create"]),
    (r"\bset up\b", ["set up", "create", "make"]),
    (r"\bwhat's\b", ["what's", "what is"]),
    (r"\bpick out\b", ["pick out", "find", "single out"]),
    (r"\bso that\b", ["so that", "so"]),
    (r"\bfor the\b(?= \{)", ["for the", "for this"]),
    (r"\bthe whole\b", ["the whole", "the entire", "the full"]),
    (r"\bjust\b", ["just", "only", "simply"]),
]
_COMPILED = [(re.compile(p), alts) for p, alts in SYNONYMS]


def synonym_spans(text: str) -> list[tuple[int, int, list[str]]]:
    """The synonym-bearing spans of a phrase, in order: for each pattern its matches in the original words that
    overlap no earlier span and no placeholder, with their alternatives."""
    taken: list[tuple[int, int, list[str]]] = []
    slots = [(m.start(), m.end()) for m in re.finditer(r"\{\w+\}", text)]
    for pattern, alts in _COMPILED:
        for m in pattern.finditer(text):
            if not any(a < m.end() and m.start() < b for a, b, *_ in taken + slots):  # type: ignore[operator]
                taken.append((m.start(), m.end(), alts))
    return sorted(taken)


def vary(text: str, rng: random.Random) -> str:
    """The phrase with each synonym-bearing word swapped for a random alternative, in one pass over the original
    words (a swapped-in word is not swapped again; placeholders untouched)."""
    out, pos = [], 0
    for start, end, alts in synonym_spans(text):
        word = rng.choice(alts)
        before = re.sub(r"\b(an?)(\s+)$", lambda m: ("an" if word[:1] in "aeio" else "a") + m.group(2),
                        text[pos:start]) if word != text[start:end] else text[pos:start]  # "an empty" -> "a blank"
        out += [before, word]
        pos = end
    return re.sub(r"(?<=\S)\s+(?=[,.;:!?])", "", re.sub(r"\s{2,}", " ", "".join(out + [text[pos:]]))).strip()


def _loose(text: str) -> str:
    """A regex for literal text in which whitespace, also around it, matches any (or no) whitespace."""
    return r"\s*" + r"\s*".join(re.escape(w) for w in text.split()) + r"\s*" if text.split() else r"\s*"


def varied_pattern(text: str) -> str:
    """A regex matching the literal text (no placeholders) as `vary` may have worded it: each synonym-bearing span as
    any of its alternatives, whitespace loose."""
    out, pos = [], 0
    for start, end, alts in synonym_spans(text):
        words = sorted({a for a in alts if a}, key=len, reverse=True)
        literal = text[pos:start]
        article = re.search(r"\ban?\s+$", literal)  # `vary` fits "a"/"an" to the word swapped in
        lead = _loose(literal[:article.start()]) + r"an?\s*" if article else _loose(literal)
        out += [lead, "(?:" + "|".join(_loose(a) for a in words) + ("|" if "" in alts else "") + ")"]
        pos = end
    return "".join(out + [_loose(text[pos:])])
