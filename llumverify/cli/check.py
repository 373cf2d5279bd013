"""`llumverify check`: prove or refute the migration protocol's safety and liveness properties."""

from __future__ import annotations

import json
import math
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any

import click
from tqdm import tqdm

from llumverify.cli import check_summary
from llumverify.cli.command import Command
from llumverify.errors import UserError
from llumverify.files.interrupt import forkserver_context, stop_pool, worker_start
from llumverify.files.paths import writable_file, write_atomic
from llumverify.models.check import DEFAULT_DEPTH, Verdict, absent_abort_paths, check_variant, unreachable
from llumverify.models.intent import check_intent, render_intent
from llumverify.models.liveness import BOUND_TEXT, LivenessResult, check_liveness
from llumverify.models.product import two_links
from llumverify.models.stages import stage_obligations
from llumverify.models.mutants import REVIEWED_SURVIVORS, MutantResult, census, run_all
from llumverify.models.scope import (
    LIMITS, ClusterResult, Obligation, explore_cluster, obligations, scheduler_inputs,
    scheduler_mutant_kills,
)
from llumverify.protocol.variants import MUST_PROVE, VARIANTS, get_variant

# Version of the --json layout. 2: liveness results per variant, a per-variant "ok", mutant
# census; a variant asked for fails unless every property is PROVED. 3: "scope" (the
# composition obligations) per variant and "scheduler" (the bounded cluster model).
SCHEMA = 3


def _verdict_line(v: Verdict) -> str:
    if v.verdict == "PROVED":
        return f"  {v.prop:<22} PROVED (unbounded{'; ' + v.note if v.note else ''})"
    if v.verdict == "TRIVIAL":
        return f"  {v.prop:<22} TRIVIAL, not counted as proved ({v.note})"
    if v.verdict == "HOLDS":
        return f"  {v.prop:<22} HOLDS up to depth {v.depth}"
    return f"  {v.prop:<22} VIOLATED in {v.depth} steps"


def _liveness_line(r: LivenessResult) -> str:
    if r.verdict == "PROVED":
        return f"  {r.name:<22} PROVED (unbounded; ranking function)"
    if r.verdict == "HOLDS":
        return f"  {r.name:<22} HOLDS on {r.states:,} states (no ranking function)"
    assert r.lasso is not None
    return (f"  {r.name:<22} VIOLATED: lasso of {len(r.lasso.prefix)} + "
            f"{len(r.lasso.loop)} steps")


def render_variant(name: str, verdicts: list[Verdict], unreachable: list[str],
                   liveness: list[LivenessResult] | None = None,
                   scope: list[Obligation] | None = None) -> str:
    """What a user reads for one variant: one line per property, then each shortest trace."""
    lines = [f"variant {name}:"] + [_verdict_line(v) for v in verdicts]
    if liveness:
        lines.append(f"  liveness, weak fairness once failures stop ({liveness[0].states:,} "
                     f"explicit states: {BOUND_TEXT}):")
        lines += [_liveness_line(r) for r in liveness]
    if scope:
        lines.append("  scope, any number of requests, instances and concurrent migrations (composition "
                     "obligations)" + (", and of stages" if any(o.name == "any_stage_count" for o in scope) else "")
                     + ":")
        lines += [f"  {o.name:<22} PROVED (unbounded)" if o.holds
                  else f"  {o.name:<22} FAILS: {o.why}" for o in scope]
    if unreachable:
        lines.append("  unreachable (vacuity!): " + ", ".join(unreachable))
    for v in verdicts:
        if v.trace is not None:
            lines.append(f"  counterexample to {v.prop}:")
            lines.append(v.trace.render())
        for i, t in enumerate(v.others, start=2):
            lines.append(f"  counterexample {i} to {v.prop} (through other actions):")
            lines.append(t.render())
    for r in liveness or ():
        if r.lasso is not None:
            lines.append(f"  lasso to {r.name}:")
            lines.append(r.lasso.render())
    return "\n".join(lines)


