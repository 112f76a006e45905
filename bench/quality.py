"""Training-data quality of fresh sets: n records per toolset with the offline rule agents, each set checked by
`sap audit` (ambiguous references, no-op and repeated calls, error results, placeholder values, leaks, dictated
calls) and replayed by `sap validate`, and the user text's diversity (self-BLEU-4 and distinct-2 on a seeded sample
of up to 400 user requests, bare confirmations left out) beside the same figures for BFCL's own user turns
(BFCL_v4_multi_turn_base.json); per toolset also the tools no record calls and, for BFCL classes, the share of
records calling each of BFCL's five most-tested tools of the class beside BFCL's own share (its possible_answer
file); one table per toolset, then, over the BFCL sets together, the share of argument values taken from an
earlier call's result and from an earlier turn's (`bfcl_depth`), then one JSON line. Per set also the text's shape: assistant texts that dump a
structure, user texts with a third-person verb where a request needs the base form.

Each table also gives the turn shape: calls per turn (over the user requests that make calls; a bare yes to a
policy's recap counts with the request it confirms), the share of calls the user
message dictates (`dictated_call`) and the share of calls that got a request phrase of their own (every call but a
goal turn's prerequisites, `sap.provenance.goals`).

Run: PYTHONPATH=. python bench/quality.py [-n 100] [--toolsets filesystem,bfcl/TradingBot] [--mix ...]
     [--user-style goal|explicit] [--save DIR] [--records DIR] [--generate-only]
`--save DIR` keeps each set as DIR/<toolset>.jsonl; `--records DIR` audits such saved sets instead of generating
(so sets made by another checkout, with `--generate-only`, can be audited by this one).
"""
from __future__ import annotations

import argparse
import functools
import json
import math
import random
import re
import sys
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sap.api import synthesize
from sap.fsm.probe import probe
from sap.jsonutil import read_records, write_jsonl
from sap.provenance.checks import is_confirmation
from sap.runs.slots import parse_mix
from sap.toolsets import load_toolset
from sap.validate import validate_record

DEFAULT = ["filesystem", "store", "travel", "bfcl/GorillaFileSystem+TwitterAPI", "bfcl/TravelAPI", "bfcl/TradingBot",
           "bfcl/VehicleControlAPI", "tau2/retail", "tau2/airline"]


def set_file(directory: Path, toolset: str) -> Path:
    """Where a toolset's set is saved: DIR/<toolset with '/' and '+' as '_'>.jsonl."""
    return directory / (toolset.replace("/", "_").replace("+", "_") + ".jsonl")


SAMPLE = 400  # user messages per diversity sample (the usual 300-500)


def tokens(text: str) -> list[str]:
    """Lower-case word and punctuation tokens."""
    return re.findall(r"\w+|[^\w\s]", text.lower())


def ngrams(toks: Sequence[str], n: int) -> Counter[tuple[str, ...]]:
    """The n-gram counts of a token list."""
    return Counter(tuple(toks[i:i + n]) for i in range(len(toks) - n + 1))


def self_bleu(texts: Sequence[str], max_n: int = 4) -> float:
    """Mean BLEU-4 of each text against all the others as references: clipped n-gram precisions (clipped by the
    highest count in any other text), uniform weights, method-1 smoothing (0.1 for a zero count) and the brevity
    penalty against the closest reference length, as nltk's sentence_bleu computes it."""
    toks = [tokens(t) for t in texts]
    if len(toks) < 2:
        return 0.0
    grams = [[ngrams(t, n) for n in range(1, max_n + 1)] for t in toks]
    top: list[dict[tuple[str, ...], tuple[int, int, int]]] = [{} for _ in range(max_n)]  # gram -> (max, owner, 2nd)
    for i, per_n in enumerate(grams):
        for k, counts in enumerate(per_n):
            for g, c in counts.items():
                best, owner, second = top[k].get(g, (0, -1, 0))
                top[k][g] = (c, i, best) if c > best else (best, owner, max(second, c))
    lengths = [len(t) for t in toks]
    scores = []
    for i, per_n in enumerate(grams):
        c = lengths[i]
        if c == 0:
            continue
        logs = []
        for k, counts in enumerate(per_n):
            total = sum(counts.values())
            if total == 0:
                break
            hit = sum(min(n, (top[k][g][0] if top[k][g][1] != i else top[k][g][2])) for g, n in counts.items())
            logs.append(math.log((hit or 0.1) / total))
        if len(logs) < max_n:
            scores.append(0.0)  # shorter than 4 tokens: nltk scores it 0
            continue
        r = min((abs(n - c), n) for j, n in enumerate(lengths) if j != i)[1]
        bp = 1.0 if c > r else math.exp(1 - r / c)
        scores.append(bp * math.exp(sum(logs) / max_n))
    return sum(scores) / len(scores) if scores else 0.0


