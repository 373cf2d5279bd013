"""Can the shared real run fit the serving front end's terms (sim/frontend.py)? (issue #28)

    python benchmarks/frontend_gap.py      # reads ../shared/validation (or $LLUMVERIFY_VALIDATION)

requests.jsonl has each request's client wall-clock `arrival_time` and its engine-clock `queued_ts`:
the two clocks differ by an unknown offset, so only the gap above its minimum and its slope over the
prompt length can be read. Prints the gap's percentiles and the slope (least squares and Theil-Sen)
on the calibration third (arrivals in the first third of the window), the validation two thirds and
all. Not a test: under a second.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from llumverify.validation.replay import load_workload


def main() -> None:
    root = Path(os.environ.get("LLUMVERIFY_VALIDATION", "../shared/validation")) / "llmservingsim"
    reqs = [json.loads(x) for x in (root / "runs" / "RTX4090-Llama-3.1-8B" / "requests.jsonl").open()]
    gap = np.array([r["queued_ts"] - r["arrival_time"] for r in reqs])
    prompt = np.array([r["input_toks"] for r in reqs], dtype=float)
    sent = np.array([s.arrival_s for s in load_workload(root / "workloads" / "sharegpt-llama-3.1-8b-300-sps10.jsonl", 16)])
    cal = sent <= sent[0] + (sent[-1] - sent[0]) / 3
    print("gap above its minimum, ms: P10 / P50 / P90 / P99 =",
          " / ".join(f"{v:.1f}" for v in np.percentile((gap - gap.min()) * 1e3, [10, 50, 90, 99])))
    for name, sel in (("calibration third", cal), ("validation two thirds", ~cal), ("all", cal | ~cal)):
        n, g = prompt[sel], gap[sel]
        i, j = np.triu_indices(len(n), 1)
        far = np.abs(n[j] - n[i]) > 50
        theil_sen = np.median((g[j] - g[i])[far] / (n[j] - n[i])[far])
        print(f"{name} ({sel.sum()} requests): slope us per prompt token: least squares "
              f"{np.polyfit(n, g, 1)[0] * 1e6:.2f}, Theil-Sen {theil_sen * 1e6:.2f}")


if __name__ == "__main__":
    main()
