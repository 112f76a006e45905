"""A turn's user message from its calls' request phrases: varied openers and politeness, lead-ins on later turns
(never "Next," on the first), several requests joined as people join them, values stated ahead of use, thanks."""
from __future__ import annotations

import random
import re
from collections.abc import Sequence

from sap.alternation import expand_all

# Every pool below is written with [a|b] alternations (sap/alternation.py) and read in all its expansions, so two
# messages rarely share their wording around the request.
_OPENERS = expand_all([
    "[Could|Can|Would|Will] you [please |possibly |maybe |kindly |][go ahead and |]{x}[| for me]?",
    "[Please|Kindly] {x}[| for me].",
    "{X}[, please| please| for me| - thanks| if you can| when you have a sec| whenever it suits you].",
    "I'd [like|really like] you to {x}[| for me].",
    "I'd [appreciate it|be grateful|be glad|be happy] if you could {x}.",
    "[I need|I'll need|I want|I'd want] you to {x}[| now| next| for me].",
    "[When|Whenever] you [get|have] a [chance|moment|minute|second], {x}.",
    "Would you be [able|willing] to {x}?",
    "I was [hoping|wondering if] you could {x}.",
    "[Quick one|Quick request|Small thing|Easy one]: {x}.",
    "Do me a [favor|favour|quick favour] and {x}.",
    "If you could {x}, that would be [great|brilliant|a big help|perfect|lovely].",
    "[Can|Could|May] I ask you to {x}?",
    "Mind [if I ask you to {x}|helping me out: {x}]?",
    "[Hoping|I'm hoping] you can {x}.",
    "[Okay|OK|Alright|Right|So], {x}.",
    "Help me [out |]and {x}.",
    "Any chance you could {x}[| today| soon]?",
    "[First|First thing|To start|To begin with|For starters]: {x}.",
    "How about you {x}[| now| first]?",
    "[Let's see|Let me think|Hmm], {x}.",
    "Be a [star|gem|sweetheart|hero] and {x}.",
    "It'd [help a lot|be really handy|save me a lot of time|make my day] if you could {x}.",
    "Here's what [I need|I want|I'm after]: {x}.",
    "Could I get you to {x}?",
    "See if you can {x}.",
    "[My request|The task|What I need] [is this|for now]: {x}.",
    "{X}, [would you|could you|will you|can you]?",
    "{X} [whenever you're ready|when you're free|once you're ready|at your leisure].",
    "[Try to|Try and|Please try to] {x}.",
    "You could {x} for me[| if that's okay| if it's no bother].",
    "[Got|Have] a [sec|moment|minute]? {X}.",
    "[Is it possible|Would it be possible] [to|for you to] {x}?",
    "[Just|Simply] {x}[| for me| please].",
])
_GREETINGS = expand_all([
    "[Hi|Hello|Hey|Hiya|Howdy|Greetings][| there][!|.]", "Good [morning|afternoon|evening][!|.]",
    "[Morning|Evening|Afternoon][!|.]", "Hi, [hope you're well|hope you're doing well|hope your day's going well].",
    "[Hello|Hi|Hey] [again|there], [it's me|quick question|I need a hand].", "Hey, [thanks for picking this up.|got a minute?]",
    "[Hello|Hi], [I could use some help|I need a bit of help|I've got a few things for you][.|!]"])
_LEAD_SENTENCES = expand_all([
    "[Thanks|Thank you|Cheers|Ta][.|!| for that.| so much.]", "[Great|Perfect|Brilliant|Lovely|Excellent|Super|Nice|"
    "Wonderful|Fab|Awesome|Cool][.|!|, thanks.|, that helps.|, that's what I needed.]",
    "[OK|Okay|Alright|Right|Fine][.|, got it.|, noted.|, makes sense.|, good to know.]",
    "[Got it|Noted|Understood|Makes sense|Fair enough|Sounds good|That works|Good to know|Appreciate it][.|!]",
    "[Ah|Oh|Hmm][, I see.|, okay.|, good.|, interesting.|, right.]",
    "That's [helpful|useful|what I expected|good to know|a relief|handy|exactly what I needed][.|, thanks.]",
    "[Nice one|Good stuff|Nicely done|Well done|Spot on][.|!]"])
