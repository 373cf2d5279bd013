"""What a user sees from `llumverify check`: exit codes, one-line errors, JSON (schema 3)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable

import pytest
from conftest import CheckRun, check_details, variant_part

from llumverify.cli import main
from llumverify.cli import check as check_cmd
from llumverify.cli import check_summary
from llumverify.models.check import DEFAULT_DEPTH, Verdict
from llumverify.protocol.variants import VARIANTS
from llumverify.models.liveness import LivenessResult
from llumverify.models.scope import OBLIGATIONS, Obligation
from llumverify.properties.liveness import LIVENESS
from llumverify.properties.safety import PROPERTIES


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exc:
        main(["check", *args])
    out = capsys.readouterr()
    return int(exc.value.code or 0), out.out, out.err


@pytest.mark.slow
def test_safe_variant_passes(check_cli: Callable[..., CheckRun]) -> None:
    run = check_cli("--traces")  # every variant, as the README's `llumverify check`, with the traces
    out = variant_part(run, "safe")
    assert run.returncode == 0 and run.report["variants"]["safe"]["ok"] is True
    assert "single_owner           PROVED (unbounded)" in out
    assert "at_most_once           PROVED (unbounded)" in out
    assert "  liveness, weak fairness once failures stop (" in out
    assert "no_stuck_pause         PROVED (unbounded; ranking function)" in out
    assert "handover               PROVED (unbounded)" in out
    assert "\nscheduler (pair_instances, choose_request): HOLDS (bounded: " in run.stdout
    assert "counterexample" not in out and "lasso" not in out  # nothing to trace
    done = re.search(r"^variant safe done at \d+ s: (\d+) properties: (\d+) PROVED, 1 TRIVIAL$", run.stderr, re.M)
    assert done and int(done[1]) == int(done[2]) + 1  # all but the trivial no_pending_pull
    # stderr holds one such line per variant and nothing else (no warning, no traceback)
    lines = run.stderr.splitlines()
    assert sorted(ln.split()[1] for ln in lines) == sorted(VARIANTS)
    assert all(re.fullmatch(r"variant \S+ done at \d+ s: \d+ properties: \d+ PROVED(, \d+ [A-Z]+)*", ln) for ln in lines)
    assert run.stdout.rstrip().endswith("(reports/protocol-findings.md says what each is)")


@pytest.mark.slow
def test_head_variant_fails_with_numbered_trace_and_lasso(check_cli: Callable[..., CheckRun]) -> None:
    run = check_cli("--traces")
    out = variant_part(run, "head")
    assert run.report["variants"]["head"]["ok"] is False
    assert "single_owner           VIOLATED in 7 steps" in out
    assert "counterexample to single_owner:" in out and "   7. " in out
    assert "reservation_freed      VIOLATED: lasso of 5 + 0 steps" in out
    assert "lasso to reservation_freed:" in out and "  then for ever: " in out
    # head's column of the summary (its first table: safe, ae, v010, head, pd)
    table = run.stdout[run.stdout.index(check_summary.TITLE):].split("\n\n")[0].splitlines()
    names = table[1].split()[1:]
    head = {row.split()[-len(names) - 1]: row.split()[-len(names) + names.index("head")] for row in table[3:]}
    assert head["single_owner"] == "VIOLATED(7)" and head["reservation_freed"] == "VIOLATED(5)"


@pytest.mark.slow
def test_the_summary_table_is_the_json_for_every_variant(check_cli: Callable[..., CheckRun]) -> None:
    """The run of every variant's table, cell for cell, against its JSON (the liveness cells too:
    `head`'s reservation_freed is VIOLATED(5), a lasso of 5 + 0 steps); and each variant's block,
    as variant_part cuts it, is its own and whole."""
    run = check_cli("--traces")
    want = {}
    for name, v in run.report["variants"].items():
        for p in v["properties"]:
            want[name, p["property"]] = {"PROVED": "PROVED", "TRIVIAL": "TRIVIAL", "HOLDS": f"HOLDS<={p.get('depth')}"}.get(
                p["verdict"], f"VIOLATED({p.get('length')})")
        for r in v["liveness"]:
            want[name, r["property"]] = {"PROVED": "PROVED", "HOLDS": "HOLDS(fin)"}.get(
                r["verdict"], f"VIOLATED({r.get('length')})")
        for o in v["scope"]:
            want[name, o["obligation"]] = "PROVED" if o["verdict"] == "PROVED" else "FAILS"
    table = run.stdout[run.stdout.index(check_summary.TITLE) + len(check_summary.TITLE):run.stdout.index("Legend: ")]
    got = {}
    for block in table.strip("\n").split("\n\n"):
        header, _, *rows = block.splitlines()
        variants = header.split()[1:]
        for row in rows:
            words = row.split()
            for name, cell in zip(variants, words[-len(variants):]):
                if cell != "-":  # not checked for that variant
                    got[name, words[-len(variants) - 1]] = cell
    assert got == want
    assert got["head", "reservation_freed"] == "VIOLATED(5)" and got["v010", "migration_terminates"] == "HOLDS(fin)"
    parts = [variant_part(run, name) for name in VARIANTS]
    assert all(part.count("\nvariant ") == 0 and "scheduler (" not in part for part in parts)
    assert "\n".join(parts) + "\n" in check_details(run.stdout) + "\n"


@pytest.mark.slow
def test_a_variant_asked_for_that_fails_exits_1_with_its_summary_legend_and_verdict(
        check_cli: Callable[..., CheckRun]) -> None:
    """`--variant` (pd-early-free: the quickest that fails): its own summary column, the legend of
    the state fields its trace shows, no scheduler lines, exit 1 and the verdict naming it."""
    run = check_cli("--variant", "pd-early-free", "--traces")
    out = run.stdout
    assert run.returncode == 1
    assert "  no_loss                VIOLATED in 5 steps" in out and "   5. s_send_commit " in out
    summary = out[out.index(check_summary.TITLE):]
    assert re.search(r"\n\w* +no_loss +VIOLATED\(5\)\n", summary)
    assert out.count(" PROVED\n") == check_details(out).count(" PROVED (unbounded")  # the summary's rows
    legend = out[out.index(check_summary.STATE_TITLE):out.index(check_summary.TITLE)]
    assert "\n  s_free " in legend and "\n  req " in legend
    # the run skips the scheduler (conftest.check_cli): neither its lines nor its JSON
    assert "scheduler (pair_instances" not in out and "scheduler intent" not in out and "scheduler" not in run.report
    assert run.report["variants"]["pd-early-free"]["ok"] is False and run.report["ok"] is False
    assert re.fullmatch(r"variant pd-early-free done at \d+ s: 42 properties: 40 PROVED, 1 TRIVIAL, 1 VIOLATED\n",
                        run.stderr)
    assert out.rstrip().endswith("verdict: FAIL (exit 1): pd-early-free: not every property PROVED or TRIVIAL")


def test_holds_is_not_a_proof() -> None:
    """A variant asked for fails unless every property is PROVED: "HOLDS up to depth N" (BMC)
    and "HOLDS on N states" (explicit liveness) are not proofs."""
    proved = [Verdict(p, "PROVED", 0) for p in PROPERTIES]
    live = [LivenessResult(n, "PROVED", 10) for n in LIVENESS]
    scope = [Obligation(n, True) for n in OBLIGATIONS]
    assert check_cmd._ok(proved, [], live, scope)
    assert not check_cmd._ok([*proved[:-1], Verdict("x", "HOLDS", 12)], [], live, scope)
    assert not check_cmd._ok(proved, [], [*live[:-1], LivenessResult("y", "HOLDS", 10)], scope)
    assert not check_cmd._ok(proved, ["action:d_fence"], live, scope)
    assert not check_cmd._ok(proved, [], live, [*scope[:-1], Obligation("handover", False, "x")])


def test_the_last_line_says_which_variants_decide_the_exit_and_that_the_others_are_findings() -> None:
    """A newcomer reading VIOLATED in five columns and exit 0 is told why: the verdict names the variants that
    must prove everything, and calls the other variants' violations findings, not failures of the run."""
    proved = ([Verdict(p, "PROVED", 0) for p in PROPERTIES], [], [LivenessResult(n, "PROVED", 10) for n in LIVENESS],
              [Obligation(n, True) for n in OBLIGATIONS])
    broken = ([*proved[0][:-1], Verdict(list(PROPERTIES)[-1], "VIOLATED", 7)], *proved[1:])
    bounded = ([*proved[0][:-1], Verdict(list(PROPERTIES)[-1], "HOLDS", 12)], *proved[1:])
    line = check_summary.verdict({"safe": proved, "pd": proved, "head": broken}, ["safe", "pd"], False)
    assert line.startswith("verdict: PASS (exit 0): safe, pd: every property PROVED") and "head: other variants" in line
    assert "other variants" not in check_summary.verdict({"safe": proved}, ["safe"], False)
    assert check_summary.verdict({"safe": bounded}, ["safe"], True) == \
        "verdict: FAIL (exit 1): safe: not every property PROVED or TRIVIAL"
    # the scheduler's or the mutants' failure, alone or beside a variant's, is named too
    assert check_summary.verdict({"safe": proved}, ["safe"], False, True) == \
        "verdict: FAIL (exit 1): the scheduler's or the mutants' checks above failed"
    both = check_summary.verdict({"safe": bounded}, ["safe"], True, True).replace("\n", " ")
    assert both == ("verdict: FAIL (exit 1): safe: not every property PROVED or TRIVIAL; the scheduler's or the "
                    "mutants' checks above failed")
    assert "vacuous" in check_summary.verdict({"safe": proved}, ["safe"], True)  # a goal unreachable


