"""The full mutant census of `safe`, streamed and resumable:
`python benchmarks/mutant_census.py --out reports/mutants/census.csv [--workers 2]`.

The same verdicts as `llumverify check --variant safe --mutants` (models/mutants.run_mutant on
every hand-written, named and generated mutant), but each result is appended to the CSV as it
finishes (one flushed line per mutant), so a run of an hour can be stopped and resumed: mutants
already in the file are skipped. The last line printed is the census (models/mutants.census).
"""

from __future__ import annotations

import argparse
import csv
import multiprocessing
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

COLUMNS = ("mutant", "origin", "verdict", "how", "seconds")


def one(name: str) -> tuple[str, str, str, float]:
    from llumverify.models.check import DEFAULT_DEPTH
    from llumverify.models.mutants import all_mutants, run_mutant
    t0 = time.perf_counter()
    r = run_mutant(all_mutants()[name], DEFAULT_DEPTH)
    verdict = "killed" if r.killed else ("equivalent" if r.equivalent else "SURVIVED")
    how = r.equivalent or "; ".join(f"{p} ({n})" for p, n in r.violated.items())
    return name, verdict, how, time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True, help="CSV to append to (created if absent)")
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    if not args.out.parent.is_dir():
        ap.error(f"--out {args.out}: folder {args.out.parent} does not exist")
    if args.workers < 1:
        ap.error(f"--workers must be >= 1, got {args.workers}")
    if args.out.exists() and not args.out.is_file():
        ap.error(f"--out {args.out}: not a regular file")
    done: dict[str, dict[str, str]] = {}
    if args.out.exists():
        with args.out.open(newline="") as f:
            reader = csv.DictReader(f)
            if tuple(reader.fieldnames or ()) != COLUMNS:
                ap.error(f"--out {args.out}: not a census file to resume (columns {', '.join(COLUMNS)})")
            done = {row["mutant"]: row for row in reader}
    from llumverify.models.mutants import MUTANTS, all_mutants, generated
    everything = all_mutants()
    todo = [n for n in [*MUTANTS, *(m.name for m in generated())] if n not in done]
    print(f"{len(done)} done, {len(todo)} to run", file=sys.stderr, flush=True)
    new = not args.out.exists()
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["llumverify.models.mutants"])
    with args.out.open("a", newline="") as f, \
            ProcessPoolExecutor(max_workers=args.workers, mp_context=ctx) as pool:
        w = csv.writer(f)
        if new:
            w.writerow(COLUMNS)
        for name, verdict, how, secs in pool.map(one, todo, chunksize=1):
            row = (name, everything[name].origin, verdict, how, f"{secs:.1f}")
            w.writerow(row)
            f.flush()
            done[name] = dict(zip(COLUMNS, row))
            print(f"{name:<40} {verdict:<10} {how[:70]}", flush=True)
    rows = [done[n] for n in everything if n in done]
    gen = [r for r in rows if r["origin"] == "generated"]
    named = [r for r in rows if r["origin"] != "generated"]
    print(f"named: {sum(r['verdict'] == 'killed' for r in named)}/{len(named)} killed; generated: "
          f"{len(gen)}, {sum(r['verdict'] == 'killed' for r in gen)} killed, "
          f"{sum(r['verdict'] == 'equivalent' for r in gen)} equivalent, "
          f"{sum(r['verdict'] == 'SURVIVED' for r in gen)} survivors: "
          + ", ".join(r["mutant"] for r in gen if r["verdict"] == "SURVIVED"))
    return 0 if all(r["verdict"] != "SURVIVED" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