def render_mutants(results: list[MutantResult]) -> str:
    lines = []
    for r in results:
        if r.mutant.origin == "generated":
            continue
        status = "killed" if r.killed else "SURVIVED"
        expect = r.mutant.expect or ""
        how = f" by {expect} in {r.violated[expect]} steps" if r.killed else ""
        lines.append(f"  {r.mutant.name:<34} {status}{how}")
    named = [r for r in results if r.mutant.origin != "generated"]
    lines.append(f"mutants: {sum(r.killed for r in named)}/{len(named)} hand-written and named "
                 f"killed")
    gen = census(results)
    if gen.generated:
        docs = {r.mutant.name: r.mutant.doc for r in results}
        for name in gen.survivors:
            why = REVIEWED_SURVIVORS.get(name)
            lines.append(f"  survived (reviewed) {name}: {why}" if why is not None
                         else f"  SURVIVED {name}: {docs[name]}")
        lines.append(f"generated mutants: {gen.generated} generated, {gen.killed} killed, "
                     f"{gen.equivalent} proved equivalent, {len(gen.survivors)} survivors "
                     f"({sum(n not in REVIEWED_SURVIVORS for n in gen.survivors)} not reviewed)")
    return "\n".join(lines)


def render_scheduler(inputs: tuple[int, list[str]], clusters: list[ClusterResult]) -> str:
    """The scheduler's bounded check: its inputs exhaustively, then the cluster model."""
    checked, faults = inputs
    ok = not faults and all(not c.faults and not c.missed for c in clusters)
    sizes = ", ".join(f"limit {c.limit}: {c.states:,} states, {c.rounds:,} rounds" for c in clusters)
    lines = [f"scheduler (pair_instances, choose_request): "
             f"{'HOLDS' if ok else 'VIOLATED'} (bounded: every input of up to 3 instances / 3 "
             f"candidates ({checked:,} inputs); cluster of 3 instances and 2 requests, one crash and one "
             f"drain per run ({sizes}))"]
    lines += [f"  {f}" for f in faults[:5]]
    for c in clusters:
        lines += [f"  limit {c.limit}: {f}" for f in c.faults[:5]]
        if c.missed:
            lines.append(f"  limit {c.limit}: never reached (vacuity!): {', '.join(c.missed)}")
    return "\n".join(lines)


def _scheduler_ok(inputs: tuple[int, list[str]], clusters: list[ClusterResult]) -> bool:
    return not inputs[1] and all(not c.faults and not c.missed for c in clusters)


def _task(kind: str, name: str, depth: int | None, budget: float, paths: int = 1) -> Any:
    """One variant's safety verdicts and unreachable goals, its liveness results and composition
    obligations (they share its invariant), or the scheduler's bounded check (top level: runs in
    a worker process)."""
    if kind == "scheduler":
        return scheduler_inputs(), [explore_cluster(limit) for limit in LIMITS], check_intent()
    v = VARIANTS[name]
    if kind == "liveness":  # our designs also get the two-link product (a few seconds each) and any stage count
        return check_liveness(v), obligations(v) + ([two_links(v), *stage_obligations(v)] if name in MUST_PROVE else [])
    verdicts = check_variant(v, depth, budget_s=budget, paths=paths)
    return verdicts, unreachable(v) + (absent_abort_paths(v) if name in MUST_PROVE else [])


def _ok(verdicts: list[Verdict], unreachable: list[str], liveness: list[LivenessResult],
        scope: list[Obligation]) -> bool:
    """Everything PROVED ("holds up to depth N" and "holds on N states" are not proofs)."""
    return (not unreachable and all(x.verdict in ("PROVED", "TRIVIAL") for x in verdicts)
            and all(r.verdict == "PROVED" for r in liveness) and all(o.holds for o in scope))


FORMATS = ("table", "json")  # simulate's --format names; a check has no CSV


@click.command(cls=Command)
@click.option("--variant", "variant", default=None,
              help=f"Check one variant ({', '.join(VARIANTS)}); it fails the run unless every "
                   "property is proved.")
@click.option("--depth", type=click.IntRange(min=1, max=60), default=None,
              help=f"BMC depth for properties the proof does not settle [default: {DEFAULT_DEPTH}, or "
                   "the steps of a migration using all of the variant's stages if more: 17 for 3 stages].")
@click.option("--budget", type=click.FloatRange(min=0.0), default=0.0, show_default=True,
              help="Seconds of BMC per variant before giving up deepening (0: none; results then "
                   "depend on the machine's speed).")
@click.option("--mutants", is_flag=True,
              help="Also check every seeded mutant: hand-written, named and generated (fail if a "
                   "hand-written or named one survives, or a generated one nobody reviewed).")
@click.option("--traces", is_flag=True,
              help="Also print each variant's verdicts in full, its counterexample traces and lassos, and "
                   "a legend of the state fields they show.")