@pytest.mark.slow
def test_v010_fails_with_its_audited_violations(check_cli: Callable[..., CheckRun]) -> None:
    """(The findings report's run; the JSON form of these verdicts: tests/test_check_output.py.)"""
    run = check_cli("--traces")
    out = variant_part(run, "v010")
    assert run.report["variants"]["v010"]["ok"] is False
    assert "  copy_into_reserved     PROVED (unbounded; CHC)\n" in out  # BMC to 13 steps, then Spacer (models/chc.py)
    # its stage boundaries are atomic: the stale KV needs a preemption and re-admission during a
    # non-final stage's pre-allocation (13 steps), not at the start (8 steps before)
    assert "  no_stale_kv            VIOLATED in 13 steps\n" in out
    # as audited: the manager's clean-up never runs, so a paused request is lost
    assert "  no_loss                VIOLATED in 3 steps\n" in out
    # ... and the forward pass in flight at the pause may finish it, which D's commit then runs again
    assert "  at_most_once           VIOLATED in 7 steps\n" in out


@pytest.mark.slow
def test_json_report_of_the_safe_variant(check_cli: Callable[..., CheckRun]) -> None:
    """The JSON that `--json-out` writes beside the text (the run test_safe_variant_passes reads)."""
    report = check_cli("--traces").report
    assert report["ok"] is True and report["schema"] == check_cmd.SCHEMA == 3 and "mutants" not in report
    safe = report["variants"]["safe"]
    assert safe["ok"] is True and safe["strict"] is True and safe["unreachable"] == []
    assert [p["property"] for p in safe["properties"]] == [*PROPERTIES, "decisive"]
    assert {p["property"] for p in safe["properties"] if p["verdict"] != "PROVED"} == {"no_pending_pull"}
    assert next(p for p in safe["properties"] if p["property"] == "no_pending_pull")["verdict"] == "TRIVIAL"
    assert [r["property"] for r in safe["liveness"]] == list(LIVENESS)
    assert all(r["verdict"] == "PROVED" and r["explicit_states"] > 10_000 for r in safe["liveness"])
    assert [o["obligation"] for o in safe["scope"]] == [*OBLIGATIONS, "two_links", "any_stage_count"]
    assert all(o["verdict"] == "PROVED" for o in safe["scope"])
    sched = report["scheduler"]
    assert sched["ok"] is True and sched["faults"] == [] and sched["inputs_checked"] > 100_000
    assert [c["limit"] for c in sched["clusters"]] == [1, 2]
    assert all(c["states"] > 10_000 and c["unreached"] == [] for c in sched["clusters"])