_LEAD_CLAUSES = expand_all([
    "Now", "[Now|Next|Also|Alright|Then|So|Okay|Right|Meanwhile|Additionally|Separately|Besides],",
    "And", "Then", "[OK|Okay|Good|Alright|Right], [now|so]", "[One more thing|Another thing|Something else|"
    "Next on my list|Last thing for now|Next item|Also important]:", "[After that|Following on from that|With that done|"
    "With that sorted|Now that's done|Moving on|While we're at it|On top of that|In the meantime|On another note|"
    "Switching gears|Building on that|As a next step|Before I forget|Changing topic|Next up|While I think of it],",
    "Oh, [and|also|one more thing,]", "Now then,"])
_CHAINS = expand_all([
    ", then {y}", " and then {y}", ", [and |]after that[,|] {y}", " and {y}", ", and once that's [done|finished|sorted], {y}",
    ", and also {y}", "; then {y}", " and afterwards {y}", ", plus {y}", ", then go on to {y}",
    " before you {y}", ", and when you're [done|finished|through] {y}", ", and next {y}", "; after that, {y}",
    ", and [straight|right] after that {y}", "; [once|when] that's [done|out of the way], {y}", " and, after that, {y}"])
_SECOND_SENTENCES = expand_all([
    "[Then|Next|Afterwards|After that] {y}.", "[Then|After that|Afterwards|Next|Following that|Straight after|Second|"
    "Once you have that|After you do that|When you're done with that|With that out of the way|Once that's done|"
    "When that's done], {y}.",
    "[Then|After that|Next|Afterwards][,|] [could|can|would] you [also |]{y}?", "[Then|After that|Next][,|] please {y}.",
    "And then {y}.", "Also, {y}.", "Then [I'd like|I need|I want] you to {y}.", "Then, if it's not too much [trouble|to ask], {y}.",
    "[After|Once] that's [done|sorted|finished], [I'd like|I need] you to {y}.", "[The next step|Step two|Next up] is to {y}.",
    "[When|Once] you've [got that|done that|finished that], [please |]{y}."])
_STATEMENT_LEADS = expand_all([
    "[Also|Besides that|Plus|On a related note|Separately|By the way], {y}.", "[And|Oh, and] {y}.",
    "[One other thing|Another thing|Something else]: {y}."])
_AHEAD_LEADS = ["", "Oh, and ", "Also, ", "By the way, ", "Before I forget, ", "Just so you know, ", "One more detail: ",
                "Side note: ", "Heads up, ", "While I think of it, ", "For later, ", "Note for later: "]
_AHEAD_CORES = expand_all([
    "the {n} I'll want [later|down the line|further on|afterwards] is {v}", "[later on|down the line|further on] I'll "
    "[want|need] {v} for the {n}", "the {n} should be {v} [further on|later|afterwards]", "{v} is the {n} for a later step",
    "use {v} as the {n} when we get [there|to it|that far]", "the {n} for afterwards is {v}",
    "keep {v} in mind as the {n}", "I'm going to need the {n} set to {v} [down the line|later]",
    "the {n} is {v}, [for when we get to it|in case it comes up|you'll need it later]",
    "we'll need {v} as the {n} [at some point|later]", "the {n} will end up being {v}",
    "make a note of {v} as the {n}[| for later]"])  # never "in a bit": it reads as a promise to give a value later
_AHEAD = [lead + (core if lead else core[:1].upper() + core[1:]) + "." for lead in _AHEAD_LEADS for core in _AHEAD_CORES]
_CLOSERS = [" " + c for c in expand_all([
    "[Thanks|Thank you][!|.| a lot.| so much.| in advance!| kindly.]", "[Many thanks|Cheers|Ta|Thanks heaps|"
    "Thanks a bunch|Much obliged|Bless you|Legend|Cheers, mate][!|.]",
    "[Appreciate it|Much appreciated|Grateful as always|You're a star|I owe you one|You're a lifesaver|"
    "You're the best|Big help|Lifesaver][.|!]",
    "[That|This] [would|will|should] [really help|be a big help|save me a lot of hassle|make things easier|"
    "take a weight off my mind|sort me out|make my week][.|!]",
    "Thanks, that'd be a [big|huge|real] help.", "[Much|Very much] appreciated, [as always|truly|honestly].",
    "[No rush|No hurry|Take your time][, though|][.|!]", "[Talk soon|Speak soon|Catch you later][.|!]"])]
_FACT_FRAMES = expand_all(["{x}.", "{x}.", "{x}.", "[For reference|In case you need it|Just so you have it|FYI|For the record|"
                           "If it helps|So you know|For what it's worth][,|:] {x}.", "Oh, {x}.", "[Also|By the way], {x}."])
