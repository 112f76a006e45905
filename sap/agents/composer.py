"""A turn's user message from its calls' request phrases: varied openers and politeness, lead-ins on later turns
(never "Next," on the first), several requests joined as people join them, values stated ahead of use, thanks."""
from __future__ import annotations

import random
import re
from collections.abc import Sequence

_OPENERS = ["Could you {x}?", "Can you {x}?", "Please {x}.", "{X}, please.", "I'd like you to {x}.",
            "Would you {x}?", "I need you to {x}.", "Go ahead and {x}.", "Could you please {x}?",
            "When you get a chance, {x}.", "Would you be able to {x}?", "I was hoping you could {x}.",
            "Quick one: {x}.", "Can you please {x}?", "{X} - thanks.", "Do me a favor and {x}.",
            "If you could {x}, that would be great.", "I'd appreciate it if you could {x}.", "Can I ask you to {x}?",
            "Mind if I ask you to {x}?", "Could you {x} for me?", "Would you kindly {x}?", "Hoping you can {x}.",
            "{X} when you have a second.", "Okay so, {x}.", "Right, {x}.", "So I need you to {x}.",
            "Help me out and {x}.", "Any chance you could {x}?", "{X} if you can.", "First thing: {x}.",
            "{X}, if that's alright.", "Please could you {x}?", "How about you {x}?",
            "Let's see, {x}.", "You can {x} now.", "Could you go ahead and {x}?", "Be a star and {x}.",
            "{X} - that's the main thing.", "It'd help a lot if you could {x}.", "Here's what I need: {x}.",
            "Could I get you to {x}?", "See if you can {x}.", "I'm after one thing: {x}.", "{X}, would you?",
            "{X} whenever you're ready.", "Try to {x}.", "My request: {x}.", "You could {x} for me."]
_GREETINGS = ["Hi!", "Hello.", "Hey there.", "Hi there!", "Good morning!", "Hey!", "Good afternoon.", "Hiya.",
              "Morning!", "Evening!", "Hi, hope you're well."]
_LEAD_SENTENCES = ["Thanks.", "Great.", "OK.", "Perfect, thanks.", "Got it.", "Thank you!", "Alright.", "Nice.",
                   "That's helpful.", "Good to know.", "Cool.", "Super, thanks.", "Okay, great.", "Makes sense.",
                   "Lovely.", "Thanks for that.", "Hmm, OK.", "Right.", "Brilliant.", "Good stuff.", "Noted.",
                   "Excellent.", "Wonderful, cheers.", "Fair enough.", "Okay, noted.", "Ah, good.", "Sounds good.",
                   "Interesting.", "Great, that helps.", "Appreciate it.", "Okay, that works.", "Perfect.",
                   "Ah, I see.", "That's what I expected.", "Nice one.", "Fab."]
_LEAD_CLAUSES = ["Now", "Next,", "Also,", "And", "Alright,", "One more thing:", "Now,", "Then", "OK, now", "After that,",
                 "Moving on,", "While we're at it,", "Another thing:", "On top of that,", "Next up,", "Oh, and",
                 "Following on from that,", "In the meantime,", "Separately,", "On another note,", "Meanwhile,",
                 "With that done,", "Good, so", "Okay, so", "Before I forget,", "Additionally,", "Now then,",
                 "Right, next:", "Switching gears,", "Building on that,", "As a next step,", "Oh, also,",
                 "Next on my list:", "Alright then,", "Last thing for now:"]
_CHAINS = [", then {y}", " and then {y}", ", and after that {y}", " and {y}", ", and once that's done, {y}",
           ", and also {y}", "; then {y}", " and afterwards {y}", ", plus {y}", ", followed by {y}", ", then go on to {y}",
           " before you {y}", ", and when you're done {y}", ", and next {y}", "; after that, {y}"]
_SECOND_SENTENCES = ["Then {y}.", "After that, {y}.", "Once that's done, {y}.", "Also, {y}.", "And then {y}.",
                     "When that's done, please {y}.", "Then please {y}.", "Afterwards, {y}.", "Next, {y}.",
                     "When you're done with that, {y}.", "After that, could you {y}?", "Then could you also {y}?",
                     "With that out of the way, {y}.", "Following that, {y}.", "Then I'd like you to {y}.",
                     "Once you've got that, {y}.", "After you do that, {y}.", "Second, {y}.",
                     "Then, if it's not too much, {y}.", "Straight after, {y}.", "Then I need you to {y}."]