def test_a_design_that_lost_an_abort_path_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    """pd edited to drop its timeouts (session 36's protocol hunt, P12b) has fewer executions, so every property
    still PROVED: `check` must fail it, naming the abort path its proofs no longer cover."""
    import dataclasses

    slip = dataclasses.replace(VARIANTS["pd"], timeouts=False, resolve_commit_timeout=False)
    monkeypatch.setattr(check_cmd, "VARIANTS", {**VARIANTS, "pd": slip})
    monkeypatch.setattr(check_cmd, "check_variant", lambda v, *a, **k: [Verdict(p, "PROVED", 0) for p in PROPERTIES])
    monkeypatch.setattr(check_cmd, "unreachable", lambda v: [])
    verdicts, unreachable = check_cmd._task("safety", "pd", None, 0.0)
    assert unreachable == [f"action:{a} (absent: timeouts)" for a in ("timeout_alloc", "timeout_copy", "timeout_commit")]
    live = [LivenessResult(n, "PROVED", 10) for n in LIVENESS]
    assert not check_cmd._ok(verdicts, unreachable, live, [Obligation(n, True) for n in OBLIGATIONS])
    monkeypatch.setattr(check_cmd, "VARIANTS", VARIANTS)
    assert check_cmd._task("safety", "pd", None, 0.0)[1] == []  # pd as shipped keeps every abort path
    assert check_cmd._task("safety", "v010", None, 0.0)[1] == []  # an old code variant is listed, not required to


