"""RODS variant pipeline yield with the offline agents: per toolset, how many variant slots end with a kept
(topology-isomorphic, validated) variant, in how many rounds, why the others failed, how many augmentations were
kept, and the time per kept variant; every kept record is replayed with `sap validate`'s check. The figures are
printed last as one JSON line."""
from __future__ import annotations

import argparse
import json
import time
from collections import Counter

from sap.api import synthesize
from sap.export.records import record_to_trajectory
from sap.graphs.variant import VariantContext, make_variants
from sap.provenance.topology import topology_difference
from sap.toolsets import load_toolset
from sap.validate import validate_record


def measure(name: str, seeds: int, per_seed: int, seed: int) -> dict:
    """Yield figures for one toolset."""
    toolset = load_toolset(name)
    records = synthesize(toolset, seeds, seed=seed).records
    ctx = VariantContext(toolset)
    start = time.perf_counter()
    outcomes = [o for r in records for o in make_variants(ctx, r, per_seed, augment=("miss_param", "miss_func"))]
    seconds = time.perf_counter() - start
    kept = [o for o in outcomes if o.records]
    by_id = {r["id"]: r for r in records}
    invalid = sum(bool(validate_record(rec, toolset)) for o in kept for rec in o.records)
    not_isomorphic = sum(topology_difference(record_to_trajectory(by_id[o.seed_id]),
                                             record_to_trajectory(o.records[0])) is not None
                         and not o.records[0]["meta"]["rods"]["substitutions"] for o in kept)
    failures = Counter(m["stage"] for o in outcomes for m in o.memory)
    return {"slots": len(outcomes), "kept": len(kept), "kept_share": round(len(kept) / len(outcomes), 3),
            "rounds": dict(sorted(Counter(o.rounds for o in kept).items())),
            "with_substitutes": sum(bool(o.records[0]["meta"]["rods"]["substitutions"]) for o in kept),
            "augmentations_kept": sum(len(o.records) - 1 for o in kept),
            "failed_rounds_by_stage": dict(sorted(failures.items())),
            "invalid_records": invalid, "not_isomorphic": not_isomorphic,
            "seconds_per_kept": round(seconds / max(1, len(kept)), 3)}


def main() -> None:
    """Measure every built-in toolset and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seeds", type=int, default=10, help="seed records per toolset")
    parser.add_argument("--per-seed", type=int, default=3, help="variants per seed")
    parser.add_argument("--seed", type=int, nargs="+", default=[0],
                        help="synthesis seeds of the seed records; with several, the kept share's mean and worst")
    args = parser.parse_args()
    results: dict[str, dict] = {}
    for name in ("filesystem", "store", "travel"):
        runs = {seed: measure(name, args.seeds, args.per_seed, seed) for seed in args.seed}
        for seed, r in runs.items():
            print(f"{name:10s} seed {seed}: kept {r['kept']}/{r['slots']} ({r['kept_share']:.0%}), rounds {r['rounds']}, "
                  f"with substitutes {r['with_substitutes']}, augmentations kept {r['augmentations_kept']}, "
                  f"failed rounds {r['failed_rounds_by_stage']}, invalid {r['invalid_records']}, "
                  f"{r['seconds_per_kept']} s per kept variant")
        shares = [r["kept_share"] for r in runs.values()]
        results[name] = {"by_seed": runs, "kept_share_mean": round(sum(shares) / len(shares), 3),
                         "kept_share_worst": min(shares)}
        print(f"{name:10s} kept share over seeds {args.seed}: mean {results[name]['kept_share_mean']:.0%}, "
              f"worst {results[name]['kept_share_worst']:.0%}")
    print(json.dumps({"bench": "variant_yield", "seeds": args.seeds, "per_seed": args.per_seed, **results}))


if __name__ == "__main__":
    main()
