"""Our sweep results against the paper's Fig. 11, point by point: how far off, per metric and system.

    python benchmarks/fig11_compare.py results/paper-sample-path/results.csv results/testbed-traces/results.csv
    python benchmarks/fig11_compare.py results/testbed-serving/results.csv --per-point

For every Fig. 11 point in the results (means over seeds; a point in two files is taken from the
first), the ratio ours / paper of P99 and mean TTFT (the paper's prefill latency), mean decode
latency and preemption loss, for least-loaded (the paper's INFaaS++) and llumnix. Per metric and
system it prints the median over points of |ln(ours / paper)| (as the factor exp(...); the
issue's bar is 2x), how many points are within 2x, and the geometric mean of ours / paper per
family; then how often llumnix and least-loaded are ordered as in the paper (strictly lower
P99 / mean TTFT, decode, preemption loss), listing the points where the P99 ordering differs;
--per-point adds every point's ratios. benchmarks/fig11_rules.py reuses `report` for a rule changed.
The testbed profile's four fitted values (sim/catalog/testbed.toml), least-loaded's mean decode
at L-S 10, L-L 3.0, S-S 32 and S-L 4.1, are left out of their row.
A preemption loss of 0 counts as 0.1 ms (below what the figure resolves). Not a test.
"""

from __future__ import annotations

import argparse
import csv
import math
import statistics
from pathlib import Path

# Fig. 11, read from the vector data of the artifact's figure11_paper.pdf (osdi24ae
# artifact/63_serving_performance/plot/figure11_paper.pdf; reports/paper-reproduction.md §3c):
# (workload, rate) -> INFaaS++ and Llumnix values of P99 prefill (s), mean prefill (s), mean decode (ms)
# and preemption loss (s per request).
PAPER: dict[tuple[str, float], dict[str, tuple[float, float]]] = {}
_COLUMNS = {  # metric -> per workload: INFaaS++ values at its five rates, then Llumnix's
    "ttft_p99_s": {
        "sharegpt": ((1.6, 4.5, 14.0, 19.8, 27.8), (1.5, 1.9, 2.5, 4.6, 8.7)),
        "burstgpt": ((21.1, 19.4, 24.1, 23.6, 27.5), (4.1, 5.4, 7.7, 10.5, 17.8)),
        "S-S": ((40.0, 48.6, 65.3, 76.0, 71.7), (28.2, 37.3, 54.0, 65.6, 74.5)),
        "M-M": ((5.6, 30.3, 48.8, 61.8, 240.0), (2.5, 3.9, 4.1, 9.3, 17.9)),
        "L-L": ((2.8, 3.7, 10.6, 39.3, 41.2), (2.5, 2.6, 2.9, 3.1, 2.75)),
        "S-L": ((36.9, 50.3, 49.2, 118.9, 134.0), (17.9, 4.9, 15.1, 25.7, 51.9)),
        "L-S": ((6.1, 5.3, 15.1, 30.9, 205.7), (4.6, 5.3, 6.0, 8.7, 73.9))},
    "ttft_mean_s": {
        "sharegpt": ((0.30, 0.36, 0.52, 0.65, 1.04), (0.23, 0.23, 0.27, 0.35, 0.50)),
        "burstgpt": ((1.43, 1.49, 2.15, 2.40, 4.37), (0.73, 0.82, 0.98, 1.36, 2.62)),
        "S-S": ((1.59, 2.76, 3.25, 4.45, 4.65), (1.29, 1.65, 2.51, 3.83, 4.33)),
        "M-M": ((0.46, 1.32, 1.58, 2.48, 5.90), (0.25, 0.33, 0.34, 0.47, 0.76)),
        "L-L": ((0.63, 0.66, 0.97, 1.33, 1.44), (0.30, 0.30, 0.33, 0.37, 0.34)),
        "S-L": ((1.02, 1.45, 1.68, 3.67, 3.54), (0.66, 0.34, 0.55, 0.88, 1.78)),
        "L-S": ((0.73, 0.74, 1.44, 2.27, 14.88), (0.63, 0.74, 0.85, 1.10, 7.39))},
    "tpot_mean_s": {  # ms
        "sharegpt": ((53.9, 56.1, 56.8, 60.2, 63.9), (53.6, 55.1, 57.1, 60.7, 62.4)),
        "burstgpt": ((51.8, 52.6, 54.3, 55.4, 57.5), (52.1, 52.8, 54.7, 55.6, 57.8)),
        "S-S": ((61.4, 63.7, 65.2, 70.2, 69.7), (62.5, 62.8, 65.2, 68.7, 67.1)),
        "M-M": ((53.3, 56.9, 56.5, 58.7, 61.5), (53.8, 55.1, 54.9, 56.3, 57.8)),
        "L-L": ((48.7, 49.5, 52.3, 52.4, 54.4), (49.8, 49.6, 52.6, 53.5, 52.6)),
        "S-L": ((64.1, 63.7, 71.3, 74.6, 76.5), (64.2, 61.2, 60.1, 64.0, 74.4)),
        "L-S": ((47.6, 51.7, 53.5, 60.2, 66.4), (48.8, 51.7, 54.7, 58.1, 66.6))},
    "preemption_loss_s": {
        "sharegpt": ((0.0871, 0.1757, 0.2193, 0.4898, 1.0613), (0.0017, 0.0020, 0.0108, 0.1129, 0.4373)),
        "burstgpt": ((0.0893, 0.0986, 0.1652, 0.1875, 0.2961), (0.0079, 0.0163, 0.0419, 0.1056, 0.2458)),
        "S-S": ((0.2046, 0.2444, 0.3596, 0.4771, 0.5093), (0.1734, 0.1842, 0.2488, 0.2386, 0.2721)),
        "M-M": ((0.5843, 0.9490, 0.8142, 1.0654, 1.4132), (0.0002, 0.0758, 0.0887, 0.1907, 0.3288)),
        "L-L": ((0.6929, 0.6379, 1.1516, 1.4657, 1.8995), (0.0008, 0.0007, 0.0628, 0.0557, 0.0557)),
        "S-L": ((5.9161, 5.2370, 6.3816, 7.9878, 8.4387), (1.8372, 1.9378, 1.6956, 2.6200, 4.9942)),
        "L-S": ((0.0039, 0.0003, 0.0279, 0.0805, 0.1805), (0.0001, 0.0001, 0.0006, 0.0100, 0.1460))},
}
RATES = {"sharegpt": (7.0, 7.25, 7.5, 7.75, 8.0), "burstgpt": (7.5, 7.75, 8.0, 8.25, 8.5),
         "S-S": (32.0, 33.0, 34.0, 35.0, 36.0), "M-M": (7.4, 7.5, 7.6, 7.7, 7.8), "L-L": (2.6, 2.7, 2.8, 2.9, 3.0),
         "S-L": (4.1, 4.15, 4.2, 4.25, 4.3), "L-S": (10.0, 12.0, 14.0, 16.0, 18.0)}