_STATEMENT_LEADS = ["Also, {y}.", "Oh, and {y}.", "And {y}.", "Besides that, {y}.", "One other thing: {y}.",
                    "Plus, {y}.", "On a related note, {y}."]
_AHEAD_LEADS = ["", "Oh, and ", "Also, ", "By the way, ", "Before I forget, ", "Just so you know, ", "One more detail: ",
                "Side note: ", "Heads up, ", "While I think of it, "]
_AHEAD_CORES = ["the {n} I'll want later is {v}", "later on I'll want {v} for the {n}", "the {n} should be {v} further on",
                "{v} is the {n} for a later step", "use {v} as the {n} when we get there", "the {n} for afterwards is {v}",
                "keep {v} in mind as the {n}", "I'm going to need the {n} set to {v} down the line",
                "save {v} for the {n} later", "we'll need {v} as the {n} at some point",
                "the {n} will end up being {v}", "make a note of {v} as the {n} for later"]
_AHEAD = [lead + (core if lead else core[:1].upper() + core[1:]) + "." for lead in _AHEAD_LEADS for core in _AHEAD_CORES]
_CLOSERS = [" Thanks!", " Thank you.", " Thanks a lot.", " Appreciate it.", " Cheers.", " Many thanks.",
            " Thanks so much.", " Much appreciated.", " Thanks in advance!", " You're a star.", " Ta!", " Thanks a bunch.",
            " I owe you one.", " Thanks, that'd be a big help.", " Grateful as always.", " Thank you kindly.",
            " Thanks heaps.", " That would really help."]
_FACT_FRAMES = ["{x}.", "{x}.", "For reference, {x}.", "In case you need it, {x}.", "Just so you have it, {x}.",
                "Oh, {x}.", "FYI, {x}."]
_TAILS = [" for me", " if you can", " real quick", " right away", " when you get a moment", " please", " now",
          " as well", " too", " for me please", " if possible", " whenever you can", " at your convenience", " today",
          " while you're at it", " if you don't mind", " asap", " when you have a minute", " before I head out",
          " since I'm in a bit of a rush", " so I can plan the rest of my day", " before my next meeting",
          " while I grab a coffee", " so I know where things stand", " before I forget"]


def capitalized(text: str) -> str:
    """The text with its first letter upper-case."""
    return text[:1].upper() + text[1:]


_MODALS = ["Could you", "Can you", "Would you", "Will you", "Could you possibly", "Can you please", "Would you please",
           "Could you quickly", "Can you just", "Could you kindly", "Would you mind helping me and", "Might you",
           "Can you maybe", "Could you try to", "Would you be so kind as to", "Are you able to", "Can you go ahead and",
           "Could you also", "Can you quickly", "Would you just"]
_FRAMES = ["I need you to", "I'd like you to", "I want you to", "I'm hoping you can", "I'd love it if you could",
           "It'd be great if you could", "I'd be grateful if you could", "Please", "Kindly", "Just", "Help me and",
           "Your job now:", "Okay,", "So,", "Right,", "Hey, could you", "Now I need you to", "I'd really like you to",
           "What I'd like is for you to", "Ideally you'd", "The next step is to", "Let's have you", "Go on and",
           "If it's no trouble,", "I'm asking you to", "All I need is for you to", "Basically,", "Alright,",
           "Honestly, just", "My ask:"]


def _echoes(lead: str, body: str) -> bool:
    """Whether a lead clause repeats a word the body opens with ("Next, the next step is to ...", "Also, could
    you also ...")."""
    words = re.findall(r"[a-z']{3,}", lead.lower())
    return bool(set(words) & set(re.findall(r"[a-z']+", body.lower())[:5]))