_TAILS = [" " + t for t in expand_all([
    "for me[| please]", "if [you can|possible|you don't mind|that's alright|it's no trouble]", "[real quick|right away|asap|now|today]",
    "when you [get|have] a [moment|minute|second|chance]", "please", "[as well|too|while you're at it]",
    "[whenever you can|at your convenience|when it suits you]",
    "before [I head out|my next meeting|the end of the day|lunch|I forget|I log off]",
    "since I'm [in a bit of a rush|short on time|about to head out]",
    "so I [can plan the rest of my day|know where things stand|can move on|can get on with my day]",
    "while I [grab a coffee|make a call|check something else]"])]


def capitalized(text: str) -> str:
    """The text with its first letter upper-case."""
    return text[:1].upper() + text[1:]


_MODALS = expand_all([
    "[Could|Can|Would|Will|Might] you", "[Could|Can|Would] you [possibly|please|quickly|just|kindly|maybe|also]",
    "Would you help me [out |]and", "Could you try to", "Would you be so kind as to",
    "Are you able to", "[Can|Could] you go ahead and", "Is there any way you could", "Do you think you could"])
_FRAMES = expand_all([
    "[I need|I want|I'd like|I'd really like|I would like] you to", "I'm hoping you can", "I'd love it if you could",
    "It'd be [great|ideal|handy|super helpful] if you could", "I'd be [grateful|thankful|happy] if you could",
    "Please", "Kindly", "Just", "[Your job now|Your next job|Next task for you]:", "[Okay|So|Right|Alright|Well],",
    "Now I [need|want] you to", "What I'd like is for you to", "Ideally you'd",
    "The [next step|plan] is to", "Let's have you", "Go on and", "If it's no trouble,", "I'm asking you to",
    "All I need is for you to", "Basically,", "Honestly, just", "My ask:", "[Ok|Okay|Alright], next I'd like you to",
    "What I'm after is for you to", "The idea is to", "For this one, please", "I'd like to have you"])


def _echoes(lead: str, body: str) -> bool:
    """Whether a lead clause repeats a word the body opens with ("Next, the next step is to ...", "Also, could
    you also ...")."""
    words = re.findall(r"[a-z']{3,}", lead.lower())
    return bool(set(words) & set(re.findall(r"[a-z']+", body.lower())[:5]))


_GREETING_WORD = re.compile(r"(?:hi|hello|hey|hiya|howdy|greetings|morning|afternoon|evening|good (?:morning|afternoon|"
                            r"evening))\b", re.I)


def _greets(intro: str) -> bool:
    """Whether an intro opens with a greeting of its own ("Hi there, I need a hand with a trip.")."""
    return bool(_GREETING_WORD.match(intro.strip()))


def _asks_help(text: str) -> bool:
    """Whether `text` asks for help ("help", "a hand", "a few things"): a greeting that does after an intro that
    does reads twice ("Hi, I could use some help. I need a hand with a trip.")."""
    return re.search(r"\b(?:help|hand|few things)\b", text.lower()) is not None


_STUTTER = re.compile(r"\b(for me|just|please|go ahead and|also|now|too|as well|first|if you can|on file|on|so|at|up|"
                      r"before|to|in|of|the|a|an)(?:,?\s+\1)+\b", re.I)  # "earlier on on the date", "so so you know"
_LATER_PLEASE = re.compile(r",?\s+please(?=[.,?!]|$)|\bplease,?\s+(\w)", re.I)  # a "please" after the first one


_SOFTENED = re.compile(r"\b(?:please|for me|if you can|if possible|thanks|when you can|asap|now|today|too|as well)$"
                       r"| - |\b(?:so|since|because|as) (?:I|I'm|I've|we|it|the|my)\b"
                       r"|[,;] (?:I|I'm|I've|I'd|it|it's|it was|that's|we)\b", re.I)  # or a clause of its own


_AN = re.compile(r"\b([Aa]) (?=(?!one\b|once\b|eu)[aeio][a-z])")  # "a" before a vowel sound (never "a one-way")


