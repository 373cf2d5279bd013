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
from conftest import CheckRun, check_details, variant_part

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
    for line in verdicts:  # whole lines: a verdict that lost its "; CHC" or "(no ranking function)" is not in it
        assert f"\n{line}\n" in text, f"{name}: verdict line missing from the report: {line.strip()}"
    assert bool(found) == (name not in ("safe", "pd")), f"{name}: counterexamples?"
    if name == "safe":  # the scheduler's lines, which the run prints once after the variants' blocks
        scheduler = "scheduler (" + check_details(run.stdout).split("\n\nscheduler (", 1)[1]
        assert len(scheduler.splitlines()) >= 8, scheduler
        for line in scheduler.rstrip("\n").splitlines():
            assert f"\n{line}\n" in text, f"the scheduler's line missing from the report: {line.strip()}"
    for block in found:
        assert block in text, f"{name}: stale block in the report: {block.splitlines()[0].strip()}"


# The report's sections that explain a variant's findings, and the variants whose traces they quote.
SECTION_VARIANTS = {"`safe`": ("safe",), "`head`": ("head",), "`v010`": ("v010",), "`ae`": ("ae",),
                    "P/D": ("pd", "pd-early-free", "pd-resume-on-timeout")}
# The sections whose traces are not held to today's output by the test below: traces from before a
# fix, and the verbatim output (test_report_holds_the_current_verdicts_and_traces).
OTHER_SECTIONS = ("What changed", "Current output")


def quoted_traces(text: str) -> list[tuple[str, tuple[str, ...], str]]:
    """(section, its variants, block) for each counterexample or lasso the report's variant
    sections quote in their code blocks."""
    out = []
    for sec in re.split(r"\n(?=## )", text):
        heading = sec.split("\n", 1)[0].removeprefix("## ")
        names = next((v for k, v in SECTION_VARIANTS.items() if heading.startswith(k)), None)
        for fence in re.findall(r"```\n(.*?)```", sec, re.S) if names else ():
            for m in re.finditer(r"^  (?:counterexample|lasso) to \w+:\n(?:(?!  (?:counterexample|lasso) to ).+\n)*",
                                 fence, re.M):
                out.append((heading, names, m.group(0).rstrip("\n")))
    return out


@pytest.mark.slow
def test_every_trace_the_sections_quote_is_what_check_prints_today(check_cli: Callable[..., CheckRun]) -> None:
    """The prose quotes traces too, each under its variant's section: each must be a block `check`
    prints today for that variant, whole (a trace quoted from an earlier model, without the fields
    added since, was not caught by the test above, which only asks that today's blocks appear
    somewhere). The "What changed" section's traces from before a fix are not variant sections."""
    run = check_cli("--traces")
    today = {name: {b.rstrip("\n") for b in blocks(variant_part(run, name))[1]}
             for names in SECTION_VARIANTS.values() for name in names}
    quoted = quoted_traces(REPORT.read_text())
    assert len(quoted) >= 30 and {names for _, names, _ in quoted} == set(SECTION_VARIANTS.values()) - {("safe",)}
    stale = [f"{heading[:20]}: {block.splitlines()[0].strip()}" for heading, names, block in quoted
             if not any(block in today[n] for n in names)]
    assert not stale, stale
    # every trace header in a section is one quoted_traces read, and no other section quotes any
    for sec in re.split(r"\n(?=## )", REPORT.read_text()):
        heading = sec.split("\n", 1)[0].removeprefix("## ")
        headers = sec.count("\n  counterexample to ") + sec.count("\n  lasso to ")
        if heading.startswith(OTHER_SECTIONS):
            continue
        assert headers == sum(h == heading for h, _, _ in quoted), heading
