"""A turn's user message from its calls' request phrases: varied openers and politeness, lead-ins on later turns
(never "Next," on the first), several requests joined as people join them, values stated ahead of use, thanks."""
from __future__ import annotations

import random
from collections.abc import Sequence

_OPENERS = ["Could you {x}?", "Can you {x}?", "Please {x}.", "{X}, please.", "{X}.", "I'd like you to {x}.",
            "Would you {x}?", "I need you to {x}.", "Can you help me {x}?", "I want to {x}.", "Let's {x}.",
            "Go ahead and {x}.", "Could you please {x}?", "When you get a chance, {x}.", "I'd like to {x}.",
            "Would you be able to {x}?", "Is it possible to {x}?", "I was hoping you could {x}.",
            "Quick one: {x}.", "Mind helping me {x}?"]
_GREETINGS = ["Hi!", "Hello.", "Hey there.", "Hi there!", "Good morning!", "Hey!"]
_LEAD_SENTENCES = ["Thanks.", "Great.", "OK.", "Perfect, thanks.", "Got it.", "Thank you!", "Alright.", "Nice."]
_LEAD_CLAUSES = ["Now", "Next,", "Also,", "And", "Alright,", "One more thing:", "Now,", "Then", "OK, now", "After that,"]
_CHAINS = [", then {y}", " and then {y}", ", and after that {y}", " and {y}", ", and once that's done, {y}"]
_SECOND_SENTENCES = ["Then {y}.", "After that, {y}.", "Once that's done, {y}.", "Also, {y}.", "And then {y}.",
                     "When that's done, please {y}."]
_AHEAD = ["By the way, the {n} I'll want later is {v}.", "Just so you know, I'll need {v} as the {n} later on.",
          "Keep in mind the {n} for later: {v}.", "For later: the {n} will be {v}."]
_CLOSERS = [" Thanks!", " Thank you.", " Thanks a lot.", " Appreciate it.", " Cheers."]


def capitalized(text: str) -> str:
    """The text with its first letter upper-case."""
    return text[:1].upper() + text[1:]


def opened(request: str, rng: random.Random) -> str:
    """A request as a sentence with an opener ("Could you ...?", "..., please.")."""
    template = rng.choice(_OPENERS)
    return capitalized(template.replace("{X}", capitalized(request)).replace("{x}", request))


def joined(requests: Sequence[str], rng: random.Random) -> str:
    """Requests chained into one phrase: "a, then b", "a and then b, and c"."""
    text = requests[0]
    for r in requests[1:]:
        text += rng.choice(_CHAINS).format(y=r)
    return text


def compose_message(requests: Sequence[str], ahead: Sequence[tuple[str, str]], first: bool,
                    intros: Sequence[str], rng: random.Random) -> str:
    """A turn's user message: an optional greeting and context on the first turn, a lead-in on later ones, the
    requests (in one sentence or two), values stated ahead of use and an occasional thanks."""
    if len(requests) > 1 and rng.random() < 0.4:
        body = opened(requests[0], rng) + " " + capitalized(rng.choice(_SECOND_SENTENCES).format(y=joined(requests[1:], rng)))
    else:
        body = opened(joined(requests, rng), rng)
    lead = ""
    if first:
        if intros and rng.random() < 0.45:
            lead = rng.choice(intros) + " "
        if rng.random() < 0.3:
            lead = rng.choice(_GREETINGS) + " " + lead
    elif (roll := rng.random()) < 0.3:
        lead = rng.choice(_LEAD_SENTENCES) + " "
    elif roll < 0.6:
        lead = rng.choice(_LEAD_CLAUSES) + " "
        body = body if body.startswith(("I ", "I'")) else body[:1].lower() + body[1:]
    message = lead + body
    for noun, value in ahead:
        message += " " + rng.choice(_AHEAD).format(n=noun, v=value)
    if rng.random() < 0.15:
        message = message.rstrip() + rng.choice(_CLOSERS)
    return message