def distinct(texts: Sequence[str], n: int = 2) -> float:
    """Distinct-n: distinct n-grams over all n-grams of the texts."""
    counts: Counter[tuple[str, ...]] = Counter()
    for t in texts:
        counts.update(ngrams(tokens(t), n))
    return len(counts) / max(1, sum(counts.values()))


def user_sample(records: list[dict[str, Any]], seed: int) -> list[str]:
    """A seeded sample of up to SAMPLE user messages of a set (bare confirmations of a recap left out)."""
    texts = [m["content"] for r in records for m in r.get("messages", [])
             if m.get("role") == "user" and isinstance(m.get("content"), str) and not is_confirmation(m["content"])]
    return random.Random(seed).sample(texts, min(SAMPLE, len(texts)))


def bfcl_user_turns() -> list[str]:
    """BFCL's own user turns (multi_turn_base questions), or none without bfcl-eval."""
    from sap.toolsets.bfcl import BfclUnavailable, data_dir

    try:
        path = data_dir() / "BFCL_v4_multi_turn_base.json"
    except BfclUnavailable:
        return []
    return [m["content"] for line in path.read_text(encoding="utf-8").splitlines() if line.strip()
            for turn in json.loads(line)["question"] for m in turn if m.get("role") == "user"]


def _json_lines(path: Path) -> list[dict[str, Any]]:
    """The entries of a JSON-lines file."""
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


@functools.cache
def bfcl_tool_shares() -> dict[str, dict[str, float]]:
    """Per BFCL class, the share of BFCL's base entries involving it whose ground truth calls each of its tools
    (BFCL_v4_multi_turn_base.json and its possible_answer file), or none without bfcl-eval."""
    from sap.toolsets.bfcl import BFCL_CLASSES, BfclUnavailable, data_dir

    try:
        root = data_dir()
    except BfclUnavailable:
        return {}
    name = "BFCL_v4_multi_turn_base.json"
    truth = {e["id"]: e["ground_truth"] for e in _json_lines(root / "possible_answer" / name)}
    questions = _json_lines(root / name)
    out: dict[str, dict[str, float]] = {}
    for cls in BFCL_CLASSES:
        tools = {t.name for t in load_toolset(f"bfcl/{cls}").tools}
        entries = [e for e in questions if cls in e["involved_classes"]]
        called = Counter(t for e in entries for t in {c.split("(")[0] for turn in truth[e["id"]] for c in turn} & tools)
        out[cls] = {t: round(called[t] / len(entries), 3) for t in sorted(tools)} if entries else {}
    return out


def tool_coverage(toolset: str, records: list[dict[str, Any]], bfcl: dict[str, dict[str, float]]) -> dict[str, Any]:
    """The toolset's tools no record calls, and per BFCL class in it, BFCL's five most-tested tools with the share
    of BFCL's entries and of these records calling each (`ok`: at least half of BFCL's share); `never_succeeds`:
    the never-called tools no call of the FSM probe got to succeed either: a hint, not a proof, that the executor
    refuses every call of it (BFCL's weather.com lookup always answers {"error": 404}); a tool the probe cannot
    prepare for (retail's payment change) may still succeed in a dialogue."""
    ts = load_toolset(toolset)
    called = Counter(t for r in records for t in {p["name"] for p in r["provenance"]})
    out: dict[str, Any] = {"never_called": sorted(t.name for t in ts.tools if not called[t.name])}
    if out["never_called"]:  # a tool no probe call ever got to succeed has no ground truth to give
        profiles = probe(ts, seeds=3).profiles
        out["never_succeeds"] = [t for t in out["never_called"] if t in profiles and not profiles[t].successes]
    if toolset.startswith("bfcl/"):
        top = {}
        for cls in toolset.removeprefix("bfcl/").split("+"):
            shares = bfcl.get(cls, {})
            for tool in sorted(shares, key=lambda t: (-shares[t], t))[:5]:
                ours = round(called[tool] / max(1, len(records)), 3)
                top[tool] = {"bfcl": shares[tool], "sap": ours, "ok": ours >= shares[tool] / 2}
        out["bfcl_top_tools"] = top
    return out


_RAW = re.compile(r"[{}\[\]]|['\"]\s*:|\b(?:True|False|None)\b|\bitem\(s\)|\bdone \(")  # a dumped structure's marks
_BASE_SLOT = r"\b(?:you|to|please|Please|I|can't|cannot|and|then|Then)\s+(?:also\s+|just\s+|quickly\s+)?"


def third_person_forms(toolset: str) -> set[str]:
    """The third-person verbs the toolset's descriptions open with ("Checks", "Presses"), lower-case."""
    verbs = {str(t.description).split()[0].lower().strip(".,:") for t in load_toolset(toolset).tools
             if str(t.description).split()}
    return {v for v in verbs if re.fullmatch(r"[a-z]+(?:es|s)", v) and not v.endswith("ss")}