def _fake_safe_tasks(tasks: list[tuple[str, str]], depth: int | None, budget: float, paths: int = 1) -> dict:
    """check's tasks answered without Z3: every property, liveness property and obligation holds."""
    from llumverify.models.scope import ClusterResult

    done: dict = {}
    for kind, name in tasks:
        if kind == "scheduler":
            done[kind, name] = (1000, []), [ClusterResult(1, 10, 5, (), ())], []
        elif kind == "safety":
            done[kind, name] = [Verdict(p, "PROVED", 0) for p in (*PROPERTIES, "decisive")], []
        else:
            done[kind, name] = [LivenessResult(n, "PROVED", 100) for n in LIVENESS], \
                [Obligation(o, True) for o in OBLIGATIONS]
    return done


@pytest.mark.slow
def test_json_output_with_mutants(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
                                  tmp_path) -> None:
    """`--mutants`' JSON, on results made by hand (running every hand-written and named mutant is
    tests/test_models.py's, a sample of generated ones and the census tests/test_mutants.py's), the
    variant's own proofs stood in for (the run above has them), `--json` and `--json-out` at once, and
    `--format json` the same."""
    from llumverify.models.mutants import MUTANTS, Mutant, MutantResult
    hand = next(iter(MUTANTS.values()))
    gen = Mutant("decode/drop/0", "decode: guard without `s_alive`", None, VARIANTS["safe"], "generated")
    few = [hand.name, gen.name]
    monkeypatch.setattr(check_cmd, "_run_tasks", _fake_safe_tasks)
    monkeypatch.setattr(check_cmd, "run_all", lambda depth, generated_too=False: [
        MutantResult(hand, {hand.expect: 3}), MutantResult(gen, {"no_loss": 2})])
    # every scheduler mutant and intent slip is tests/test_models_scope.py's; here one survivor
    # must reach the JSON and fail the run
    monkeypatch.setattr(check_cmd, "scheduler_mutant_kills", lambda: {"caught": True, "missed": False})
    code, out, _ = _run(capsys, "--variant", "safe", "--json", "--mutants", "--json-out", str(tmp_path / "r.json"))
    report = json.loads(out)
    assert json.loads((tmp_path / "r.json").read_text()) == report
    assert code == 1 and report["ok"] is False and report["variants"]["safe"]["ok"] is True
    mut = report["mutants"]
    assert [r["name"] for r in mut["results"]] == few and all(r["killed"] for r in mut["results"][:1])
    assert mut["census"] == {"generated": 1, "killed": 1, "equivalent": 0, "survivors": [], "unreviewed": []}
    assert mut["scheduler"] == {"caught": True, "missed": False}
    # `--format json`, the spelling `simulate --format` uses, prints what the old `--json` prints
    assert _run(capsys, "--variant", "safe", "--format", "json", "--mutants")[1] == out


