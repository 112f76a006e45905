"""Train/test splits of an export: `--split train=0.9,val=0.1` read into shares, and each record placed by the
SHA-256 of its id alone, so a record keeps its split across exports, re-runs and a grown dataset."""
from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Iterable
from itertools import accumulate
from typing import Any

from sap.errors import UsageError

SPLIT_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_-]*")
NO_SPLIT = {"train": 1.0}


def parse_split(text: str | None) -> dict[str, float]:
    """`train=0.9,val=0.1` as {name: share}; None gives one `train` split. Shares are positive and add up to 1."""
    if text is None:
        return dict(NO_SPLIT)
    shares: dict[str, float] = {}
    for part in text.split(","):
        name, eq, value = (s.strip() for s in part.partition("="))
        if not eq or not SPLIT_NAME.fullmatch(name):
            raise UsageError(f"--split {text!r}: {part.strip()!r} is not NAME=SHARE with a name of letters, digits, "
                             "'_' or '-' (e.g. train=0.9,test=0.1)")
        if name in shares:
            raise UsageError(f"--split {text!r}: split {name!r} is given twice")
        try:
            share = float(value)
        except ValueError:
            raise UsageError(f"--split {text!r}: share {value!r} of {name!r} is not a number") from None
        if not 0 < share <= 1:
            raise UsageError(f"--split {text!r}: share {value} of {name!r} must be above 0 and at most 1")
        shares[name] = share
    if not math.isclose(sum(shares.values()), 1.0, abs_tol=1e-6):
        raise UsageError(f"--split {text!r}: the shares add up to {sum(shares.values()):g}, not 1")
    return shares


def split_of(record_id: str, shares: dict[str, float]) -> str:
    """The split of the record with id `record_id`: the first 64 bits of SHA-256(id) as a point in [0, 1), placed
    on the splits' cumulative shares in the order given."""
    point = int.from_bytes(hashlib.sha256(record_id.encode("utf-8")).digest()[:8], "big") / 2**64
    names = list(shares)
    for name, bound in zip(names, accumulate(shares.values())):
        if point < bound:
            return name
    return names[-1]  # the shares' float sum fell a hair short of 1


def split_records(records: Iterable[dict[str, Any]], shares: dict[str, float]) -> dict[str, list[dict[str, Any]]]:
    """The records of each split, in their order, every split of `shares` present (an empty list if none fall in
    it); a record without an id is an error naming its position."""
    out: dict[str, list[dict[str, Any]]] = {name: [] for name in shares}
    for k, record in enumerate(records):
        out[record_split(record, k, shares)].append(record)
    return out


def record_split(record: dict[str, Any], position: int, shares: dict[str, float]) -> str:
    """The split of `record`, the `position`-th record of an export; an error naming the position if it has no id."""
    if not record.get("id"):
        raise UsageError(f"record {position} has no id: --split places records by their id")
    return split_of(str(record["id"]), shares)