def text_shape(toolset: str, records: list[dict[str, Any]]) -> dict[str, int]:
    """Assistant texts that dump a structure (braces, brackets, Python reprs, "item(s)", "done (...)"; quoted text
    aside), and user
    texts with a third-person verb where a request needs the base form ("can you checks", "to presses")."""
    said = [m["content"] for r in records for m in r["messages"]
            if m.get("role") == "assistant" and isinstance(m.get("content"), str) and m["content"].strip()]
    users = [m["content"] for r in records for m in r["messages"]
             if m.get("role") == "user" and isinstance(m.get("content"), str)]
    forms = third_person_forms(toolset)
    wrong = re.compile(_BASE_SLOT + "(?:" + "|".join(map(re.escape, sorted(forms))) + r")\b", re.I) if forms else None
    unquoted = [re.sub(r"“[^”]*”?", "", t) for t in said]  # quoted file text may hold brackets of its own
    return {"assistant_texts": len(said), "assistant_dumps": sum(bool(_RAW.search(t)) for t in unquoted),
            "user_texts": len(users), "third_person": sum(bool(wrong and wrong.search(t)) for t in users)}


def diversity(texts: Sequence[str]) -> dict[str, float]:
    """Self-BLEU-4 and distinct-2 of a sample."""
    return {"self_bleu4": round(self_bleu(texts), 3), "distinct2": round(distinct(texts), 3), "sample": len(texts)}


def fresh_set(toolset: str, n: int, seed: int, mix: dict[str, float],
              user_style: str = "goal") -> tuple[list[dict[str, Any]], float]:
    """n accepted records of `toolset` with the rule agents, and the seconds it took."""
    start = time.perf_counter()
    summary = synthesize(load_toolset(toolset), n, seed=seed, mix=mix, user_style=user_style)
    return summary.records, time.perf_counter() - start


def earlier_turn_outputs(records: list[dict[str, Any]]) -> int:
    """Arguments bound from the result of a call of an earlier turn (prev_output across turns, not a same-turn
    prerequisite's)."""
    return sum(a.get("tag") == "prev_output" and (a.get("source") or {}).get("turn", p["turn"]) < p["turn"]
               for r in records for p in r["provenance"] for a in p["args"].values())


def bfcl_depth(rows: list[dict[str, Any]]) -> dict[str, float] | None:
    """The BFCL sets together: the share of argument values from an earlier call's result, and from an earlier
    turn's (the ground-truth issue's measure, and its stricter reading); None without BFCL sets."""
    bfcl = [r for r in rows if r["toolset"].startswith("bfcl/")]
    args = sum(r["arguments"] for r in bfcl)
    if not args:
        return None
    return {"sets": len(bfcl), "arguments": args,
            "prev_output_share": round(sum(r["depth"]["prev_output_share"] * r["arguments"] for r in bfcl) / args, 4),
            "earlier_turn_share": round(sum(r["earlier_turn_outputs"] for r in bfcl) / args, 4)}


def quality_row(toolset: str, records: list[dict[str, Any]]) -> dict[str, Any]:
    """The audit of one set plus its `sap validate` pass count."""
    from sap.audit import audit_records
    from sap.provenance.stats import dataset_stats

    report = audit_records(records)
    ts = load_toolset(toolset)
    valid = sum(not validate_record(r, ts, i) for i, r in enumerate(records))
    return {"toolset": toolset, "records": len(records), "validate_pass": valid, **report.summary(),
            "turn_shape": turn_shape(records, report.summary()["checks"]["dictated_call"]["count"]),
            "earlier_turn_outputs": earlier_turn_outputs(records),
            "chains": dataset_stats(records)["chains"], "diversity": diversity(user_sample(records, 0)),
            "coverage": tool_coverage(toolset, records, bfcl_tool_shares()), "text_shape": text_shape(toolset, records)}


def request_turns(record: dict[str, Any]) -> list[int]:
    """Per user turn of a record, the turn of the request it serves: its own, or for a bare yes to a recap
    (a policy's confirmation) the request it confirms."""
    users = [m.get("content") or "" for m in record["messages"] if m.get("role") == "user"]
    out: list[int] = []
    for t, text in enumerate(users):
        out.append(out[-1] if t and is_confirmation(text) else t)
    return out


def turn_shape(records: list[dict[str, Any]], dictated: int) -> dict[str, float]:
    """Calls per turn (over the user requests that make calls, a confirmation counted with the request it
    confirms), the share of calls the user message dictates (`dictated` of them, by the audit) and the share
    that got a request phrase of their own (all but prerequisites)."""
    calls = [p for r in records for p in r["provenance"]]
    turns = {(r["id"], request_turns(r)[p["turn"]]) for r in records for p in r["provenance"]}
    own = sum(not p.get("prerequisite") for p in calls)
    return {"calls_per_turn": round(len(calls) / max(1, len(turns)), 3),
            "dictated_share": round(dictated / max(1, len(calls)), 3),
            "own_request_share": round(own / max(1, len(calls)), 3)}


