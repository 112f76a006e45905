"""Request phrases for a tool no phrase book covers (a user's module, an MCP server): how people ask for the kind of
action the tool's name (or its description's first verb) names, about the thing the name names, in several wordings,
rather than the description's own sentence; a tool whose verb is not known keeps that sentence as an imperative."""
from __future__ import annotations

import re
from collections.abc import Mapping
from functools import lru_cache

from sap.alternation import expand_all
from sap.model import ToolSpec
from sap.provenance.phrasebook import ToolPhrases
from sap.text import first_sentence, imperative, plural, task_phrase, words_of

# verb -> the kind of action; a name's first known verb decides (its words before it are a namespace: git_diff)
VERB_KINDS = {
    **dict.fromkeys(("read", "get", "show", "view", "fetch", "retrieve", "describe", "inspect", "display", "print",
                     "check"), "read"),
    **dict.fromkeys(("list", "ls", "enumerate"), "list"),
    **dict.fromkeys(("search", "find", "query", "grep", "locate"), "search"),
    **dict.fromkeys(("create", "make", "new", "init", "mkdir", "generate", "build"), "create"),
    **dict.fromkeys(("write", "save", "put", "store", "append"), "write"),
    **dict.fromkeys(("edit", "update", "modify", "change", "set", "patch", "replace", "rename"), "edit"),
    **dict.fromkeys(("delete", "remove", "rm", "drop", "clear", "erase", "purge", "unlink"), "delete"),
    **dict.fromkeys(("move", "mv", "relocate"), "move"),
    **dict.fromkeys(("copy", "cp", "duplicate", "clone"), "copy"),
    **dict.fromkeys(("diff", "compare"), "diff"),
    **dict.fromkeys(("convert", "translate", "transform"), "convert"),
    **dict.fromkeys(("commit",), "commit"),
    **dict.fromkeys(("checkout",), "switch"),
    **dict.fromkeys(("add", "stage", "attach", "include"), "add"),
    **dict.fromkeys(("send", "post", "publish", "share"), "send"),
}

# kind -> requests (continuations of "Could you ..."): {o} the object with its slot ("the file {path}"), {a} a new
# one, {c} what a write puts in it, {to} the slot of a destination
# parameter ("to {destination}", "against {target}"), {where} and {match} a search's place and pattern
_REQUESTS: dict[str, list[str]] = {
    "read": ["show me {o}", "pull up {o}", "let me see {o}", "[have|take] a look at {o} for me", "bring up {o}",
             "check {o} for me", "get me {o}", "[open|go through] {o}"],
    "list": ["list {o}", "show me [all |]{o}", "let me see [all |]{o}", "give me a rundown of {o}",
             "go through {o} for me"],
    "list_in": ["list what's in {o}", "show me what's in {o}", "tell me what's inside {o}",
                "let me see the contents of {o}", "give me a rundown of {o}"],
    "search": ["look for {o}{where}{match}", "search{where} for {o}{match}", "find {o}{match}{where}",
               "hunt down {o}{match}{where}", "track down {o}{where}{match}"],
    "create": ["make {a}", "set up {a}", "create {a}", "add {a}", "start {a}"],
    "write": ["write {o}", "save {o}", "put {o} in place", "fill in {o}"],
    "write_with": ["write {c} into {o}", "save {c} to {o}", "put {c} in {o}", "fill {o} with {c}",
                   "[store|keep] {c} in {o}"],
    "edit": ["edit {o}", "update {o}", "make changes to {o}", "change {o}", "rework {o}"],
    "delete": ["delete {o}", "remove {o}", "get rid of {o}", "clear out {o}", "drop {o}"],
    "move": ["move {o}{to}", "relocate {o}{to}", "shift {o}{to}", "[take|carry] {o} over{to}"],
    "copy": ["copy {o}{to}", "make a copy of {o}{to}", "duplicate {o}{to}"],
    "diff": ["show me {o}{to}", "let me see {o}{to}", "walk me through {o}{to}", "go over {o}{to}"],
    "convert": ["convert {o}", "work out {o}", "translate {o}", "figure out {o}"],
    "commit": ["commit {o}", "check in {o}", "make a commit of {o}", "record {o} in a commit"],
    "switch": ["switch to {o}", "check out {o}", "move over to {o}", "change over to {o}"],
    "add": ["add {o}", "include {o}", "put {o} in", "bring in {o}"],
    "send": ["send {o}", "post {o}", "share {o}", "get {o} out"],
}
_DEFAULT_OBJECT = {"diff": "changes", "commit": "my changes", "read": "details", "convert": "value", "list": "items",
                   "search": "matches"}
_FILLER = {"a", "an", "the", "all", "multiple", "many", "several", "some", "detailed", "complete", "new", "current",
           "based", "given"}
_CONNECTIVE = {"with", "from", "by", "in", "for", "to", "of", "on", "at", "into", "and"}
_HANDLE = re.compile(r"(?:^|\s)(?:path|paths|name|names|id|ids|key|file|files|directory|folder|uri|url|ref|revision"
                     r"|title|source)$")
