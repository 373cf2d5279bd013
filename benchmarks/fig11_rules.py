"""One rule changed over the testbed profile, judged on all 35 Fig. 11 points at once.

    python benchmarks/fig11_rules.py                                          # the profile as it is
    python benchmarks/fig11_rules.py --set migration.shared_copies=false      # one setting changed
    python benchmarks/fig11_rules.py --set engine.spare_block=false --policies least-loaded llumnix
    python benchmarks/fig11_rules.py --sweeps testbed-serving --set migration.shared_copies=false   # 5 other paths

Runs the points of experiments/paper-sample-path.toml (the 25 generated points on the paper's own
requests) and experiments/testbed-traces.toml (ShareGPT and BurstGPT on the artifact's streams of Table 1, 3 seeds),
or of the --sweeps named (e.g. testbed-serving: all 35 points on 5 paths of our own draw order),
exactly as those sweeps do, with the given settings (section.field=value, as in an experiment file;
repeatable) over each point's own, for the given policies (default llumnix: a migration rule does
not touch least-loaded, whose numbers are then read from the sweeps' results.csv). Prints
benchmarks/fig11_compare.py's comparison with Fig. 11 (--per-point: every point's ratios).
benchmarks/preemption_rules.py is the quick look at six points; this is the issue's whole test, so
a rule's effect on the medians and orderings is measured, not guessed: about 1.5 min for llumnix on
2 idle cores (--jobs 2).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

from fig11_compare import mean_rows, means, report
from preemption_rules import setting

from llumverify.errors import UserError
from llumverify.study.experiment import load_experiment, with_settings
from llumverify.study.sweep import run_tasks, tasks

ROOT = Path(__file__).resolve().parents[1]
SWEEPS = ["paper-sample-path", "testbed-traces"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--set", dest="settings", type=setting, action="append", default=[],
                        help="section.field=value over each point's settings (repeatable)")
    parser.add_argument("--policies", nargs="+", choices=("least-loaded", "llumnix"), default=["llumnix"])
    parser.add_argument("--jobs", type=int, default=2, help="local processes (default 2)")
    parser.add_argument("--per-point", action="store_true", help="also every point's ratios")
    parser.add_argument("--sweeps", nargs="+", default=SWEEPS, help=f"experiments/NAME.toml (default {' '.join(SWEEPS)})")
    args = parser.parse_args()
    changed = dict(args.settings)
    todo = []
    try:
        for name in args.sweeps:
            for task in tasks(load_experiment(ROOT / "experiments" / f"{name}.toml")):
                if task.policy in args.policies:
                    config = with_settings(task.point.config, changed)
                    config.validate()
                    todo.append(dataclasses.replace(task, point=dataclasses.replace(task.point, config=config),
                                                    keep_timeseries=False))
        results = run_tasks(todo, jobs=args.jobs, progress=sys.stderr.isatty())
    except (UserError, TypeError, AttributeError) as exc:
        raise SystemExit(f"fig11_rules.py: {exc}") from None
    rows = [{"workload": r.task.point.workload.name, "rate": r.task.point.workload.rate, "policy": r.task.policy,
             **r.summary} for r in results]
    ours = mean_rows(rows)
    stored = [ROOT / "results" / name / "results.csv" for name in args.sweeps]
    for key, value in means([path for path in stored if path.is_file()]).items():
        ours.setdefault(key, value)  # the policies not run: as the sweeps stored them
    print(f"settings over the testbed profile: {', '.join(f'{k}={v}' for k, v in changed.items()) or 'none'}; "
          f"run: {', '.join(args.policies)}")
    report(ours, args.per_point)


if __name__ == "__main__":
    main()
