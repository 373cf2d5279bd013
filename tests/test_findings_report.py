"""reports/protocol-findings.md shows what `llumverify check` prints today, and that is stable.

The report explains each counterexample in prose around the CLI's own output; if the model
changes, this test names the block that went stale.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPORT = Path(__file__).resolve().parents[1] / "reports" / "protocol-findings.md"


def _check(*args: str, hash_seed: str = "0") -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONHASHSEED": hash_seed}
    return subprocess.run([sys.executable, "-m", "llumverify.cli", "check", *args],
                          capture_output=True, text=True, env=env, check=False)


@pytest.mark.parametrize("name", ["head", "v010", "ae"])
def test_report_holds_the_current_verdicts_and_traces(name: str) -> None:
    text = REPORT.read_text()
    run = _check("--variant", name)
    assert run.returncode == 1, run.stderr
    verdicts, *traces = run.stdout.rstrip("\n").split("\n  counterexample to ")
    for line in verdicts.splitlines()[1:]:
        assert line in text, f"{name}: verdict line missing from the report: {line.strip()}"
    assert traces, f"{name}: expected violations"
    for trace in traces:
        block = "  counterexample to " + trace
        assert block in text, f"{name}: stale trace in the report: counterexample to {trace.split(':')[0]}"


def test_check_output_does_not_depend_on_string_hashing() -> None:
    outputs = set()
    for seed in ("1", "2"):
        run = _check("--variant", "head", hash_seed=seed)
        assert run.returncode == 1, run.stderr
        outputs.add(run.stdout)
    assert len(outputs) == 1