_PLACE = re.compile(r"(?:^|\s)(?:path|directory|folder|dir|location|repo|repository|root)$")
_BODY = re.compile(r"^(?:content|contents|text|body|data)$", re.I)  # what a write puts in its object
_PATTERN = re.compile(r"^(?:pattern|query|q|glob|regex|keyword|keywords|term|search_term)$", re.I)
_ABOUT = {"info", "information", "details", "status", "contents", "content", "tree", "log", "history", "size",
          "metadata", "stats", "listing"}  # what is told about a thing, not the thing a handle names
_THING = re.compile(r"(?:^|\s+)(?:name|names|id|ids|path|paths|key|title|source)$")  # a handle's own word
_TO = {"move": " to", "copy": " to", "diff": " against"}
_DESTINATION = re.compile(r"^(?:destination|dest|target|to|new_?\w*|output\w*)$", re.I)


_NOT_NOUN = re.compile(r"^(?:true|false|whether|if|when|optional|required|default|set|used|specifies|indicates)\b",
                       re.I)


def parameter_noun(spec: ToolSpec, param: str) -> str:
    """Plain words for a parameter without a phrase book: its description's noun when short ("The name of the
    file." -> "name of the file"), else its name in words (`pedalPosition` -> "pedal position")."""
    desc = str(spec.properties.get(param, {}).get("description", ""))
    desc = re.sub(r"^\s*\[[^\]]*\]\s*", "", desc)
    head = re.split(r"[.,;:()\[\]]", desc, maxsplit=1)[0].strip()
    head = re.sub(r"^(?:the|a|an)\s+", "", head, flags=re.I)
    words = head.split()
    if 1 <= len(words) <= 4 and all(re.fullmatch(r"[A-Za-z-]+", w) for w in words) and not _NOT_NOUN.match(head):
        return head[:1].lower() + head[1:]
    return words_of(param)


def action_kind(spec: ToolSpec, namespace: frozenset[str] = frozenset()) -> tuple[str | None, list[str]]:
    """The kind of action a tool names (`VERB_KINDS`) and the words of its name after the verb. The verb leads the
    name, after namespace words only (`git_diff_staged`, `git_add`, `trading_get_login_status`); a name without one (a
    verb later is a noun: `notify_price_change`) takes its description's first verb and keeps all its words
    (`directory_tree`: read, directory tree)."""
    words = words_of(spec.name).split()
    lead = next((i for i, w in enumerate(words) if w not in namespace), len(words))
    if lead < len(words) and words[lead] in VERB_KINDS:
        return VERB_KINDS[words[lead]], words[lead + 1:]
    verb, _, rest = imperative(first_sentence(spec.description)).lower().partition(" ")
    words = words[lead:] or words
    if len(words) == 1 and not any(w.startswith(words[0]) for w in re.findall(r"[a-z]+", rest)):
        return None, words  # a one-word name its description does not name (`transfer`: "Move money ..."): a verb
    return VERB_KINDS.get(verb), words


def _object_words(words: list[str], kind: str, params: set[str]) -> tuple[str, str]:
    """(head, trailer) of the thing a tool's name names: "directory with sizes" -> ("directory", "with sizes");
    quantity and filler words dropped; a trailer that names a parameter is left to the parameter's own words
    ("zipcode based on city"); a lone adjective of a diff names changes ("unstaged" -> "unstaged changes")."""
    cut = next((i for i, w in enumerate(words) if w in _CONNECTIVE), len(words))
    head = [w for w in words[:cut] if w not in _FILLER]
    trailer = words[cut:] if cut < len(words) - 1 else []
    if set(trailer) & params:
        trailer = []
    if kind == "diff" and head and head[-1].endswith("ed"):
        head.append("changes")
    return " ".join(head), " ".join(trailer)


def _kin(spec: ToolSpec, specs: Mapping[str, ToolSpec]) -> list[ToolSpec]:
    """The other tools of the same owner."""
    return [s for s in specs.values() if s.owner == spec.owner and s.name != spec.name]


def _context_params(spec: ToolSpec, specs: Mapping[str, ToolSpec]) -> frozenset[str]:
    """Required parameters every other tool of the same owner (two or more) requires too, as a repository path the
    whole server works on: the setting, not the thing a call is about."""
    kin = _kin(spec, specs)
    if len(kin) < 2:
        return frozenset()
    return frozenset(p for p in spec.required if all(p in s.required for s in kin))


def _namespace(spec: ToolSpec, specs: Mapping[str, ToolSpec]) -> frozenset[str]:
    """Words a tool's name opens with that name the toolset rather than an action: its owner's words, and a first
    word two or more other tools of the owner open with too, unless it is a verb (`git`, `trading`)."""
    first = words_of(spec.name).split()[0]
    shared = sum(words_of(s.name).split()[0] == first for s in _kin(spec, specs)) >= 2 and first not in VERB_KINDS
    return frozenset(words_of(spec.owner or "").split()) | ({first} if shared else set())


