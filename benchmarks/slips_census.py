"""Run `llumverify check`'s verdicts on each of issue #27's slips (models/slips.py) and record
which pass: `python benchmarks/slips_census.py [--out reports/slips-today.csv]`.

A slip passes when every item `check --variant` fails on is absent: every safety property and
`decisive` PROVED, no unreachable goal, every liveness property PROVED and every composition
obligation holding. Whether an unproved safety property is then VIOLATED or HOLDS up to the
depth (BMC, which can take many minutes per slip) does not change `check`'s exit, so it is not
searched: such a property is listed as "not proved". Each slip runs in a fresh process (Z3
contexts do not cross processes); rows are written as slips finish.
"""

from __future__ import annotations

import argparse
import csv
import multiprocessing
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path


def findings(name: str) -> tuple[str, list[str], float]:
    """What `check` reports as not PROVED for one slip: `property (N steps)` items."""
    from llumverify.models.check import decisive_term, implied, proof_of, unreachable
    from llumverify.models.liveness import check_liveness
    from llumverify.models.scope import obligations
    from llumverify.models.slips import SLIPS
    from llumverify.properties.safety import PROPERTIES
    v = next(x[3] for x in SLIPS if x[0] == name)
    t0 = time.perf_counter()
    proof = proof_of(v)
    out = [f"{p} (not proved)" for p in PROPERTIES if p not in proof.proved]
    if not implied(proof, lambda s: decisive_term(s, v)):
        out.append("decisive (not proved)")
    out += [f"unreachable {g}" for g in unreachable(v)]
    out += [f"{r.name} ({r.verdict})" for r in check_liveness(v) if r.verdict != "PROVED"]
    out += [f"scope:{o.name}" for o in obligations(v) if not o.holds]
    return name, out, time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=None, help="CSV to write (slip, expect, caught, findings)")
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    if args.out is not None and not args.out.parent.is_dir():
        ap.error(f"--out {args.out}: folder {args.out.parent} does not exist")
    if args.workers < 1:
        ap.error(f"--workers must be >= 1, got {args.workers}")
    from llumverify.models.slips import SLIPS
    ctx = multiprocessing.get_context("forkserver")
    rows: list[tuple[str, ...]] = []
    with ProcessPoolExecutor(max_workers=args.workers, mp_context=ctx, max_tasks_per_child=1) as pool:
        for (name, expect, _, _), (_, found, secs) in zip(SLIPS, pool.map(findings, [s[0] for s in SLIPS])):
            caught = any(f.startswith(expect + " ") for f in found)
            rows.append((name, expect, "yes" if caught else ("other" if found else "PASSES"),
                         "; ".join(found), f"{secs:.1f}"))
            print(f"{name:<34} expect {expect:<22} {rows[-1][2]:<6} {'; '.join(found)[:90]}", flush=True)
            if args.out is not None:  # as each slip finishes, atomically
                tmp = args.out.with_name(f".{args.out.name}.{os.getpid()}.tmp")
                with tmp.open("w", newline="") as f:
                    w = csv.writer(f)
                    w.writerow(["slip", "expect", "caught", "findings", "seconds"])
                    w.writerows(rows)
                tmp.replace(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