for _metric, _by_wl in _COLUMNS.items():
    for _wl, (_inf, _llu) in _by_wl.items():
        for _i, _rate in enumerate(RATES[_wl]):
            PAPER.setdefault((_wl, _rate), {})[_metric] = (_inf[_i], _llu[_i])
# the values the testbed profile is fitted to, left out of their rows: least-loaded's mean decode at four
# points (benchmarks/testbed_fit.py)
FITTED = {("tpot_mean_s", "least-loaded"): {("L-S", 10.0), ("L-L", 3.0), ("S-S", 32.0), ("S-L", 4.1)}}
SYSTEMS = (("least-loaded", 0), ("llumnix", 1))
METRICS = (("P99 prefill", "ttft_p99_s", 1.0), ("mean prefill", "ttft_mean_s", 1.0),
           ("mean decode", "tpot_mean_s", 1000.0), ("preemption loss", "preemption_loss_s", 1.0))
ZERO_LOSS = 1e-4  # s: a preemption loss of 0 counts as this much


def means(paths: list[Path]) -> dict[tuple[str, float, str], dict[str, float]]:
    """Per (workload, rate, policy): the mean over seeds of the compared columns (first file wins)."""
    out: dict[tuple[str, float, str], dict[str, float]] = {}
    for path in paths:
        with path.open(newline="") as f:
            rows = list(csv.DictReader(f))
        for key, value in mean_rows(rows).items():
            out.setdefault(key, value)
    return out


def mean_rows(rows: list[dict[str, object]]) -> dict[tuple[str, float, str], dict[str, float]]:
    """Per (workload, rate, policy) of the rows (results.csv rows or run summaries with those three
    keys): the mean over their seeds of the compared columns."""
    groups: dict[tuple[str, float, str], list[dict[str, object]]] = {}
    for row in rows:
        groups.setdefault((str(row["workload"]), float(row["rate"]), str(row["policy"])), []).append(row)
    return {key: {col: statistics.mean(float(r[col]) for r in rs) for _, col, _ in METRICS}  # type: ignore[arg-type]
            for key, rs in groups.items()}