def _object(head: str, primary: str, noun: str) -> tuple[str, str]:
    """The object with the primary parameter's slot, and the noun the slot takes: "the file {path}" (file); the
    thing the parameter names split off the head ("pending order address" + order id -> "the address of the
    pending order {order_id}", order) or added to it ("details" + account id -> "the details of the account
    {account_id}", account); what is told of the thing put after it ("file info" + path -> "the info on the file
    {path}", file); a tool named by its verb alone by its parameter ("the branch {branch_name}", branch)."""
    thing = _THING.sub("", noun)
    words = head.split()
    if not words:
        return f"the {noun if not thing else thing} {{{primary}}}", (thing or noun).split()[-1]
    last = thing.split()[-1] if thing else words[-1]
    if len(words) > 1 and words[-1] in _ABOUT and not thing:  # "the info on the file {path}": the slot names the
        told, about = words[-1], " ".join(words[:-1])  # file, and a reference reads "the info on that file"
        return f"the {told} {'of' if told == 'tree' else 'on'} the {about} {{{primary}}}", words[-2]
    if last == words[-1] or not thing:
        return f"the {head} {{{primary}}}", words[-1]
    if last in words[:-1]:
        at = words.index(last) + 1
        return f"the {' '.join(words[at:])} of the {' '.join(words[:at])} {{{primary}}}", last
    return f"the {head} of the {thing} {{{primary}}}", last


def _requests(spec: ToolSpec, kind: str, words: list[str], context: frozenset[str]) -> tuple[list[str],
                                                                                             dict[str, str]]:
    """The requests of a tool of a known kind, and the nouns its slots take ("path" of a file tool: "file")."""
    head, trailer = _object_words(words, kind, {w for p in spec.properties for w in words_of(p).split()})
    subject = [p for p in spec.required if p not in context and not _DESTINATION.match(p) and not _PATTERN.match(p)]
    destination = next((p for p in spec.required if _DESTINATION.match(p) and p not in context), None)
    pattern = next((p for p in spec.required if _PATTERN.match(p)), None)
    primary = subject[0] if subject else None
    noun = parameter_noun(spec, primary) if primary else ""
    nouns: dict[str, str] = {}
    where = ""
    handle = bool(primary) and _HANDLE.search(" " + noun) is not None  # the primary names the thing: a path, an id
    container = handle and not _THING.sub("", noun)
    if kind == "list" and head and not container:  # "list the branches", whatever number the name has
        head = " ".join([*head.split()[:-1], plural(head.split()[-1])])
    if kind == "search":  # a search's parameters are where to look ("in {path}") and what to match, not its object
        obj = f"the {head or _DEFAULT_OBJECT[kind]}"
        where = f" in {{{primary}}}" if primary and _PLACE.search(" " + noun) else ""
    elif handle and primary:
        obj, nouns[primary] = _object(head, primary, noun)
    elif not head and primary and kind in ("add", "send", "delete"):  # "add {stock} to watchlist"
        obj = f"{{{primary}}}"
    else:
        head = head or _DEFAULT_OBJECT.get(kind, words_of(spec.name))
        obj = head if head.startswith("my ") else f"the {head}"
    if kind == "list" and container:
        kind = "list_in"  # a listing of one container: "what's in the directory {path}"
    body = next((p for p in spec.required if p != primary and _BODY.match(p)), None)
    if kind == "write" and body and "{" in obj:
        kind = "write_with"  # what goes in it said too: "write {content} into the file {path}"
    if trailer:
        obj += f" {trailer}"
    fields = {"o": obj, "c": f"{{{body}}}", "where": where,
              "a": "a new " + obj.removeprefix("the ") if obj.startswith("the ") else obj,
              "match": f" matching {{{pattern}}}" if pattern else "",
              "to": f"{_TO.get(kind, ' to')} {{{destination}}}" if destination else ""}
    return [t.format(**fields) for t in _REQUESTS[kind]], nouns


@lru_cache(maxsize=4096)
def _generic(spec_json: str, context: frozenset[str], namespace: frozenset[str]) -> ToolPhrases:
    """generic_phrases, cached by the tool's spec, its context parameters and namespace words (the renderer asks
    once per call)."""
    spec = ToolSpec.model_validate_json(spec_json)
    kind, words = action_kind(spec, namespace)
    nouns = {p: parameter_noun(spec, p) for p in spec.properties}
    if kind is None:
        request = task_phrase(spec) if first_sentence(spec.description) else f"help me with {words_of(spec.name)}"
        return ToolPhrases(spec.name, (request,), (), (), nouns, written=False)
    entries, own = _requests(spec, kind, words, context)
    readings = {r: 1 / len(expand_all([e])) for e in entries for r in expand_all([e])}
    return ToolPhrases(spec.name, tuple(readings), (), (), {**nouns, **own}, written=False, weights=readings)


def generic_phrases(spec: ToolSpec, specs: Mapping[str, ToolSpec] | None = None) -> ToolPhrases:
    """Phrases for a tool without a phrase book: requests of the kind of action its name names, about what the name
    names (`read_text_file` -> "pull up the text file {path}", `git_branch` -> "list the git branches"), with a
    noun per parameter; the description's first sentence as an imperative where the verb is unknown."""
    specs = specs or {}
    return _generic(spec.model_dump_json(), _context_params(spec, specs), _namespace(spec, specs))
