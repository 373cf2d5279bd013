"""First principles against published vLLM v0.15.1 serving runs: calibrate on one file, validate on the other.

    python benchmarks/public_serving.py error_records.csv iter36_error_records.csv [--out DIR]
        [--flops-scale S]

The two files are inference-sim/sim-to-real-accuracy-validation's full-run aggregates (no licence
file: read, cited, not copied into this repository), runs of H100 and the second file's also of
A100-80GB and L40S; no run is in both:

    git -C sim-to-real-accuracy-validation show dcec3fd:results_trainval/error_records.csv > error_records.csv
    git -C sim-to-real-accuracy-validation show b70edb9:results_iter36/error_records.csv > iter36_error_records.csv

(The second is deleted after b70edb9; dcec3fd's results/llmservingsim_error_records_matched.csv holds
300-request subsets, not used: llumverify/validation/public_serving.py says why.)

Each run's workload is regenerated from its published shape and simulated on one vllm-v1 instance
(llumverify/validation/public_serving.py says what is and is not modelled). The client's own time
(per request and per prompt token), added to TTFT and E2E (the harness measures at the client), is the
shipped default (llumverify/validation/client_time.py); the time per request the first file's runs alone
would fit beside it (public_serving.fit_client_ms) is printed, and so is the top-p sort per sequence the first
file's runs fit (public_serving.fit_sort_ns: the shipped sim/efficiency.toml topp_sort_ns is that fit); the second
file's runs are held out. Prints both files' errors at the engine
("engine": no client time) and at the client ("client": the shipped time): median APE of mean and P90 E2E and TTFT and mean ITL, and how many runs fall within the
issue's bars (E2E and ITL 10 %, TTFT 20 %); --out writes results.json and table.md there.
--flops-scale S: a sensitivity run with H100's generation at compute scale S instead of the shipped
one (sim/efficiency.toml flops_scale); nothing is written with it.
"""
from __future__ import annotations

import argparse
import itertools
import json
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
from tabulate import tabulate

from llumverify.errors import UserError
from llumverify.files.paths import writable_dir, write_atomic
from llumverify.sim.catalog import get_gpu
from llumverify.sim.roofline import load_efficiency
from llumverify.validation import public_serving as ps
from llumverify.validation.client_time import ClientTime, client_time
from llumverify.validation.prefill import with_scale