def unstuttered(text: str) -> str:
    """The text with words said twice in a row by joined phrases said once ("just just", "on file on file", "earlier
    on on the date"), "please" said once (joined requests and tails each brought one) and "a" before a vowel as "an"
    ("an economy seat", where a value filled the slot after "a"); quoted values are left as they are."""
    parts = re.split(r'("[^"]*")', text)
    said = False
    for i in range(0, len(parts), 2):
        part = _AN.sub(r"\1n ", _STUTTER.sub(r"\1", parts[i]))  # "book an economy seat", not "a economy seat"
        if said:
            part = _LATER_PLEASE.sub(_dropped_please, part)
        else:
            first = re.search(r"\bplease\b", part, re.I)
            if first:
                said = True
                part = part[:first.end()] + _LATER_PLEASE.sub(_dropped_please, part[first.end():])
        parts[i] = part
    return "".join(parts)


def _dropped_please(match: re.Match[str]) -> str:
    """A later "please" left out: ", please." -> "."; "please cancel" -> "cancel", "Please cancel" -> "Cancel"."""
    word = match.group(1) or ""
    return word.upper() if match.group(0).startswith("P") else word


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
    if _SOFTENED.search(request):  # a request that ends in a clause of its own ("- I ordered it by mistake") takes
        template = re.sub(r"(\{[xX]\})[^{}?.]+([?.])$", r"\1\2", template)  # no tail after it ("... by mistake for me")
        template = "{X}." if template == "{X}?" else template
    elif rng.random() < 0.25 and re.search(r"\{[xX]\}[?.]$", template):
        tail = rng.choice(_TAILS)  # one softener at the end: never after the opener's or the phrase's own
        request += "" if "please" in tail and re.search(r"\bplease\b", request + template, re.I) else tail
    if re.match(r"please\s", request, re.I) and not template.startswith("{"):  # "Will you possibly please cancel"
        request = request[len("please "):]
    return capitalized(template.replace("{X}", capitalized(request)).replace("{x}", request))


def joined(requests: Sequence[str], rng: random.Random) -> str:
    """Requests chained into one phrase: "a, then b", "a and then b, and c"."""
    text = requests[0]
    for r in requests[1:]:
        text += rng.choice(_CHAINS).format(y=r)
    return text


def is_statement(request: str) -> bool:
    """Whether a request is worded as the user's own statement ("I ordered it by mistake, cancel it", "let's ..."),
    which stands as a sentence of its own rather than after "Could you"."""
    return re.match(r"(?:I|I'm|I'd|I've|my|we|let's|what's|how)\b", request, re.I) is not None


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
                    after: Sequence[str] = (), intro_weights: Sequence[float] = ()) -> str:
    """A turn's user message: an optional greeting and context on the first turn, a lead-in on later ones, the
    user's facts a goal turn needs, the requests (in one sentence or more) followed by the sentences that say
    which thing they mean and what to prepare (`after`), the sentences stating values ahead of use (`ahead`) and
    an occasional thanks; an intro is drawn by `intro_weights` where given (an entry first, then its reading)."""
    body = " ".join([_sentences(requests, rng), *after]) if requests else " ".join(after)
    if facts:
        said = stated_facts(facts, rng)
        body = said + " " + body if rng.random() < 0.7 else body + " " + said
    lead = ""
    if first:
        if intros and rng.random() < 0.45:
            lead = (rng.choices(intros, weights=intro_weights)[0] if intro_weights else rng.choice(intros)) + " "
        if rng.random() < 0.3 and not _greets(lead):
            greeting = rng.choice(_GREETINGS)
            if not (_asks_help(lead) and _asks_help(greeting)):
                lead = greeting + " " + lead
    elif (roll := rng.random()) < 0.3 and not _echoes(sentence := rng.choice(_LEAD_SENTENCES), body):
        lead = sentence + " "  # never "Okay, that works. Okay, ..."
    elif roll < 0.6 and not _echoes(clause := rng.choice(_LEAD_CLAUSES), body):
        lead = clause + " "
        body = body if re.match(r"I\b|[A-Z]{2}", body) else body[:1].lower() + body[1:]  # "I", "OK" keep their case
    message = lead + body
    for sentence in ahead:
        opener = next((o for o in _AHEAD_LEADS if o and sentence.startswith(o)), "")
        if opener and opener.strip(" ,:").lower() in message.lower():  # not "Before I forget, ... Before I forget, ..."
            sentence = sentence[len(opener):][:1].upper() + sentence[len(opener):][1:]
        message += " " + sentence
    if rng.random() < 0.15:
        message = message.rstrip() + rng.choice(_CLOSERS)
    return unstuttered(message)
