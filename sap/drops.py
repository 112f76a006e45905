"""Why a slot was dropped: `DropReason`, the kind stored beside the detailed message (which stays free text)."""
from __future__ import annotations

from enum import Enum


class DropReason(str, Enum):
    """The kind of a drop; its value is what run summaries group and count by."""

    CODE_CHECK = "code check failed"
    JUDGE_REJECT_TEXT = "judge reject_text"
    JUDGE_REJECT_TRUTH = "judge reject_truth"
    TOOL_FAILED = "a tool kept failing"
    TEMPLATE_ABANDONED = "no cached chain fits the template"
    ECHO_MISMATCH = "query does not echo the sampled values"
    CACHE_REPLAY = "replay through the cache differs"
    ROLE_FAILED = "an LLM role gave up"
    CRASHED = "an unexpected error in the trajectory"
    UNKNOWN = "unknown"

    @classmethod
    def of_judge(cls, decision: str) -> DropReason:
        """The kind of a drop by the judge's `decision` (reject_text or reject_truth)."""
        return cls(f"judge {decision}")

    @classmethod
    def of_text(cls, reason: str) -> DropReason:
        """The kind of a drop stored before kinds were recorded, read off its message's opening words."""
        openings = (("code check", cls.CODE_CHECK), ("judge reject_text", cls.JUDGE_REJECT_TEXT),
                    ("judge reject_truth", cls.JUDGE_REJECT_TRUTH), ("echo mismatch", cls.ECHO_MISMATCH),
                    ("replay through the cache", cls.CACHE_REPLAY), ("LLM role", cls.ROLE_FAILED),
                    ("template ", cls.TEMPLATE_ABANDONED))
        kind = next((kind for opening, kind in openings if reason.startswith(opening)), None)
        if kind is None and " failed " in reason and " times at turn " in reason:
            kind = cls.TOOL_FAILED
        return kind or cls.UNKNOWN


JUDGE_DROPS = frozenset({DropReason.JUDGE_REJECT_TEXT, DropReason.JUDGE_REJECT_TRUTH})
