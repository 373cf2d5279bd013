"""Real and replayed TTFT of one InferenceX multi-turn run against its uncached prompt tokens.

    python benchmarks/inferencex_ttft_bins.py INFERENCEX [RUN]

INFERENCEX: as for benchmarks/inferencex_multiturn.py (the same commit and sweep); RUN a folder of the
sweep (default tp1_bs16_offloadoff). The run is replayed exactly as that script replays it, keeping
the simulated TTFT of every request (validate reports only aggregates), and both are printed as mean
TTFT (ms) per bin of uncached prompt tokens (the client CSV's input_num_tokens x (1 - approx_cached_percent
/ 100)) and as the least squares a + b x uncached thousands + c x prompt thousands. A diagnostic: it
shows where a replay's TTFT stops following the run's (session 29: the TP1 replay's prefill hides under
the graphless step's CPU floor).
"""
from __future__ import annotations

import csv
import io
import math
import sys
from pathlib import Path

import inferencex_multiturn as ix
import numpy as np

import llumverify.validation.replay as validation_replay
from llumverify.errors import UserError

BINS = ((0, 50), (50, 200), (200, 500), (500, 1000), (1000, 2000), (2000, 8192))


def diagnose(repo: Path, name: str) -> str:
    run = ix.RUN.fullmatch(name)
    if run is None or run.group(3) == "on":
        raise UserError(f"{name}: not a replayed run of the sweep (tp{{T}}_bs{{B}}_offloadoff: CPU KV offload is not "
                        "modelled)")
    kept: dict[str, dict[str, np.ndarray]] = {}
    replay = validation_replay.replay

    def keep(run: validation_replay.RealRun, step: object) -> dict[str, np.ndarray]:
        kept["sim"], kept["real"] = replay(run, step), run.real  # type: ignore[arg-type]
        return kept["sim"]

    validation_replay.replay = keep
    try:
        ix.replay_run(repo, name, {})
    finally:
        validation_replay.replay = replay
    rows = list(csv.DictReader(io.StringIO(ix.show(repo, f"{name}/metrics_client_metrics.csv"))))
    rows.sort(key=lambda r: float(r["start_time_ms"]))  # the replay's order: sends, then file order
    prompt = np.array([float(r["input_num_tokens"]) for r in rows])
    uncached = prompt * (1 - np.array([float(r["approx_cached_percent"]) for r in rows]) / 100)
    lines = [f"{name}: mean TTFT (ms) by uncached prompt tokens, real / replayed"]
    for lo, hi in BINS:
        sel = (uncached >= lo) & (uncached < hi)
        if sel.any():
            lines.append(f"  {lo}-{hi}: {sel.sum()} requests, {1e3 * kept['real']['ttft'][sel].mean():.1f} / "
                         f"{1e3 * kept['sim']['ttft'][sel].mean():.1f}")
    x = np.c_[np.ones_like(prompt), uncached / 1e3, prompt / 1e3]
    for who in ("real", "sim"):
        a, b, c = np.linalg.lstsq(x, 1e3 * kept[who]["ttft"], rcond=None)[0]
        lines.append(f"  {who}: {a:.1f} + {b:.1f} per thousand uncached + {c:.2f} per thousand prompt tokens")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    if not 1 <= len(argv) <= 2:
        print(__doc__.splitlines()[2].strip(), file=sys.stderr)
        return 2
    try:
        print(diagnose(Path(argv[0]), argv[1] if len(argv) > 1 else "tp1_bs16_offloadoff"))
    except UserError as exc:
        print(f"inferencex_ttft_bins: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