def ratio(ours: dict[tuple[str, float, str], dict[str, float]], wl: str, rate: float, col: str, scale: float,
          policy: str, i: int) -> float:
    """Ours / paper of one metric at one point for one system (a preemption loss of 0 as ZERO_LOSS)."""
    floor = ZERO_LOSS if col == "preemption_loss_s" else 0.0
    return max(scale * ours[wl, rate, policy][col], floor) / max(PAPER[wl, rate][col][i], floor)


def report(ours: dict[tuple[str, float, str], dict[str, float]], per_point: bool = False) -> None:
    """Print the comparison: per metric and system the median |ln(ours / paper)|, how many points
    are within 2x and the geometric mean per family; the orderings; with per_point, every point's
    ratios."""
    points = [p for p in PAPER if all((*p, pol) in ours for pol, _ in SYSTEMS)]
    if not points:
        raise SystemExit("fig11_compare.py: no Fig. 11 point with both least-loaded and llumnix")
    print(f"{len(points)} Fig. 11 points")
    for label, col, scale in METRICS:
        for policy, i in SYSTEMS:
            ratios: dict[str, list[float]] = {}
            for wl, rate in points:
                if (wl, rate) not in FITTED.get((col, policy), ()):
                    ratios.setdefault(wl, []).append(ratio(ours, wl, rate, col, scale, policy, i))
            flat = [r for rs in ratios.values() for r in rs]
            med = statistics.median(abs(math.log(r)) for r in flat)
            within = sum(0.5 <= r <= 2 for r in flat)
            family = ", ".join(f"{wl} {math.exp(statistics.mean(map(math.log, rs))):.2f}"
                               for wl, rs in sorted(ratios.items()))
            print(f"{label:16s} {policy:12s} {len(flat):2d} points  median |ln| {med:.2f} = {math.exp(med):.2f}x "
                  f"({'<=' if med <= math.log(2) else '> '} 2x)  within 2x {within:2d}  ours/paper: {family}")
    for label, col, scale in METRICS:
        differ = [(wl, rate) for wl, rate in points
                  if (ours[wl, rate, "llumnix"][col] < ours[wl, rate, "least-loaded"][col])
                  != (PAPER[wl, rate][col][1] < PAPER[wl, rate][col][0])]
        agree = len(points) - len(differ)
        print(f"ordering llumnix < least-loaded, {label:16s}: agrees at {agree} of {len(points)} "
              f"({100 * agree / len(points):.0f} %)")
        if col == "ttft_p99_s":  # the bar's ordering: which points disagree, ours and the paper's values
            for wl, rate in differ:
                print(f"  differs at {wl} {rate:g}: ours {ours[wl, rate, 'least-loaded'][col]:.3g} / "
                      f"{ours[wl, rate, 'llumnix'][col]:.3g} s, paper {PAPER[wl, rate][col][0]:g} / "
                      f"{PAPER[wl, rate][col][1]:g} s (least-loaded / llumnix)")
    if per_point:
        print("per point, ours / paper (least-loaded / llumnix; * = outside 2x, f = fitted, left out above):")
        for wl, rate in points:
            cells = []
            for label, col, scale in METRICS:
                shown = []
                for policy, i in SYSTEMS:
                    r = ratio(ours, wl, rate, col, scale, policy, i)
                    fitted = "f" if (wl, rate) in FITTED.get((col, policy), ()) else ""
                    shown.append(f"{r:.2f}{fitted}{'' if 0.5 <= r <= 2 else '*'}")
                cells.append(f"{label} " + " / ".join(shown))
            print(f"  {wl} {rate:g}: " + " | ".join(cells))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", type=Path, nargs="+", help="sweeps' results.csv files")
    parser.add_argument("--per-point", action="store_true", help="also every point's ratios")
    args = parser.parse_args()
    for path in args.results:
        if not path.is_file():
            raise SystemExit(f"fig11_compare.py: {path}: not a file")
    try:
        ours = means(args.results)
    except (KeyError, ValueError, UnicodeDecodeError) as exc:
        raise SystemExit(f"fig11_compare.py: not a sweep's results.csv ({exc})") from None
    report(ours, args.per_point)


if __name__ == "__main__":
    main()
