"""The counts reports/pd-goodput.md quotes, from each goodput.json's points.

    python benchmarks/goodput_points.py results/pd-goodput-sharegpt results/pd-goodput-conversation ...

Per deployment and policy: goodput, the first failing rate and the TTFT / TPOT miss rates of its
seeds there; per deployment: at how many (rate, seed) runs that both made llumnix's and
cache-aware's attainment differs from least-loaded's. Not a test: reads JSON only.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main(folders: list[str]) -> None:
    for folder in folders:
        doc = json.loads((Path(folder) / "goodput.json").read_text())
        print(f"== {folder}")
        points: dict[tuple[str, str], dict[tuple[float, int], dict]] = {}
        for res in doc["results"]:
            key = (json.dumps(res["settings"], sort_keys=True), res["policy"])
            points[key] = {(p["rate"], p["seed"]): p for p in res["points"]}
            fail = [p for p in res["points"] if p["rate"] == res["bracket_rps"][1]]
            misses = "".join(f", {m} miss {100 * min(p[f'{m}_miss_rate'] for p in fail):.1f}-"
                             f"{100 * max(p[f'{m}_miss_rate'] for p in fail):.1f} %" for m in ("ttft", "tpot")) if fail else ""
            print(f"{key[0]} {key[1]}: goodput {res['goodput_rps']} req/s, first failing {res['bracket_rps'][1]}{misses}")
        for (deploy, policy), pts in points.items():
            base = points.get((deploy, "least-loaded"))
            if policy != "least-loaded" and base is not None:
                both = set(pts) & set(base)
                differ = sum(pts[x]["attainment"] != base[x]["attainment"] for x in both)
                print(f"{deploy} {policy} vs least-loaded: attainment differs at {differ} of {len(both)} runs")


if __name__ == "__main__":
    if len(sys.argv) < 2 or not all((Path(f) / "goodput.json").is_file() for f in sys.argv[1:]):
        sys.exit("usage: python benchmarks/goodput_points.py RESULTS_DIR... (each holding goodput.json)")
    main(sys.argv[1:])
