"""`llumverify check`'s presentation on made-up results (no Z3): the summary table covers every
variant and property within 100 columns, traces and the state legend only with --traces.

Properties, liveness goals, obligations and variants are read from their modules, so adding one
needs no change here."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from llumverify.cli import main
from llumverify.cli import check as check_cmd
from llumverify.cli import check_summary
from llumverify.cli.tables import WIDTH
from llumverify.models.check import Verdict
from llumverify.models.liveness import LivenessResult
from llumverify.models.scope import OBLIGATIONS, ClusterResult, Obligation
from llumverify.models.trace import Trace
from llumverify.properties.liveness import LIVENESS
from llumverify.properties.safety import PROPERTIES
from llumverify.protocol.state import FIELDS, Req, State
from llumverify.protocol.variants import MUST_PROVE, VARIANTS

S0 = State(**dict.fromkeys(FIELDS, 0))
TRACE = Trace(("s_pause",), (S0, S0.replace(req=1, s_free=2)))
PROPS, LIVE, OBLIG = list(PROPERTIES), list(LIVENESS), list(OBLIGATIONS)
BROKEN = next(n for n in VARIANTS if n not in MUST_PROVE)  # one variant with a violation and a bounded result


def _fake_results(tasks: list[tuple[str, str]], depth: int | None, budget: float,
                  paths: int = 1) -> dict[tuple[str, str], Any]:
    """Every variant proves everything, except BROKEN: its first property VIOLATED in 1 step (with a
    trace), its last HOLDS to the depth, its first obligation FAILS."""
    done: dict[tuple[str, str], Any] = {}
    for kind, name in tasks:
        if kind == "scheduler":
            done[kind, name] = (1000, []), [ClusterResult(1, 10, 5, (), ())], []
        elif kind == "safety":
            verdicts = [Verdict(p, "PROVED", 0) for p in PROPS]
            if name == BROKEN:
                verdicts[0] = Verdict(PROPS[0], "VIOLATED", 1, TRACE)
                verdicts[-1] = Verdict(PROPS[-1], "HOLDS", 14 if depth is None else depth)
            done[kind, name] = verdicts, []
        else:
            scope = [Obligation(o, not (name == BROKEN and i == 0), "why") for i, o in enumerate(OBLIG)]
            done[kind, name] = [LivenessResult(n, "PROVED", 100) for n in LIVE], scope
    return done


def _run(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, *args: str) -> tuple[int, str]:
    monkeypatch.setattr(check_cmd, "_run_tasks", _fake_results)
    with pytest.raises(SystemExit) as exc:
        main(["check", *args])
    return int(exc.value.code or 0), capsys.readouterr().out


def test_summary_table_has_every_variant_and_property_within_100_columns(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    code, out = _run(capsys, monkeypatch)
    assert code == 0  # BROKEN is not one that must prove
    assert max(map(len, out.splitlines())) <= WIDTH
    summary = out[out.index(check_summary.TITLE) + len(check_summary.TITLE):]
    blocks = [b.strip("\n") for b in summary.split("\n\n") if b.strip().startswith("property")]
    headers = [b.splitlines()[0].split() for b in blocks]
    assert [v for h in headers for v in h[1:]] == list(VARIANTS)  # each variant once, in order
    for prop in [*PROPS, *LIVE, *OBLIG]:
        assert all(sum(f" {prop} " in line for line in b.splitlines()) == 1 for b in blocks), prop
    broken_block, header = next((b, h) for b, h in zip(blocks, headers) if BROKEN in h)
    col = header.index(BROKEN) - 1
    assert _cell(broken_block, PROPS[0], col) == "VIOLATED(1)"
    assert _cell(broken_block, PROPS[-1], col) == f"HOLDS<={check_cmd.DEFAULT_DEPTH}"
    assert _cell(broken_block, OBLIG[0], col) == "FAILS"
    assert "Legend: PROVED = " in out and "counterexample to" not in out and check_summary.STATE_TITLE not in out


def _cell(block: str, prop: str, col: int) -> str:
    """The cell of `prop` in the col-th variant column of a table block."""
    line = next(line for line in block.splitlines() if f" {prop} " in line)
    words = line.split()
    return words[words.index(prop) + 1 + col]


def test_a_variant_asked_for_with_nothing_to_trace_passes_without_a_state_legend(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """`--variant safe --traces` when every property is proved: exit 0, its verdicts, and neither a
    counterexample nor the state legend (there is no trace for it to explain)."""
    code, out = _run(capsys, monkeypatch, "--variant", "safe", "--skip-scheduler", "--traces")
    assert code == 0
    assert f"variant safe:\n  {PROPS[0]:<22} PROVED (unbounded)\n" in out
    details = out[:out.index(check_summary.TITLE)]
    assert "counterexample" not in details and "lasso" not in details and check_summary.STATE_TITLE not in out
    assert out.rstrip().endswith("verdict: PASS (exit 0): safe: every property PROVED (or TRIVIAL)")


def test_unreachable_goals_are_printed_and_fail_a_variant_asked_for(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """A goal the bound never reaches makes the variant's proofs vacuous: its block says which, the
    summary lists it, the JSON carries it, and a variant asked for fails."""
    def with_unreachable(tasks: list[tuple[str, str]], *args: Any, **kw: Any) -> dict[tuple[str, str], Any]:
        done = _fake_results(tasks, *args, **kw)
        done["safety", "safe"] = (done["safety", "safe"][0], ["phase_x", "action_y"])
        return done

    monkeypatch.setattr(check_cmd, "_run_tasks", with_unreachable)
    with pytest.raises(SystemExit) as exc:
        main(["check", "--variant", "safe", "--skip-scheduler", "--traces"])
    out = capsys.readouterr().out
    assert exc.value.code == 1
    assert "\n  unreachable (vacuity!): phase_x, action_y\n" in out.split(check_summary.TITLE)[0]
    assert "\nvariant safe: unreachable (vacuity!): phase_x, action_y\n" in out
    assert "verdict: FAIL (exit 1): a variant's proof is vacuous (a goal unreachable)" in out


def test_traces_and_their_state_legend_only_on_request(capsys: pytest.CaptureFixture[str],
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    code, out = _run(capsys, monkeypatch, "--variant", BROKEN, "--traces")
    assert code == 1  # a variant asked for must prove everything
    details, summary = out.split(check_summary.STATE_TITLE)
    assert f"variant {BROKEN}:" in details and f"  counterexample to {PROPS[0]}:" in details
    assert "   1. s_pause" in details and "req=PAUSED" in details
    legend = summary[:summary.index(check_summary.TITLE)].splitlines()
    assert [line.split()[0] for line in legend if line.startswith("  ") and not line.startswith("   ")] == [
        f for f in FIELDS if re.search(rf"\b{f}=", details)]
    assert f"({', '.join(r.name for r in Req)})" in " ".join(line.strip() for line in legend)  # an enum's values


def test_a_finished_variant_line_counts_its_verdicts() -> None:
    verdicts = [Verdict("a", "PROVED", 0), Verdict("b", "VIOLATED", 7, TRACE), Verdict("c", "HOLDS", 14)]
    line = check_summary.finished_line("v", (verdicts, ["goal"], [LivenessResult("l", "PROVED", 3)],
                                             [Obligation("o", False)]), 12.4)
    assert line == "variant v done at 12 s: 5 properties: 2 PROVED, 1 HOLDS, 1 VIOLATED, 1 FAILS; " \
                   "1 goals unreachable (vacuity!)"


def test_json_carries_each_verdict_with_its_depth_or_trace(capsys: pytest.CaptureFixture[str],
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    code, out = _run(capsys, monkeypatch, "--variant", BROKEN, "--format", "json")
    report = json.loads(out)
    assert code == 1 and report["ok"] is False and report["variants"][BROKEN]["ok"] is False
    props = {p["property"]: p for p in report["variants"][BROKEN]["properties"]}
    assert props[PROPS[0]]["verdict"] == "VIOLATED" and props[PROPS[0]]["length"] == 1
    assert props[PROPS[0]]["trace"]["steps"] == [{"action": "s_pause", "changes": {"req": "PAUSED", "s_free": 2}}]
    assert props[PROPS[-1]] == {"property": PROPS[-1], "verdict": "HOLDS", "depth": check_cmd.DEFAULT_DEPTH}
    assert {o["obligation"]: o["verdict"] for o in report["variants"][BROKEN]["scope"]}[OBLIG[0]] == "FAILS"
