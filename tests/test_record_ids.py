"""Record ids are unique across toolsets and runs (the toolset and the slot seed, hence the run seed, enter them)
and stable for the same run."""
from __future__ import annotations

import re

from sap.api import synthesize
from sap.export.records import trajectory_id


def test_ids_differ_across_toolsets_and_runs_and_repeat_for_the_same_run():
    runs = {(name, seed): [r["id"] for r in synthesize(name, 4, seed=seed).records]
            for name in ("store", "filesystem", "travel") for seed in (1, 2)}
    ids = [i for run in runs.values() for i in run]
    assert len(ids) == len(set(ids)) == 24
    assert all(re.fullmatch(rf"{name}-[0-9a-f]{{12}}-\d+", i) for (name, _), run in runs.items() for i in run)
    assert [r["id"] for r in synthesize("store", 4, seed=1).records] == runs[("store", 1)]


def test_toolset_names_with_separators_make_plain_ids():
    assert re.fullmatch(r"bfcl_GorillaFileSystem-[0-9a-f]{12}-3", trajectory_id("bfcl/GorillaFileSystem", 7, 3))
    assert trajectory_id("cache:travel", 7, 3).startswith("cache_travel-")
    assert trajectory_id("store", 7, 3) != trajectory_id("travel", 7, 3) != trajectory_id("travel", 8, 3)
