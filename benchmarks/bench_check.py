"""Wall times of `llumverify check`: safe alone (target <= 5 s), all variants with mutants
(target <= 30 s). Run: python benchmarks/bench_check.py"""

from __future__ import annotations

import time

from llumverify.models.check import check_variant, unreachable
from llumverify.models.mutants import run_all
from llumverify.protocol.variants import VARIANTS


def timed(label: str, fn) -> float:  # type: ignore[no-untyped-def]
    start = time.perf_counter()
    fn()
    elapsed = time.perf_counter() - start
    print(f"{label:<40} {elapsed:6.2f} s")
    return elapsed


def main() -> None:
    timed("safe: unbounded proof of every property", lambda: check_variant(VARIANTS["safe"]))
    total = 0.0
    for v in VARIANTS.values():
        total += timed(f"{v.name}: verdicts", lambda v=v: check_variant(v))
    total += timed("mutants (all)", lambda: run_all(14))
    print(f"{'all variants + mutants':<40} {total:6.2f} s")
    timed("reachability (all variants)", lambda: [unreachable(v) for v in VARIANTS.values()])


if __name__ == "__main__":
    main()