def print_table(row: dict[str, Any], reference: dict[str, float]) -> None:
    """One toolset's figures as a small table, its user-text diversity beside BFCL's (`reference`)."""
    print(f"\n== {row['toolset']}: {row['records']} records, {row['validate_pass']} pass sap validate, "
          f"{row['calls']} calls, {row['arguments']} arguments")
    print(f"  {'check':<22} {'count':>6} {'of':>6} {'share':>7}  examples")
    for name, check in row["checks"].items():
        print(f"  {name:<22} {check['count']:>6} {check['of']:>6} {check['share']:>7.1%}  "
              + ", ".join(check["examples"][:2]))
    chains = row["chains"]
    print(f"  output-derived args {row['depth']['prev_output_share']:.1%}, chain L mean "
          f"{chains['output_derived']['mean_chain_length']:.2f} max {chains['output_derived']['max_chain_length']}; "
          f"announced ahead {chains['announced']['share']:.1%}")
    shape = row["turn_shape"]
    print(f"  turn shape: {shape['calls_per_turn']:.2f} calls per turn; calls dictated {shape['dictated_share']:.1%}, "
          f"with a request phrase of their own {shape['own_request_share']:.1%}")
    cover = row["coverage"]
    failing = set(cover.get("never_succeeds", []))
    print("  tools never called: " + (", ".join(t + (" (no FSM probe call of it succeeded either)" if t in failing
                                                      else "") for t in cover["never_called"]) or "none"))
    for tool, share in cover.get("bfcl_top_tools", {}).items():
        print(f"  BFCL top tool {tool:<28} records calling it: sap {share['sap']:.0%}, BFCL {share['bfcl']:.0%}"
              f"{'' if share['ok'] else '  (below half of BFCL)'}")
    text = row["text_shape"]
    print(f"  assistant texts dumping a structure: {text['assistant_dumps']} of {text['assistant_texts']}; user texts "
          f"with a third-person request verb: {text['third_person']} of {text['user_texts']}")
    div, leak = row["diversity"], row["checks"]["internals_leak"]
    print(f"  user text: self-BLEU-4 {div['self_bleu4']:.3f} (BFCL {reference.get('self_bleu4', float('nan')):.3f}), "
          f"distinct-2 {div['distinct2']:.3f} (BFCL {reference.get('distinct2', float('nan')):.3f}) on "
          f"{div['sample']} messages; leaking internals {leak['share']:.1%}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("-n", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--toolsets", default=",".join(DEFAULT))
    parser.add_argument("--mix", default="base=0.6,miss_param=0.2,miss_func=0.2", help="as sap synthesize --mix")
    parser.add_argument("--user-style", choices=("goal", "explicit"), default="goal", help="as sap synthesize")
    parser.add_argument("--save", type=Path, help="directory to keep each generated set in")
    parser.add_argument("--records", type=Path, help="audit the sets saved in this directory instead of generating")
    parser.add_argument("--generate-only", action="store_true", help="generate (and --save) without auditing")
    args = parser.parse_args()
    mix = parse_mix(args.mix)
    bfcl_turns = bfcl_user_turns()
    reference = diversity(random.Random(0).sample(bfcl_turns, min(SAMPLE, len(bfcl_turns)))) if bfcl_turns else {}
    rows = []
    for name in args.toolsets.split(","):
        if args.records:
            records = [rec for _, rec in read_records(set_file(args.records, name))]
        else:
            records, seconds = fresh_set(name, args.n, args.seed, mix, args.user_style)
            print(f"{name}: {len(records)} records in {seconds:.0f} s", file=sys.stderr, flush=True)
        if args.save:
            args.save.mkdir(parents=True, exist_ok=True)
            write_jsonl(set_file(args.save, name), records)
        if args.generate_only:
            continue
        row = quality_row(name, records)
        print_table(row, reference)
        rows.append(row)
    totals = {key: sum(r["checks"][key]["count"] for r in rows) for key in (rows[0]["checks"] if rows else {})}
    depth = bfcl_depth(rows)
    if depth:
        print(f"\nBFCL sets together ({depth['sets']}, {depth['arguments']} arguments): from an earlier call's result "
              f"{depth['prev_output_share']:.1%}, from an earlier turn's {depth['earlier_turn_share']:.1%}")
    print(json.dumps({"n": args.n, "seed": args.seed, "mix": args.mix, "user_style": args.user_style, "totals": totals,
                      "bfcl_depth": depth, "bfcl_user_text": reference, "toolsets": rows}))


if __name__ == "__main__":
    main()
