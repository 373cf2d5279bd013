"""`llumverify check`: prove or refute the migration protocol's safety properties."""

from __future__ import annotations

import json
import math
import multiprocessing
from concurrent.futures import ProcessPoolExecutor

import click

from llumverify.errors import UserError
from llumverify.models.check import (
    DEFAULT_DEPTH, Verdict, check_variant, reachability,
)
from llumverify.models.mutants import MutantResult, run_all
from llumverify.protocol.variants import MUST_PROVE, VARIANTS, get_variant


def _verdict_line(v: Verdict) -> str:
    if v.verdict == "PROVED":
        return f"  {v.prop:<22} PROVED (unbounded)"
    if v.verdict == "HOLDS":
        return f"  {v.prop:<22} HOLDS up to depth {v.depth}"
    return f"  {v.prop:<22} VIOLATED in {v.depth} steps"


def render_variant(name: str, verdicts: list[Verdict], unreachable: list[str]) -> str:
    """What a user reads for one variant: one line per property, then each shortest trace."""
    lines = [f"variant {name}:"] + [_verdict_line(v) for v in verdicts]
    if unreachable:
        lines.append("  unreachable (vacuity!): " + ", ".join(unreachable))
    for v in verdicts:
        if v.trace is not None:
            lines.append(f"  counterexample to {v.prop}:")
            lines.append(v.trace.render())
    return "\n".join(lines)


def render_mutants(results: list[MutantResult]) -> str:
    lines = []
    for r in results:
        status = "killed" if r.killed else "SURVIVED"
        how = f" by {r.mutant.expect} in {r.violated[r.mutant.expect]} steps" if r.killed else ""
        lines.append(f"  {r.mutant.name:<34} {status}{how}")
    killed = sum(r.killed for r in results)
    lines.append(f"mutants: {killed}/{len(results)} killed")
    return "\n".join(lines)


def _variant_results(name: str, depth: int, budget: float) -> tuple[list[Verdict], list[str]]:
    """One variant's verdicts and unreachable goals (top level: runs in a worker process)."""
    v = VARIANTS[name]
    verdicts = check_variant(v, depth, budget_s=budget)
    return verdicts, [g for g, t in reachability(v).items() if t is None]


@click.command()
@click.option("--variant", "variant", default=None,
              help=f"Check one variant ({', '.join(VARIANTS)}); it fails the run if violated.")
@click.option("--depth", type=click.IntRange(min=1, max=60), default=DEFAULT_DEPTH,
              show_default=True, help="BMC depth for properties the proof does not settle.")
@click.option("--budget", type=click.FloatRange(min=0.0), default=0.0, show_default=True,
              help="Seconds of BMC per variant before giving up deepening (0: none; results then "
                   "depend on the machine's speed).")
@click.option("--mutants", is_flag=True, help="Also check every seeded mutant (fail if one survives).")
@click.option("--json", "as_json", is_flag=True, help="Print the results as JSON.")
def check(variant: str | None, depth: int, budget: float, mutants: bool, as_json: bool) -> int:
    """Prove (unbounded) or refute (shortest trace) each safety property of the handshake.

    Without --variant: our designs (`safe`, and `pd`, the prefill->decode hand-off) must pass;
    the other variants' findings are listed, not failed on.
    """
    if not math.isfinite(budget):
        raise UserError(f"--budget must be a finite number of seconds >= 0 (0: no limit), got {budget!r}")
    strict = [get_variant(variant)] if variant else [VARIANTS[n] for n in MUST_PROVE]
    shown = strict if variant else list(VARIANTS.values())
    failed = False
    report: dict[str, object] = {"variants": {}}
    text: list[str] = []
    # Variants are independent. Each runs in a fresh process forked from a clean server: Z3's
    # models (so the printed traces) depend on the terms already in its context, so a variant
    # must never inherit another's, or the caller's.
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["llumverify.models.check"])
    with ProcessPoolExecutor(max_workers=2, mp_context=ctx, max_tasks_per_child=1) as pool:
        results = list(pool.map(_variant_results, [v.name for v in shown],
                                [depth] * len(shown), [budget] * len(shown)))
    for v, (verdicts, unreachable) in zip(shown, results):
        if v in strict and (unreachable or any(x.verdict == "VIOLATED" for x in verdicts)):
            failed = True
        report["variants"][v.name] = {  # type: ignore[index]
            "strict": v in strict, "properties": [x.to_json() for x in verdicts],
            "unreachable": unreachable,
        }
        text.append(render_variant(v.name, verdicts, unreachable))
    if mutants:
        results = run_all(depth)
        failed = failed or not all(r.killed for r in results)
        report["mutants"] = [{"name": r.mutant.name, "expect": r.mutant.expect,
                              "killed": r.killed, "violated": dict(r.violated)} for r in results]
        text.append(render_mutants(results))
    report["ok"] = not failed
    click.echo(json.dumps(report, indent=2) if as_json else "\n\n".join(text))
    return 1 if failed else 0