def test_format_json_counts_as_json_for_paths(capsys: pytest.CaptureFixture[str],
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """`--paths N` needs somewhere to print the counterexamples: `--format json` is that place as `--json` is
    (the option is resolved before the check), and `--format table` without --traces is not. Guards --format json
    read after the --paths check (a refusal whose own message names --format json)."""
    monkeypatch.setattr(check_cmd, "_run_tasks", _fake_safe_tasks)
    code, out, err = _run(capsys, "--variant", "safe", "--skip-scheduler", "--format", "json", "--paths", "2")
    assert code == 0 and json.loads(out)["ok"] is True, err
    code, out, err = _run(capsys, "--variant", "safe", "--skip-scheduler", "--format", "table", "--paths", "2")
    assert code == 2 and out == "" and "printed only with --traces" in err


def test_mutant_lines_say_what_killed_each() -> None:
    """The text `--mutants` prints (render_mutants), on results made by hand."""
    from llumverify.models.mutants import MUTANTS, Mutant, MutantResult
    hand = next(iter(MUTANTS.values()))
    gen = Mutant("decode/drop/0", "decode: guard without `s_alive`", None, VARIANTS["safe"], "generated")
    out = check_cmd.render_mutants([MutantResult(hand, {hand.expect: 3}), MutantResult(gen, {}, equivalent="same relation")])
    assert f"  {hand.name:<34} killed by {hand.expect} in 3 steps" in out.splitlines()
    assert "mutants: 1/1 hand-written and named killed" in out
    assert "generated mutants: 1 generated, 0 killed, 1 proved equivalent, 0 survivors (0 not reviewed)" in out


@pytest.mark.parametrize("args", [("--variant", "nope"), ("--depth", "0"), ("--format", "csv"),
                                  ("--json", "--format", "table")])
def test_bad_options_are_one_line(capsys: pytest.CaptureFixture[str], args: tuple[str, ...]) -> None:
    code, out, err = _run(capsys, *args)
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1


def test_the_verdict_calls_findings_only_violations_and_names_a_variant_whose_liveness_is_bounded() -> None:
    """Another variant that violates nothing is no finding; a variant that must prove everything but whose
    liveness holds only on the finite state space (HOLDS(fin)) is named, not put down to the scheduler."""
    proved = ([Verdict(p, "PROVED", 0) for p in PROPERTIES], [], [LivenessResult(n, "PROVED", 10) for n in LIVENESS],
              [Obligation(n, True) for n in OBLIGATIONS])
    line = check_summary.verdict({"safe": proved, "pd": proved, "ae": proved}, ["safe", "pd"], False)
    assert "other variants" not in line and "ae" not in line.split(":")[-1]
    finite = (*proved[:2], [*proved[2][:-1], LivenessResult(list(LIVENESS)[-1], "HOLDS", 10)], proved[3])
    assert check_summary.verdict({"safe": finite}, ["safe"], True) == \
        "verdict: FAIL (exit 1): safe: not every property PROVED or TRIVIAL"