BARS = {"e2e_mean": 0.10, "e2e_p90": 0.10, "ttft_mean": 0.20, "ttft_p90": 0.20, "itl_mean": 0.10}
HEADER = """# First principles against published vLLM v0.15.1 serving runs (H100; A100-80GB and L40S held out)

Measured full-run aggregates: inference-sim/sim-to-real-accuracy-validation (`results_trainval/error_records.csv` at
dcec3fd: calibration, H100; `results_iter36/error_records.csv` at b70edb9: validation, held out, no run in both; column
`actual`; TTFT and ITL measured at the client). Workloads regenerated from their published shapes as inference-perf
sent them: open loop at each stage's rate, 100 recurring shared-prefix prompts (llumverify/validation/public_serving.py
gives the evidence); one vllm-v1 instance on the run's GPU with async scheduling (v0.15.1's default), KV
from the catalogs, first-principles step costs. `itl_mean` is the decode time per generated token, (E2E mean - TTFT
mean) / (output - 1) of the file's own means (each stage's of its own, where the file has them): derived from E2E and
TTFT, not a separate measurement. The files' own ITL divides by the tokens the client counted in the streamed text,
fewer where the text re-tokenises shorter (llumverify/validation/public_serving.py per_token_itl): it is the
`itl (file)` column, the simulated ITL against it. Regenerate:
`python benchmarks/public_serving.py error_records.csv iter36_error_records.csv --out
reports/validation/public-serving` (the two files as that script's docstring extracts them).

"""


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("calibration", type=Path)
    ap.add_argument("validation", type=Path)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--flops-scale", type=float)
    args = ap.parse_args(argv)
    if args.out is not None:
        if args.flops_scale is not None:
            raise UserError(f"--out {args.out}: not with --flops-scale (a sensitivity run is not a report)")
        writable_dir(args.out, "--out")
    if args.flops_scale is not None and not 0 < args.flops_scale <= 2:
        raise UserError(f"--flops-scale must be in (0, 2], got {args.flops_scale}")
    eff = load_efficiency()
    if args.flops_scale is not None:
        eff = with_scale(eff, get_gpu(ps.GPU).arch, args.flops_scale)
    files = {"calibration": args.calibration, "validation": args.validation}
    runs = {role: ps.read_experiments([path]) for role, path in files.items()}
    seen = {e.name for e in runs["calibration"][0]}
    held, skipped = runs["validation"]
    runs["validation"] = ([e for e in held if e.name not in seen],
                          skipped + [f"{e.name}: also in the calibration file" for e in held if e.name in seen])
    if not runs["validation"][0]:
        why = runs["validation"][1]
        raise UserError(f"no validation run left: {len(why)} skipped ({why[0]}{'; ...' if len(why) > 1 else ''})"
                        if why else "no validation run left: the file has none")
    sims = {role: [ps.predict(e, eff) for e in exps] for role, (exps, _) in runs.items()}
    client = client_time()
    fitted = ps.fit_client_ms(runs["calibration"][0], sims["calibration"], client.per_token_s)
    print(f"client time: the shipped {client.fixed_s * 1e3:g} ms + {client.per_token_s * 1e6:g} µs per prompt token "
          f"(the calibration runs alone fit {fitted} ms per request); "
          f"compute scales {dict(eff.flops_scale)}", flush=True)
    sort_ns, sort_scores = ps.fit_sort_ns(runs["calibration"][0], eff, client)
    print(f"top-p sort per sequence at H100 fitted on the calibration runs: {sort_ns / 1e3:g} us (shipped: "
          f"{eff.topp_sort_ns / 1e3:g} us, sim/efficiency.toml topp_sort_ns)", flush=True)
    step, step_scores, stepped_cal = ps.fit_step_ns(runs["calibration"][0], eff, client)
    stepped = {"calibration": stepped_cal,
               "validation": [ps.predict(e, replace(eff, fixed_ns=step)) for e in runs["validation"][0]]}
    print(f"engine time per step fitted on the calibration runs: {step / 1e6:g} ms", flush=True)
    summary, rows = [], []
    views = (("engine", ClientTime(), sims), ("client", client, sims), ("client, fitted step", client, stepped))
    for role, (exps, skipped) in runs.items():
        gpus = sorted({e.gpu for e in exps})
        parts = {role: range(len(exps))} | ({f"{role}, {g}": [i for i, e in enumerate(exps) if e.gpu == g]
                                             for g in gpus} if len(gpus) > 1 else {})
        for (part, idx), (label, view, source) in itertools.product(parts.items(), views):
            errs = ps.errors([exps[i] for i in idx], [source[role][i] for i in idx], view)
            summary.append({"file": files[role].name, "role": part, "view": label, "runs": len(idx),
                            "skipped": skipped, **{m: {"median_ape": float(np.median(np.abs(e))),
                                                        "median_signed": float(np.median(e)),
                                                        "within_bar": int(np.sum(np.abs(e) <= BARS[m]))}
                                                    for m, e in errs.items()}})
        errs, errs_stepped = ps.errors(exps, sims[role], client), ps.errors(exps, stepped[role], client)
        rows += [{"role": role, "run": e.name, "gpu": e.gpu, "workload": e.workload, "tp": e.tp, "sampling": e.sampling,
                  "cpu_offload": e.cpu_offload,
                  "sim_ms": ps.at_client(s, client, ps.prompt_tokens(e)), "real_ms": e.actual, "itl_published_ms": e.itl_published,
                  "error": {m: float(errs[m][i]) for m in ps.METRICS},
                  "error_fitted_step": {m: float(errs_stepped[m][i]) for m in ps.METRICS},
                  "error_itl_published": s["itl_mean"] / e.itl_published - 1}
                 for i, (e, s) in enumerate(zip(exps, sims[role]))]
    stages = [{"run": e.name, "stage": k, "rate": ps.WORKLOADS[e.workload].stages[k][0], "real_ms": real,
               "sim_ms": sim[f"itl_stage{k}"]}
              for role, (exps, _) in runs.items() for e, sim in zip(exps, sims[role]) for k, real in enumerate(e.stage_itl)]
    table = _tables(client, fitted, step, (eff.topp_sort_ns, sort_ns), dict(eff.flops_scale), summary, rows) \
        + _stage_table(stages)
    print(table)
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        doc = {"client_ms": client.fixed_s * 1e3, "client_us_per_prompt_token": client.per_token_s * 1e6,
               "client_ms_fit_on_calibration": fitted, "topp_sort_ns": eff.topp_sort_ns,
               "topp_sort_ns_fit_on_calibration": sort_ns, "topp_sort_ns_scores_on_calibration": sort_scores,
               "step_ns_fit_on_calibration": step,
               "step_ns_scores_on_calibration": step_scores, "flops_scale": dict(eff.flops_scale), "summary": summary, "runs": rows,
               "itl_by_stage": stages}
        write_atomic(args.out / "results.json", json.dumps(doc, indent=1) + "\n")
        write_atomic(args.out / "table.md", HEADER + table + "\n")
    return 0


