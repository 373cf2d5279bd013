"""First principles against inference-sim/training's 16 inference-perf runs of vLLM on H100 (February 2026).

    python benchmarks/inference_perf_runs.py TRAINING_DIR [--out DIR]

TRAINING_DIR holds the run folders (inference-sim/training has no licence file: read, cited, not
copied into this repository):

    git -C training archive ed5c1d2 default_args | tar -x -C TRAINING_DIR

Each folder's server (exp-config.yaml), workload (the config inference-perf dumped) and per-stage
client measurements are read by llumverify/validation/inference_perf.py, which says what is and is
not replayed; its requests sample as the checkpoint's generation_config.json says (inference-perf sends no
sampling key: public_serving.GENERATION_DEFAULTS, sim/sampling.py). Every run is simulated open loop on one vllm-v1 instance on the catalog's H100 (first
principles, KV from the catalogs at gpu_memory_utilization 0.9, vLLM's default; async scheduling,
vLLM 0.15's default: --no-async-scheduling is a sensitivity run without it), and the client's
own time (llumverify/validation/client_time.py: the shipped time per request and per prompt token;
docs/engines.md says where they come from) is added to TTFT and E2E. --client-fit prints the time per
request the calibration run's stages fit beside the per-token one (how the shipped one was chosen). One run, 20260217-155451-llama-2-7b-tp1-codegen, is in that calibration file (its
summary aggregates); the others are held out: nothing was fitted on them. Prints, per run and load
stage, simulated / measured mean and P90 of E2E and TTFT and the decode time per token, then the
median APE and how many stages fall within the issue's bars (E2E and decode 10 %, TTFT 20 %);
--out writes results.json and table.md there.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
from tabulate import tabulate

from llumverify.errors import UserError
from llumverify.files.paths import writable_dir, write_atomic
from llumverify.validation.client_time import client_time
from llumverify.validation.inference_perf import read_run, specs
from llumverify.validation.public_serving import CLIENT_MS_GRID, GPU, checkpoint_sampling, simulate_served

CALIBRATION = {"20260217-155451-llama-2-7b-tp1-codegen"}
UTILISATION = 0.9
HEADER = """# First principles against inference-sim/training's inference-perf runs of vLLM on H100 (February 2026)

