"""Cache environment speed: lookups per second from the in-memory index and sampling time per template step, on a
generated cache of 100,000 entries (a search -> details -> booking API with consistent ids).

Side by side in one run: a bare dict lookup (the floor), the index's key lookup (argument key given), a lookup from
an argument dict (argument key built), building the argument key against building the canonical JSON it replaced,
and a full cache-executor call (validators, then lookup).
Targets: >= 1,000,000 lookups/s from the in-memory index; < 1 ms per sampling step. Figures last, as one JSON line.
"""
from __future__ import annotations

import argparse
import json
import random
import time
from collections import deque

from sap.cache import CacheExecutor, CacheIndex
from sap.cache.keys import args_key, canonical_json
from sap.cache.sampling import Sampler, TemplateAbandoned
from sap.cache.templates import Binding, Step, Template
from sap.model import ArgProvenance, Tag, ToolCall, ToolSpec


def _spec(name: str, **params: dict) -> ToolSpec:
    return ToolSpec(name=name, parameters={"type": "object", "properties": params, "required": list(params)})


SPECS = [_spec("search_hotels", city={"type": "string"}, page={"type": "integer", "minimum": 1}),
         _spec("get_hotel", hotel_id={"type": "string"}, lang={"type": "string", "enum": ["en", "de"]}),
         _spec("book_room", hotel_id={"type": "string"}, room_id={"type": "string"}, guest={"type": "string"})]
TEMPLATE = Template(name="search-get-book", steps=[
    Step(function="search_hotels"),
    Step(function="get_hotel", bind={"hotel_id": Binding(step=0, path="$.hotels[*].hotel_id")}),
    Step(function="book_room", bind={"hotel_id": Binding(step=1, path="$.hotel_id"),
                                     "room_id": Binding(step=1, path="$.rooms[*].room_id")})])


def build(entries: int, seed: int) -> CacheIndex:
    """A cache of `entries` calls: 5% searches (10 hotels each), 25% hotel details, the rest bookings."""
    rng = random.Random(seed)
    index = CacheIndex()
    hotels = [f"H{i:06d}" for i in range(entries // 5)]
    rooms = {h: [f"{h}-R{k}" for k in range(rng.randint(2, 5))] for h in hotels}
    for i in range(entries // 20):
        picked = rng.sample(hotels, 10)
        index.add("search_hotels", {"city": f"city{i // 5}", "page": i % 5 + 1},
                  {"hotels": [{"hotel_id": h, "price": rng.randint(50, 400)} for h in picked]})
    for h in hotels[: entries // 8]:
        for lang in ("en", "de"):
            index.add("get_hotel", {"hotel_id": h, "lang": lang},
                      {"hotel_id": h, "lang": lang, "rooms": [{"room_id": r} for r in rooms[h]]})
    while len(index) < entries:
        h = hotels[rng.randrange(entries // 8)]
        index.add("book_room", {"hotel_id": h, "room_id": rng.choice(rooms[h]), "guest": f"guest{rng.randrange(10**6)}"},
                  {"booking_id": f"B{len(index)}", "status": "confirmed"})
    return index


def rate(fn, items: list, rounds: int, *more: list) -> float:
    """Calls of `fn` per second over `rounds` passes through `items` (zipped with `more`), driven by map() so the
    figure is the call's cost, not a Python loop's."""
    start = time.perf_counter()
    for _ in range(rounds):
        deque(map(fn, items, *more), maxlen=0)
    return rounds * len(items) / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=100_000)
    parser.add_argument("--lookups", type=int, default=1_000_000)
    parser.add_argument("--samples", type=int, default=2_000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    started = time.perf_counter()
    index = build(args.entries, args.seed)
    build_s = time.perf_counter() - started
    rng = random.Random(args.seed + 1)
    picked = [index.entries[i] for i in rng.sample(sorted(index.entries), 10_000)]
    keys = [(e.function, args_key(e.args)) for e in picked]
    rounds = max(1, args.lookups // len(keys))
    by_key = index.by_key  # keyed (function, state, argument key); these entries are stateless
    raw = rate(by_key.get, [(f, None, k) for f, k in keys], rounds)
    get_key = index.get_key
    lookups = rate(get_key, [f for f, _ in keys], rounds, [k for _, k in keys])
    from_args = rate(index.get, [e.function for e in picked], max(1, rounds // 4), [e.args for e in picked])
    arg_dicts = [e.args for e in picked]
    tuple_keys = rate(args_key, arg_dicts, max(1, rounds // 4))
    json_keys = rate(canonical_json, arg_dicts, max(1, rounds // 4))
    executor = CacheExecutor(index, SPECS)
    calls = [ToolCall(call_id="c", name=e.function, args_exec=e.args,
                      args_prov={p: ArgProvenance(tag=Tag.self_create) for p in e.args}) for e in picked]
    assert all(executor.execute(c).ok for c in calls[:100])
    executed = rate(executor.execute, calls, max(1, rounds // 10))
    sampler = Sampler(index, max_restarts=20)
    steps = restarts = abandoned = 0
    srng = random.Random(args.seed + 2)
    start = time.perf_counter()
    for _ in range(args.samples):
        try:
            sample = sampler.sample(TEMPLATE, srng)
        except TemplateAbandoned:
            abandoned += 1
            steps += len(TEMPLATE.steps) * (sampler.max_restarts + 1)
            continue
        steps += len(sample.steps) * (sample.restarts + 1)
        restarts += sample.restarts
    step_ms = (time.perf_counter() - start) * 1000 / steps
    print(f"cache of {len(index)} entries built in {build_s:.2f} s")
    print(f"bare dict lookups      {raw:>12,.0f}/s")
    print(f"index key lookups      {lookups:>12,.0f}/s  ({lookups / raw:.2f} of the bare dict)")
    print(f"lookups from arg dicts {from_args:>12,.0f}/s  ({from_args / raw:.2f}; argument key per call)")
    print(f"argument keys built    {tuple_keys:>12,.0f}/s  ({tuple_keys / json_keys:.2f}x canonical JSON texts, "
          f"{json_keys:,.0f}/s)")
    print(f"cache executor calls   {executed:>12,.0f}/s  ({executed / raw:.3f}; validators, then lookup)")
    print(f"sampling: {step_ms:.4f} ms per step attempted ({args.samples} chains of 3 steps, "
          f"{restarts} restarts, {abandoned} abandoned)")
    print(json.dumps({"bench": "cache", "entries": len(index), "build_s": round(build_s, 3),
                      "raw_dict_lookups_per_s": round(raw), "lookups_per_s": round(lookups),
                      "lookups_from_args_per_s": round(from_args),
                      "args_keys_per_s": round(tuple_keys), "canonical_json_per_s": round(json_keys),
                      "args_key_speedup": round(tuple_keys / json_keys, 2), "executor_calls_per_s": round(executed),
                      "lookup_ratio_to_dict": round(lookups / raw, 3), "sample_step_ms": round(step_ms, 4),
                      "samples": args.samples, "restarts": restarts, "abandoned": abandoned}))


if __name__ == "__main__":
    main()