def _tables(client: ClientTime, fitted: float, step: int, sort: tuple[int, int], scales: dict[str, float],
            summary: list[dict], rows: list[dict]) -> str:
    head = ["runs", "role", "measured at", "n"] + [f"{m}: median APE (signed), within bar" for m in ps.METRICS]
    lines = [[s["file"], s["role"], s["view"], s["runs"]]
             + [f"{100 * s[m]['median_ape']:.1f} % ({100 * s[m]['median_signed']:+.1f} %), {s[m]['within_bar']}"
                for m in ps.METRICS] for s in summary]
    per_run = [[r["role"], r["run"], r["gpu"], r["workload"], r["tp"], r["sampling"]]
               + [f"{r['sim_ms'][m]:.0f} / {r['real_ms'][m]:.0f} ({100 * r['error'][m]:+.0f} %)" for m in ps.METRICS]
               + [f"{r['sim_ms']['itl_mean']:.1f} / {r['itl_published_ms']:.1f} ({100 * r['error_itl_published']:+.0f} %)",
                  f"{100 * r['error_fitted_step']['e2e_mean']:+.0f} %"]
               for r in rows]
    published = [f"{role} {100 * np.median(np.abs(e)):.1f} % ({100 * np.median(e):+.1f} %)" for role in dict.fromkeys(
        r["role"] for r in rows) if (e := np.array([r["error_itl_published"] for r in rows if r["role"] == role])).size]
    return (f"Compute scales {scales} (sim/efficiency.toml). Client time: the shipped {client.fixed_s * 1e3:g} ms per "
            f"request + {client.per_token_s * 1e6:g} µs per prompt token (llumverify/validation/client_time.py), added "
            "to every TTFT and E2E (\"client\"; \"engine\": none); beside that per-token time the calibration runs "
            f"alone would fit {fitted} ms per request. \"client, fitted step\": the engine's own time per step "
            f"fitted on the calibration runs ({step / 1e6:g} ms, Efficiency.fixed_ns; first principles: 0), as "
            "`llumverify calibrate --run` fits it on a user's own run. Sampling: how each checkpoint's "
            "generation_config.json made vLLM sample requests that set none (public_serving.GENERATION_DEFAULTS); "
            f"top-p runs pay the sampler's sort, {sort[0] / 1e3:g} µs a sequence and step at H100 for a 131,072-token "
            f"vocabulary (sim/sampling.py; the calibration runs alone fit {sort[1] / 1e3:g} µs).\n\n"
            + tabulate(lines, head, tablefmt="github")
            + "\n\nITL against the files' own (per client-counted token), median APE (signed): " + ", ".join(published)
            + "\n\nAt the client, simulated / measured ms (signed error):\n\n"
            + tabulate(per_run, ["role", "run", "gpu", "workload", "tp", "sampling", *ps.METRICS, "itl (file)",
                                "e2e_mean, fitted step"], tablefmt="github"))


def _stage_table(stages: list[dict]) -> str:
    """Decode time per generated token per load stage, where a file publishes each stage's E2E and TTFT
    means: how it rises with the rate."""
    if not stages:
        return ""
    lines = [[s["run"], s["stage"], s["rate"], f"{s['real_ms']:.2f}", f"{s['sim_ms']:.2f}"] for s in stages]
    return ("\n\nDecode time per generated token by load stage (ms), from each stage's E2E and TTFT means, runs whose "
            "file publishes every stage's:\n\n"
            + tabulate(lines, ["run", "stage", "requests/s", "measured", "simulated"], tablefmt="github"))


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except UserError as exc:
        sys.exit(f"error: {exc}")