def opened(request: str, rng: random.Random) -> str:
    """A request as a sentence with an opener ("Could you ...?", "..., please.")."""
    roll = rng.random()
    if roll < 0.3:
        template = "{X}."  # a bare imperative, as people often write
    elif roll < 0.5:
        template = rng.choice(_MODALS) + " {x}?"
    elif roll < 0.7:
        template = rng.choice(_FRAMES) + " {x}."
    else:
        template = rng.choice(_OPENERS)
    if rng.random() < 0.25:
        request += rng.choice(_TAILS)
    return capitalized(template.replace("{X}", capitalized(request)).replace("{x}", request))


def joined(requests: Sequence[str], rng: random.Random) -> str:
    """Requests chained into one phrase: "a, then b", "a and then b, and c"."""
    text = requests[0]
    for r in requests[1:]:
        text += rng.choice(_CHAINS).format(y=r)
    return text


def is_statement(request: str) -> bool:
    """Whether a request is worded as the user's own statement ("I ordered it by mistake, cancel it"), which
    stands as a sentence of its own rather than after "Could you"."""
    return re.match(r"(?:I|I'm|I'd|I've|my|we)\b", request, re.I) is not None


def _sentences(requests: Sequence[str], rng: random.Random) -> str:
    """The requests as sentences: runs of imperative requests chained (or split in two), statements on their own."""
    runs: list[list[str]] = []
    for r in requests:
        if runs and not is_statement(r) and not is_statement(runs[-1][-1]):
            runs[-1].append(r)
        else:
            runs.append([r])
    out = []
    for n, run in enumerate(runs):
        if is_statement(run[0]):
            out.append(capitalized(run[0]) + "." if n == 0 else rng.choice(_STATEMENT_LEADS).format(y=run[0]))
        elif n == 0 and len(run) > 1 and rng.random() < 0.4:
            out.append(opened(run[0], rng) + " " + rng.choice(_SECOND_SENTENCES).format(y=joined(run[1:], rng)))
        elif n == 0:
            out.append(opened(joined(run, rng), rng))
        else:
            out.append(rng.choice(_SECOND_SENTENCES).format(y=joined(run, rng)))
    return " ".join(out)


def stated_facts(facts: Sequence[str], rng: random.Random) -> str:
    """The user's own facts a goal turn's prerequisites need, as a sentence ("I'm Ana Diaz and my zip code is
    10001.")."""
    text = facts[0] if len(facts) == 1 else ", ".join(facts[:-1]) + " and " + facts[-1]
    return capitalized(rng.choice(_FACT_FRAMES).format(x=text))


def ahead_note(noun: str, value: str, rng: random.Random) -> str:
    """A value stated ahead of its use as a note ("Side note: the destination should be x further on.")."""
    return rng.choice(_AHEAD).format(n=noun, v=value)


def compose_message(requests: Sequence[str], ahead: Sequence[str], first: bool,
                    intros: Sequence[str], rng: random.Random, facts: Sequence[str] = (),
                    after: Sequence[str] = ()) -> str:
    """A turn's user message: an optional greeting and context on the first turn, a lead-in on later ones, the
    user's facts a goal turn needs, the requests (in one sentence or more) followed by the sentences that say
    which thing they mean and what to prepare (`after`), the sentences stating values ahead of use (`ahead`) and
    an occasional thanks."""
    body = " ".join([_sentences(requests, rng), *after]) if requests else " ".join(after)
    if facts:
        said = stated_facts(facts, rng)
        body = said + " " + body if rng.random() < 0.7 else body + " " + said
    lead = ""
    if first:
        if intros and rng.random() < 0.45:
            lead = rng.choice(intros) + " "
        if rng.random() < 0.3:
            lead = rng.choice(_GREETINGS) + " " + lead
    elif (roll := rng.random()) < 0.3:
        lead = rng.choice(_LEAD_SENTENCES) + " "
    elif roll < 0.6 and not _echoes(clause := rng.choice(_LEAD_CLAUSES), body):
        lead = clause + " "
        body = body if body.startswith(("I ", "I'")) else body[:1].lower() + body[1:]
    message = lead + body
    for sentence in ahead:
        message += " " + sentence
    if rng.random() < 0.15:
        message = message.rstrip() + rng.choice(_CLOSERS)
    return message