Each run folder's server (exp-config.yaml), the workload inference-perf dumped as it ran (open loop at a constant
rate per stage, 100 recurring shared-prefix prompts) and its per-stage client metrics (llumverify/validation/
inference_perf.py); one vllm-v1 instance on the catalog's H100, first-principles step costs, async scheduling, KV
from the catalogs at 0.9, plus the shipped client time (7.5 ms a request and 2.25 µs a prompt token). Role "calibration": the one run also in
the sim-to-real calibration file; nothing was fitted on the others (async scheduling was modelled after these runs
showed the TTFT gap it explains, so they are not blind to it). Decode time per token: (E2E - TTFT) / (max_tokens
- 1) of the stage's means. Regenerate: `python benchmarks/inference_perf_runs.py TRAINING_DIR --out
reports/validation/inference-perf-h100` (TRAINING_DIR as that script's docstring extracts it; `--no-async-scheduling`
prints the run without async scheduling).

"""
BARS = {"e2e_mean": 0.10, "e2e_p90": 0.10, "ttft_mean": 0.20, "ttft_p90": 0.20, "decode_ms": 0.10}


def stage_rows(folder: Path, async_scheduling: bool = True) -> list[dict]:
    """One row per load stage of the run in `folder`: measured and simulated (at the client) metrics."""
    run = read_run(folder)
    reqs = specs(run)
    added = 1e3 * client_time().seconds(np.array([s.prompt_tokens for s in reqs], dtype=np.float64))  # ms
    served = simulate_served(run.name, run.model, GPU, run.tp, run.max_num_batched_tokens, UTILISATION, reqs,
                             [s.seconds for s in run.stages], max_num_seqs=run.max_num_seqs,
                             async_scheduling=async_scheduling, sampling=checkpoint_sampling(run.model))
    rows = []
    for k, stage in enumerate(run.stages):
        sent = served.stage == k
        e2e, ttft = served.e2e[sent] + added[sent], served.ttft[sent] + added[sent]
        sim = {"e2e_mean": float(e2e.mean()), "e2e_p90": float(np.percentile(e2e, 90)),
               "ttft_mean": float(ttft.mean()), "ttft_p90": float(np.percentile(ttft, 90))}
        real = {"e2e_mean": stage.e2e_mean, "e2e_p90": stage.e2e_p90, "ttft_mean": stage.ttft_mean,
                "ttft_p90": stage.ttft_p90}
        for side in (sim, real):
            side["decode_ms"] = (side["e2e_mean"] - side["ttft_mean"]) / (run.output - 1)
        rows.append({"run": run.name, "role": "calibration" if run.name in CALIBRATION else "held out",
                     "model": run.model, "tp": run.tp, "stage": k, "rate": stage.rate,
                     "prompt_len": stage.prompt_len, "sim_ms": sim, "real_ms": real,
                     "error": {m: sim[m] / real[m] - 1 for m in BARS}})
    return rows


def client_fit(rows: list[dict]) -> str:
    """The time per request (ms, beside the shipped per-token time) the calibration run's stages ask for:
    the mean TTFT gap, measured against simulated without it; and the 0.5 ms grid point with the least
    mean APE of E2E and TTFT, mean and P90."""
    if not rows:
        return "client fit: no calibration run among the folders"
    fixed = client_time().fixed_s * 1e3
    gap = np.mean([r["real_ms"]["ttft_mean"] - (r["sim_ms"]["ttft_mean"] - fixed) for r in rows])
    keys = ("e2e_mean", "e2e_p90", "ttft_mean", "ttft_p90")
    score = [np.mean([abs((r["sim_ms"][k] - fixed + c) / r["real_ms"][k] - 1) for r in rows for k in keys])
             for c in CLIENT_MS_GRID]
    return f"client fit on the calibration run: mean TTFT gap {gap:.2f} ms; grid best {CLIENT_MS_GRID[int(np.argmin(score))]} ms"


def summary(rows: list[dict]) -> list[list[str]]:
    """Median APE (median signed) and stages within the bar, per role and metric."""
    out = []
    for role in ("held out", "calibration"):
        chosen = [r for r in rows if r["role"] == role]
        if not chosen:
            continue
        cells = []
        for m, bar in BARS.items():
            e = np.array([r["error"][m] for r in chosen])
            cells.append(f"{100 * np.median(np.abs(e)):.1f} % ({100 * np.median(e):+.1f} %), "
                         f"{int((np.abs(e) <= bar).sum())}")
        out.append([role, len(chosen), *cells])
    return out


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("training_dir", type=Path)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--no-async-scheduling", dest="async_scheduling", action="store_false")
    ap.add_argument("--client-fit", action="store_true", help="print the client time the calibration run's stages fit")
    args = ap.parse_args(argv)
    try:
        if args.out and not args.async_scheduling:
            raise UserError(f"--out {args.out}: not with --no-async-scheduling (a sensitivity run is not a report)")
        if args.out:
            writable_dir(args.out, "--out")
        root = args.training_dir / "default_args" if (args.training_dir / "default_args").is_dir() else args.training_dir
        folders = sorted(p for p in root.iterdir() if (p / "exp-config.yaml").is_file()) if root.is_dir() else []
        if not folders:
            raise UserError(f"{args.training_dir}: no run folders (a folder holding exp-config.yaml) found")
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    rows, skipped = [], []
    for folder in folders:
        try:
            rows += stage_rows(folder, args.async_scheduling)
        except UserError as exc:  # a run this replay cannot take: listed, not dropped silently
            skipped.append(f"{folder.name}: {str(exc).replace(str(args.training_dir), 'TRAINING_DIR')}")
    head = ["role", "stages", *(f"{m}: median APE (signed), within bar" for m in BARS)]
    table = tabulate(summary(rows), headers=head, tablefmt="github")
    detail = tabulate([[r["role"], r["run"], r["tp"], r["stage"], r["rate"], f"{r['prompt_len']:.0f}"]
                       + [f"{r['sim_ms'][m]:.1f} / {r['real_ms'][m]:.1f} ({100 * r['error'][m]:+.0f} %)" for m in BARS]
                       for r in rows], headers=["role", "run", "tp", "stage", "req/s", "prompt", *BARS], tablefmt="github")
    if args.client_fit:
        print(client_fit([r for r in rows if r["role"] == "calibration"]))
    left = "Not replayed:\n" + "\n".join(f"- {s}" for s in skipped) if skipped else "Every run replayed."
    print(table, detail, left, sep="\n\n")
    if args.out:
        out = args.out
        out.mkdir(parents=True, exist_ok=True)
        client = client_time()
        write_atomic(out / "results.json", json.dumps({"client_ms": client.fixed_s * 1e3,
                                                       "client_us_per_prompt_token": client.per_token_s * 1e6,
                                                       "rows": rows, "skipped": skipped}, indent=1) + "\n")
        write_atomic(out / "table.md", HEADER + f"{table}\n\nSimulated / measured ms (signed error), at the "
                     f"client:\n\n{detail}\n\n{left}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
