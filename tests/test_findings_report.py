"""reports/protocol-findings.md shows what `llumverify check` prints today, and that is stable:
it is regenerated under PYTHONHASHSEED=0 and read here from runs under 1 (tests/conftest.py,
check_cli), so a verdict or trace that depended on string hashing would show as a stale block.

The report explains each counterexample (trace or lasso) in prose around the CLI's own output;
if the model changes, this test names the block that went stale.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import CheckRun, variant_part

REPORT = Path(__file__).resolve().parents[1] / "reports" / "protocol-findings.md"


def blocks(part: str) -> tuple[list[str], list[str]]:
    """The verdict lines, and each counterexample or lasso block, of one variant's part of the
    output of `--traces` (conftest.variant_part)."""
    parts = re.split(r"\n(?=  (?:counterexample|lasso) to )", part.rstrip("\n"))
    return parts[0].splitlines()[1:], parts[1:]


@pytest.mark.slow
@pytest.mark.parametrize("name", ["head", "v010", "ae", "safe", "pd", "pd-early-free",
                                  "pd-resume-on-timeout"])
def test_report_holds_the_current_verdicts_and_traces(name: str, check_cli: Callable[..., CheckRun]) -> None:
    text = REPORT.read_text()
    run = check_cli("--traces")
    assert run.report["variants"][name]["ok"] is (name in ("safe", "pd")), run.stderr
    verdicts, found = blocks(variant_part(run, name))
    for line in verdicts:
        assert line in text, f"{name}: verdict line missing from the report: {line.strip()}"
    assert bool(found) == (name not in ("safe", "pd")), f"{name}: counterexamples?"
    for block in found:
        assert block in text, f"{name}: stale block in the report: {block.splitlines()[0].strip()}"