@click.option("--paths", type=click.IntRange(min=1, max=20), default=1, show_default=True,
              help="With --traces, counterexamples per violated property: after the shortest, each next "
                   "one is a shortest trace through a set of actions no earlier one used. Each path is one more "
                   "bounded search: 5 takes about 34 s on pd-resume-on-timeout (2 cores), 20 several minutes "
                   "a variant, printed when the variant is done.")
@click.option("--skip-scheduler", is_flag=True,
              help="Leave out the scheduler's bounded check and intent (they do not depend on the variant; "
                   "a run without this flag checks them): quicker when iterating on one variant.")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default=None,
              help="What to print: the summary table (with --traces, the traces before it) or JSON; "
                   "the spelling `simulate --format` uses.  [default: table]")
@click.option("--json", "as_json", is_flag=True, hidden=True, help="The same as --format json (kept for old scripts).")
@click.option("--json-out", type=click.Path(path_type=Path),
              help="Also write the results as JSON (what --format json prints) to this file, whatever is printed: "
                   "the traces for a log and the verdicts for a machine, from one run.")
def check(variant: str | None, depth: int | None, budget: float, mutants: bool, traces: bool, paths: int,
          skip_scheduler: bool, fmt: str | None, as_json: bool, json_out: Path | None) -> int:
    """Prove (unbounded) or refute (shortest trace, or lasso) each safety and liveness property
    of the handshake.

    Without --variant: our designs (`safe`, and `pd`, the prefill->decode hand-off) must prove
    every property; the other variants' findings are listed, not failed on. Exit 1 when a
    variant asked for has a property neither PROVED nor TRIVIAL. Prints a line on stderr as each variant is done
    (and a progress bar on a terminal), then a variant x property summary table.
    """
    if as_json and fmt == "table":
        raise UserError("--json and --format table disagree: give one (--json is --format json)")
    as_json = as_json or fmt == "json"
    if traces and as_json:  # the traces are text: JSON is printed instead, so they would be computed and dropped
        raise UserError("--traces with --format json: the traces are text and JSON is printed instead; for both, "
                        "give --traces and --json-out FILE")
    if not math.isfinite(budget):
        raise UserError(f"--budget must be a finite number of seconds >= 0 (0: no limit), got {budget!r}")
    if paths > 1 and not (traces or as_json or json_out is not None):
        raise UserError(f"--paths {paths}: counterexamples are printed only with --traces (or --format json, --json-out)")
    if json_out is not None:  # before any proof: a bad path is one line, not minutes of work lost
        writable_file(json_out, "--json-out")
    strict = [get_variant(variant)] if variant is not None else [VARIANTS[n] for n in MUST_PROVE]
    shown = strict if variant is not None else list(VARIANTS.values())
    failed = False
    report: dict[str, Any] = {"schema": SCHEMA, "variants": {}}
    text: list[str] = []
    # Variants (and each variant's safety and liveness) are independent. Each task runs in a
    # fresh process forked from a clean server: Z3's models (so the printed traces) depend on
    # the terms already in its context, so a task must never inherit another's, or the caller's.
    # A variant's two tasks go one after the other (the slower, safety: BMC to the depth, first),
    # so each variant is done, and reported on stderr, as early as it can be.
    tasks = [(kind, v.name) for v in shown for kind in ("safety", "liveness")]
    if not skip_scheduler:
        tasks.insert(1, ("scheduler", ""))
    done = _run_tasks(tasks, depth, budget, paths)
    for v in shown:
        verdicts, unreachable = done["safety", v.name]
        liveness, scope = done["liveness", v.name]
        ok = _ok(verdicts, unreachable, liveness, scope)
        if v in strict and not ok:
            failed = True
        report["variants"][v.name] = {
            "strict": v in strict, "ok": ok,
            "properties": [x.to_json() for x in verdicts],
            "liveness": [r.to_json() for r in liveness],
            "scope": [{"obligation": o.name, "verdict": "PROVED" if o.holds else "FAILS",
                       "why": o.why} for o in scope],
            "unreachable": unreachable,
        }
        if traces:
            text.append(render_variant(v.name, verdicts, unreachable, liveness, scope))
    others_failed = False  # the scheduler's and the mutants' checks
    if not skip_scheduler:
        others_failed = _scheduler(done["scheduler", ""], traces, report, text)
    if mutants:
        results = run_all(DEFAULT_DEPTH if depth is None else depth, generated_too=True)
        gen = census(results)
        others_failed = others_failed or not all(r.killed for r in results if r.mutant.origin != "generated") \
            or any(n not in REVIEWED_SURVIVORS for n in gen.survivors)
        report["mutants"] = {
            "results": [{"name": r.mutant.name, "origin": r.mutant.origin,
                         "expect": r.mutant.expect, "killed": r.killed,
                         "equivalent": r.equivalent or None, "violated": dict(r.violated)}
                        for r in results],
            "census": {"generated": gen.generated, "killed": gen.killed,
                       "equivalent": gen.equivalent, "survivors": list(gen.survivors),
                       "unreviewed": [n for n in gen.survivors if n not in REVIEWED_SURVIVORS]},
        }
        sched = scheduler_mutant_kills()
        others_failed = others_failed or not all(sched.values())
        report["mutants"]["scheduler"] = sched
        text.append(render_mutants(results))
        text.append(f"scheduler mutants: {sum(sched.values())}/{len(sched)} killed" + "".join(
            f"\n  SURVIVED {n}" for n, k in sched.items() if not k))
    report["ok"] = not (failed or others_failed)
    if traces:
        text.append(check_summary.state_legend("\n\n".join(text)))
    per_variant = {v.name: (*done["safety", v.name], *done["liveness", v.name]) for v in shown}
    text += [check_summary.table(per_variant), check_summary.legend(),
             check_summary.verdict(per_variant, [v.name for v in strict], failed, others_failed)]
    text = [t for t in text if t]
    click.echo(json.dumps(report, indent=2) if as_json else "\n\n".join(text))
    if json_out is not None:
        write_atomic(json_out, json.dumps(report, indent=2) + "\n")
    return 1 if failed or others_failed else 0


