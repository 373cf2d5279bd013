"""Our sweep results against the paper's Fig. 11, point by point: how far off, per metric and family.

    python benchmarks/fig11_compare.py results/paper-sample-path/results.csv
    python benchmarks/fig11_compare.py results/testbed-serving/results.csv

For every Fig. 11 point in the results (means over seeds), the ratio ours / paper of least-loaded's
and llumnix's P99 and mean TTFT (the paper's INFaaS++ and Llumnix prefill latency) and of
least-loaded's mean decode latency. Per metric it prints |err|, the median over points of
max(ours/paper, paper/ours); how many points are within 2x; and the geometric mean of ours / paper
per family. The two decode latencies the testbed profile is fitted to (L-S 10, L-L 3.0;
benchmarks/testbed_fit.py) are left out of the decode row. Not a test.
"""

from __future__ import annotations

import argparse
import csv
import math
import statistics
from pathlib import Path

# Fig. 11 (read from the vector data of the artifact's figure11_paper.pdf; reports/paper-reproduction.md
# §3c): (workload, rate) -> (P99 INFaaS++, P99 Llumnix, mean INFaaS++, mean Llumnix) prefill in s,
# mean decode INFaaS++ in ms
FIG11: dict[tuple[str, float], tuple[float, float, float, float, float]] = {
    ("sharegpt", 7.0): (1.6, 1.5, 0.30, 0.23, 53.9), ("sharegpt", 7.25): (4.5, 1.9, 0.36, 0.23, 56.1),
    ("sharegpt", 7.5): (14.0, 2.5, 0.52, 0.27, 56.8), ("sharegpt", 7.75): (19.8, 4.6, 0.65, 0.35, 60.2),
    ("sharegpt", 8.0): (27.8, 8.7, 1.04, 0.50, 63.9),
    ("burstgpt", 7.5): (21.1, 4.1, 1.43, 0.73, 51.8), ("burstgpt", 7.75): (19.4, 5.4, 1.49, 0.82, 52.6),
    ("burstgpt", 8.0): (24.1, 7.7, 2.15, 0.98, 54.3), ("burstgpt", 8.25): (23.6, 10.5, 2.40, 1.36, 55.4),
    ("burstgpt", 8.5): (27.5, 17.8, 4.37, 2.62, 57.5),
    ("S-S", 32.0): (40.0, 28.2, 1.59, 1.29, 61.4), ("S-S", 33.0): (48.6, 37.3, 2.76, 1.65, 63.7),
    ("S-S", 34.0): (65.3, 54.0, 3.25, 2.51, 65.2), ("S-S", 35.0): (76.0, 65.6, 4.45, 3.83, 70.2),
    ("S-S", 36.0): (71.7, 74.5, 4.65, 4.33, 69.7),
    ("M-M", 7.4): (5.6, 2.5, 0.46, 0.25, 53.3), ("M-M", 7.5): (30.3, 3.9, 1.32, 0.33, 56.9),
    ("M-M", 7.6): (48.8, 4.1, 1.58, 0.34, 56.5), ("M-M", 7.7): (61.8, 9.3, 2.48, 0.47, 58.7),
    ("M-M", 7.8): (240.0, 17.9, 5.90, 0.76, 61.5),
    ("L-L", 2.6): (2.8, 2.5, 0.63, 0.30, 48.7), ("L-L", 2.7): (3.7, 2.6, 0.66, 0.30, 49.5),
    ("L-L", 2.8): (10.6, 2.9, 0.97, 0.33, 52.3), ("L-L", 2.9): (39.3, 3.1, 1.33, 0.37, 52.4),
    ("L-L", 3.0): (41.2, 2.75, 1.44, 0.34, 54.4),
    ("S-L", 4.1): (36.9, 17.9, 1.02, 0.66, 64.1), ("S-L", 4.15): (50.3, 4.9, 1.45, 0.34, 63.7),
    ("S-L", 4.2): (49.2, 15.1, 1.68, 0.55, 71.3), ("S-L", 4.25): (118.9, 25.7, 3.67, 0.88, 74.6),
    ("S-L", 4.3): (134.0, 51.9, 3.54, 1.78, 76.5),
    ("L-S", 10.0): (6.1, 4.6, 0.73, 0.63, 47.6), ("L-S", 12.0): (5.3, 5.3, 0.74, 0.74, 51.7),
    ("L-S", 14.0): (15.1, 6.0, 1.44, 0.85, 53.5), ("L-S", 16.0): (30.9, 8.7, 2.27, 1.10, 60.2),
    ("L-S", 18.0): (205.7, 73.9, 14.88, 7.39, 66.4),
}
FITTED_DECODE = {("L-S", 10.0), ("L-L", 3.0)}  # the testbed profile's two fitted points
# (label, results column, policy, index into FIG11's tuple, scale to the paper's unit)
METRICS = (("P99 TTFT, least-loaded", "ttft_p99_s", "least-loaded", 0, 1.0),
           ("P99 TTFT, llumnix", "ttft_p99_s", "llumnix", 1, 1.0),
           ("mean TTFT, least-loaded", "ttft_mean_s", "least-loaded", 2, 1.0),
           ("mean TTFT, llumnix", "ttft_mean_s", "llumnix", 3, 1.0),
           ("mean decode, least-loaded", "tpot_mean_s", "least-loaded", 4, 1000.0))


def means(path: Path) -> dict[tuple[str, float, str], dict[str, float]]:
    """Per (workload, rate, policy): the mean over seeds of every numeric column."""
    groups: dict[tuple[str, float, str], list[dict[str, str]]] = {}
    with path.open(newline="") as f:
        for row in csv.DictReader(f):
            groups.setdefault((row["workload"], float(row["rate"]), row["policy"]), []).append(row)
    return {key: {col: statistics.mean(float(r[col]) for r in rows) for col in ("ttft_p99_s", "ttft_mean_s", "tpot_mean_s")}
            for key, rows in groups.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", type=Path, help="a sweep's results.csv")
    args = parser.parse_args()
    if not args.results.is_file():
        raise SystemExit(f"fig11_compare.py: {args.results}: not a file")
    try:
        ours = means(args.results)
    except (KeyError, ValueError, UnicodeDecodeError) as exc:
        raise SystemExit(f"fig11_compare.py: {args.results}: not a sweep's results.csv ({exc})") from None
    for label, col, policy, i, scale in METRICS:
        ratios: dict[str, list[float]] = {}
        for (wl, rate), paper in FIG11.items():
            if (wl, rate, policy) in ours and not (col == "tpot_mean_s" and (wl, rate) in FITTED_DECODE):
                ratios.setdefault(wl, []).append(scale * ours[wl, rate, policy][col] / paper[i])
        flat = [r for rs in ratios.values() for r in rs]
        if not flat:
            raise SystemExit(f"fig11_compare.py: {args.results}: no Fig. 11 point (workload, rate, policy)")
        err = math.exp(statistics.median(abs(math.log(r)) for r in flat))
        within = sum(0.5 <= r <= 2 for r in flat)
        family = ", ".join(f"{wl} {math.exp(statistics.mean(map(math.log, rs))):.2f}" for wl, rs in sorted(ratios.items()))
        print(f"{label:26s} {len(flat):2d} points  |err| {err:.2f}x  within 2x {within:2d}  ours/paper: {family}")


if __name__ == "__main__":
    main()
