"""The system prompt a record opens with: the assistant's role and domain in words (and the domain's policy where it
has one), never sap's machinery or backend names."""
from __future__ import annotations

from sap.model import Toolset
from sap.provenance.policy import Policy, policy_of
from sap.text import field_words, join_words, task_phrase

CONDUCT = ("Use the available tools to carry out the user's requests. If a request lacks a detail you need, ask "
           "for it instead of guessing; if no tool can do what is asked, say so. After acting, tell the user plainly "
           "what you found or did, and if something fails, say what went wrong and what they can do next.")
# sap's own domains and the BFCL classes: what the assistant is, in a phrase completing "You are a helpful assistant"
ROLES = {
    "filesystem": "who manages the user's files and folders in their home directory: listing, reading, searching, "
                  "creating, copying, moving and deleting them",
    "store": "for an online store, helping signed-in customers with their profile, orders, returns, exchanges, "
             "address changes and shopping cart",
    "travel": "at a travel agency, helping a traveler find destinations, hotels and flights, book and manage them "
              "from their wallet, check the weather and convert currencies",
    "GorillaFileSystem": "manage files and folders in the user's workspace",
    "TwitterAPI": "use the user's social media account: post, search and comment on posts and follow people",
    "MessageAPI": "send, search and manage messages between users of a workspace messaging app",
    "TicketAPI": "create, update and resolve support tickets in the user's ticketing system",
    "TradingBot": "manage the user's stock trading account: quotes, watchlist, orders, funds and transactions",
    "TravelAPI": "book and manage flights, credit cards, travel insurance and budget for the user",
    "VehicleControlAPI": "control the user's car: engine, doors, brakes, lights, climate, cruise control and "
                         "navigation, and check its status",
    "MathAPI": "do arithmetic, statistics and unit conversions",
}
TAU2_ROLES = {
    "retail": "You are a customer service agent for an online retail store. You help one authenticated customer per "
              "conversation with their orders, returns, exchanges, address and payment questions.",
    "airline": "You are a customer service agent for an airline. You help one customer per conversation with their "
               "reservations: booking, changing and cancelling flights, baggage, passengers and compensation.",
}


def system_prompt(toolset: Toolset) -> str:
    """The system message of `toolset`'s records: its role and domain, how to behave, and its policy if any."""
    classes = toolset.extra.get("bfcl_classes")
    if toolset.name.startswith("tau2/") and toolset.name.split("/", 1)[1] in TAU2_ROLES:
        role = TAU2_ROLES[toolset.name.split("/", 1)[1]]
    elif classes:
        role = ("You are a helpful assistant that can " + join_words([ROLES.get(c, field_words(c)) for c in classes])
                + ".")
    elif toolset.name in ROLES:
        role = f"You are a helpful assistant {ROLES[toolset.name]}."
    else:
        role = _generic_role(toolset)
    policy = toolset.extra.get("docs") if toolset.name.startswith("tau2/") else None
    rules = policy_rules(toolset) if policy is None else ""
    text = f"{role} {CONDUCT}" + (f" {rules}" if rules else "")
    return text + (f"\n\nFollow this policy:\n\n{policy.strip()}" if isinstance(policy, str) and policy.strip() else "")


def _generic_role(toolset: Toolset) -> str:
    """A user toolset's role from its description (else its name in words)."""
    about = (toolset.description or "").strip().rstrip(".")
    if about:
        return f"You are a helpful assistant for this service: {about[:1].lower() + about[1:]}."
    return f"You are a helpful assistant for {field_words(toolset.name.rsplit('/', 1)[-1].rsplit('.', 1)[0])}."


def policy_rules(toolset: Toolset) -> str:
    """A declared policy's rules in words (for toolsets whose policy has no text of its own), "" without one."""
    policy: Policy | None = policy_of(toolset)
    if policy is None:
        return ""
    specs = {t.name: t for t in toolset.tools}
    out = []
    for rule in policy.must_precede:
        first = " or ".join(task_phrase(specs[n]) for n in rule.first if n in specs)
        if first:
            out.append(f"Before anything else, {first}" + (" (once per conversation)." if rule.once else "."))
    if policy.confirm_before is not None:
        out.append("Before any change, list its details and wait for the user's explicit yes.")
    if policy.one_at_a_time:
        out.append("Make one tool call at a time.")
    if policy.terminal is not None and policy.terminal.message:
        out.append(f"When you hand the user over, end with: {policy.terminal.message}")
    return " ".join(out)
