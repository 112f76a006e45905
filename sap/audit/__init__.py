"""`sap audit`: checks that training data is learnable (see sap.audit.checks), over any supported dataset."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sap.audit.checks import CHECKS, Finding
from sap.audit.dialogues import AuditDialogue, AuditInputError, load_dialogues, records_dialogues

__all__ = ["AuditInputError", "AuditReport", "audit_dialogues", "audit_file", "audit_records", "parse_thresholds"]


@dataclass
class AuditReport:
    """Per check: items looked at and findings; plus what the set holds."""

    format: str
    records: int
    calls: int
    arguments: int
    prev_output: int
    looked: dict[str, int] = field(default_factory=dict)
    findings: dict[str, list[Finding]] = field(default_factory=dict)

    def share(self, check: str) -> float:
        """Flawed items over items looked at (0 when none was)."""
        return len(self.findings[check]) / self.looked[check] if self.looked[check] else 0.0

    def summary(self, examples: int = 5) -> dict[str, Any]:
        """The report as JSON: per check count, of, share and example locations."""
        return {"format": self.format, "records": self.records, "calls": self.calls, "arguments": self.arguments,
                "depth": {"prev_output_share": self.prev_output / self.arguments if self.arguments else 0.0},
                "checks": {name: {"count": len(self.findings[name]), "of": self.looked[name],
                                  "share": self.share(name),
                                  "examples": [f"{f.where}: {f.detail}" for f in self.findings[name][:examples]]}
                           for name in CHECKS}}


def audit_dialogues(fmt: str, dialogues: list[AuditDialogue]) -> AuditReport:
    """Run every check over the dialogues."""
    report = AuditReport(fmt, len(dialogues), sum(len(d.calls) for d in dialogues),
                         sum(len(c.args) for d in dialogues for c in d.calls),
                         sum((c.prov or {}).get(p, {}).get("tag") == "prev_output"
                             for d in dialogues for c in d.calls for p in c.args))
    for name, check in CHECKS.items():
        report.looked[name], report.findings[name] = 0, []
        for d in dialogues:
            looked, found = check(d)
            report.looked[name] += looked
            report.findings[name] += found
    if fmt != "sap":  # no declared provenance: count what the reference check took for prev_output
        report.prev_output = report.looked["ambiguous_reference"]
    return report


def audit_file(path: str | Path, answers: str | Path | None = None) -> AuditReport:
    """Audit a JSONL file of sap records, OpenAI-messages records or BFCL questions (with their answers)."""
    fmt, dialogues = load_dialogues(path, answers)
    return audit_dialogues(fmt, dialogues)


def audit_records(records: list[dict[str, Any]]) -> AuditReport:
    """Audit in-memory sap records."""
    return audit_dialogues("sap", records_dialogues(records))


def parse_thresholds(text: str) -> dict[str, float]:
    """`check=share,...` (a share 0..1, or a percentage with %) for --fail-on; ValueError naming the bad part."""
    out = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, _, raw = part.partition("=")
        if name not in CHECKS:
            raise ValueError(f"--fail-on: unknown check {name!r}; checks: {', '.join(CHECKS)}")
        try:
            out[name] = float(raw[:-1]) / 100 if raw.endswith("%") else float(raw)
        except ValueError:
            raise ValueError(f"--fail-on: {part!r} needs check=share, e.g. {name}=0.02 or {name}=2%") from None
    return out