def _scheduler(result: Any, traces: bool, report: dict[str, Any], text: list[str]) -> bool:
    """The scheduler task's results into the report and the text; True if they fail the run."""
    inputs, clusters, intent = result
    report["scheduler"] = {
        "ok": _scheduler_ok(inputs, clusters), "inputs_checked": inputs[0],
        "faults": inputs[1] + [f for c in clusters for f in c.faults],
        "clusters": [{"limit": c.limit, "states": c.states, "rounds": c.rounds,
                      "unreached": list(c.missed)} for c in clusters],
        "intent": [{"property": r.name, "verdict": r.verdict, "how": r.how,
                    "checked": r.checked, "faults": list(r.faults)} for r in intent],
    }
    # --traces prints the scheduler's and the mutants' lines as reports/protocol-findings.md quotes them
    text.append(render_scheduler(inputs, clusters) if traces else check_summary.wrap(render_scheduler(inputs, clusters)))
    text.append(render_intent(intent) if traces else check_summary.wrap(render_intent(intent)))
    return not _scheduler_ok(inputs, clusters) or not all(r.holds for r in intent)


def _run_tasks(tasks: list[tuple[str, str]], depth: int | None, budget: float,
               paths: int = 1) -> dict[tuple[str, str], Any]:
    """Every task's result, in worker processes; a line on stderr as each variant's last task ends,
    and a progress bar while they run when stderr is a terminal."""
    ctx = forkserver_context(["llumverify.models.check", "llumverify.models.liveness", "llumverify.models.scope"])
    done: dict[tuple[str, str], Any] = {}
    start = time.perf_counter()
    with ProcessPoolExecutor(max_workers=2, mp_context=ctx, max_tasks_per_child=1,
                             initializer=worker_start) as pool, \
            tqdm(total=len(tasks), desc="check", unit="task", file=sys.stderr, leave=False,
                 disable=not sys.stderr.isatty()) as bar:
        try:
            futures = {pool.submit(_task, kind, name, depth, budget, paths): (kind, name)
                       for kind, name in tasks}
            for future in as_completed(futures):
                kind, name = futures[future]
                done[kind, name] = future.result()
                bar.update(1)
                if name and ("safety", name) in done and ("liveness", name) in done:
                    line = check_summary.finished_line(name, (*done["safety", name], *done["liveness", name]),
                                                       time.perf_counter() - start)
                    bar.write(line, file=sys.stderr)
        except BaseException:  # Ctrl-C: stop the Z3 queries under way now
            stop_pool(pool)
            raise
    return done
