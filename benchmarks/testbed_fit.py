"""The testbed profile's four fitted numbers, each to one Fig. 11 decode latency on the paper's own requests.

    python benchmarks/testbed_fit.py                              # the default grids
    python benchmarks/testbed_fit.py --per-token 1300 1350 1400   # chosen costs per KV token, in ns
    python benchmarks/testbed_fit.py --joint --out 200 225 --cpu 350000 --per-token 1200 1250 --fixed 31.0

A decode step of B sequences over C KV tokens, O of them output tokens, takes fixed + per_token x C
+ (0.25 ms + cpu) x B + out x O (+ the gap): 0.25 ms a sequence is the GPU's (bounded by the
published 2.6x batch-composition spread), `cpu` the engine's own CPU time per sequence between two
steps (vLLM 0.2's scheduler, sampler post-processing, output), `out` its CPU time per output token
a sequence holds (the fork's detokenize_incrementally re-joins every output token of every sequence
each step, vllm/transformers_utils/tokenizer.py:70-117, called at vllm/engine/llm_engine.py:475-486;
RequestOutput.from_seq_group copies its output ids and text each step, vllm/outputs.py:81-113). All
four are fitted on the paper's own sample path (`stream = "artifact"`, seed 0xCADE: the very
requests behind Fig. 11), 16 instances, 10,000 requests, under the rest of the testbed profile (792
blocks, per-step load reports), least-loaded (the paper's INFaaS++), one pass, each to ONE point:
  0. the CPU time per output token (the other three as the profile has them) whose mean decode
     latency at S-L 4.1 req/s is nearest the paper's 64.1 ms + 0.5 ms (short prompts, long outputs:
     the most output tokens per batch, at the lowest S-L rate);
  1. the CPU time per sequence (fixed and per-token cost as the profile has them) whose mean decode
     latency at S-S 32 req/s is nearest the paper's 61.4 ms + 0.5 ms (the most sequences per batch:
     short prompts and outputs, the lowest S-S rate);
  2. for each candidate cost per KV token, the fixed cost (on a 0.25 ms grid) whose mean decode
     latency at L-S 10 req/s is nearest the paper's 47.6 ms + 0.5 ms (light load, short outputs:
     the fixed part dominates);
  3. the cost per KV token whose mean decode latency at L-L 3.0 req/s is nearest the paper's
     54.4 ms + 0.5 ms (the longest prompts and outputs at their highest published rate).
The one pass does not settle: each mean decode latency moves by 1-3 ms with any change of the
path's batches, so a second and third pass move the constants by a grid step either way. `--joint`
runs every combination of the given grids at all four points instead and keeps the one whose
largest miss is least (the profile's values: reports/paper-reproduction.md §3h).
The 0.5 ms is the mean that the artifact's whole-millisecond truncation of every token gap removes
(`vllm/entrypoints/api_server.py:123`). Every TTFT, P99 and preemption loss of Fig. 11, and the
other 21 decode latencies, are left for validation; S-L 4.1 and S-S 32 under the final constants
are printed as a check of the one pass. Not a test: about 2-5 s a run, two runs at a time.
"""

from __future__ import annotations

import argparse
import math
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace

from llumverify.settings.config import CostConfig
from llumverify.errors import UserError
from llumverify.sim.named_profiles import profile_config
from llumverify.sim.run import simulate
from llumverify.sim.workload import ARTIFACT_SEED, generate

# Fig. 11, INFaaS++ mean decode, + 0.5 ms for the artifact's truncation
TARGET_MS = {"S-L": (4.1, 64.1 + 0.5), "S-S": (32.0, 61.4 + 0.5), "L-S": (10.0, 47.6 + 0.5),
             "L-L": (3.0, 54.4 + 0.5)}


def decode_ms(lengths: str, fixed_ns: int, per_token_ns: int, cpu_ns: int, out_ns: int) -> float:
    """Least-loaded's mean decode latency (ms) at the target point of `lengths` on the paper's path."""
    base = profile_config("testbed")
    cfg = replace(base, cost=replace(base.cost, decode_ns=fixed_ns, decode_ns_per_token=per_token_ns,
                                     cpu_ns_per_seq=cpu_ns, cpu_ns_per_output_token=out_ns))
    rate = TARGET_MS[lengths][0]
    specs = generate(10_000, rate, lengths=lengths, seed=ARTIFACT_SEED, stream="artifact")
    return 1000 * simulate(specs, "least-loaded", cfg).summary["tpot_mean_s"]


def _check(grid: list[tuple[int, int, int, int]]) -> None:
    for fixed_ns, per_token, cpu, out in grid:  # every candidate checked before any run
        try:
            CostConfig(decode_ns=fixed_ns, decode_ns_per_token=per_token, cpu_ns_per_seq=cpu,
                       cpu_ns_per_output_token=out).validate()
        except UserError as exc:
            raise SystemExit(f"testbed_fit.py: {exc}") from None


def _joint(grid: list[tuple[int, int, int, int]]) -> None:
    points = list(TARGET_MS)
    runs = [(wl, *combo) for combo in grid for wl in points]
    with ProcessPoolExecutor(2) as pool:
        ms = list(pool.map(decode_ms, *zip(*runs)))
    misses = {}
    for i, (fixed_ns, per_token, cpu, out) in enumerate(grid):
        got = ms[i * len(points):(i + 1) * len(points)]
        misses[i] = max(abs(g - TARGET_MS[wl][1]) for g, wl in zip(got, points))
        print(f"out {out} cpu {cpu} fixed {fixed_ns / 1e6:.2f} ms per token {per_token}: "
              + ", ".join(f"{wl} {g:.2f} (target {TARGET_MS[wl][1]:.1f})" for g, wl in zip(got, points))
              + f"; largest miss {misses[i]:.2f} ms")
    fixed_ns, per_token, cpu, out = grid[min(misses, key=misses.__getitem__)]
    print(f"fit: cpu_ns_per_output_token = {out}, cpu_ns_per_seq = {cpu}, decode_ns = {fixed_ns}, "
          f"decode_ns_per_token = {per_token}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", nargs="+", type=int, default=[100, 150, 200, 250],
                        help="candidate CPU times per output token (ns)")
    parser.add_argument("--cpu", nargs="+", type=int, default=[250_000, 300_000, 350_000],
                        help="candidate CPU times per sequence (ns)")
    parser.add_argument("--per-token", nargs="+", type=int, default=[950, 1050, 1150, 1250],
                        help="candidate costs per KV token (ns)")
    parser.add_argument("--fixed", nargs="+", type=float, default=[31.25, 31.5, 31.75, 32.0, 32.25],
                        help="candidate fixed costs (ms)")
    parser.add_argument("--joint", action="store_true",
                        help="every combination at all four points; keep the least largest miss")
    args = parser.parse_args()
    if not all(math.isfinite(ms) and ms > 0 for ms in args.fixed):
        raise SystemExit(f"testbed_fit.py: --fixed takes finite fixed costs > 0 ms, got {args.fixed}")
    now = profile_config("testbed").cost
    grid = [(round(ms * 1e6), p, c, o) for p in args.per_token for ms in args.fixed for c in args.cpu for o in args.out]
    _check(grid)
    if args.joint:
        _joint(grid)
        return
    with ProcessPoolExecutor(2) as pool:
        m = len(args.out)
        longs = dict(zip(args.out, pool.map(decode_ms, ["S-L"] * m, [now.decode_ns] * m, [now.decode_ns_per_token] * m,
                                            [now.cpu_ns_per_seq] * m, args.out)))
        out = min(args.out, key=lambda o: abs(longs[o] - TARGET_MS["S-L"][1]))
        n = len(args.cpu)
        many = dict(zip(args.cpu, pool.map(decode_ms, ["S-S"] * n, [now.decode_ns] * n,
                                           [now.decode_ns_per_token] * n, args.cpu, [out] * n)))
        cpu = min(args.cpu, key=lambda c: abs(many[c] - TARGET_MS["S-S"][1]))
        pairs = [(round(ms * 1e6), p) for p in args.per_token for ms in args.fixed]
        light = dict(zip(pairs, pool.map(decode_ms, ["L-S"] * len(pairs), *zip(*pairs), [cpu] * len(pairs),
                                         [out] * len(pairs))))
        target = TARGET_MS["L-S"][1]
        fixed = {p: min((f for f, q in pairs if q == p), key=lambda f: abs(light[f, p] - target)) for p in args.per_token}
        heavy = dict(zip(args.per_token, pool.map(decode_ms, ["L-L"] * len(fixed), fixed.values(), fixed.keys(),
                                                  [cpu] * len(fixed), [out] * len(fixed))))
        best = min(args.per_token, key=lambda p: abs(heavy[p] - TARGET_MS["L-L"][1]))
        checks = list(pool.map(decode_ms, ["S-L", "S-S"], [fixed[best]] * 2, [best] * 2, [cpu] * 2, [out] * 2))
    for o in args.out:
        print(f"cpu per output token {o} ns: S-L 4.1 decode {longs[o]:.2f} ms (target {TARGET_MS['S-L'][1]:.1f})")
    for c in args.cpu:
        print(f"cpu per sequence {c} ns: S-S 32 decode {many[c]:.2f} ms (target {TARGET_MS['S-S'][1]:.1f})")
    for p in args.per_token:
        print(f"per token {p} ns: fixed {fixed[p] / 1e6:.2f} ms (L-S 10 decode {light[fixed[p], p]:.2f} ms, "
              f"target {target:.1f}); L-L 3.0 decode {heavy[p]:.2f} ms (target {TARGET_MS['L-L'][1]:.1f})")
    step = (8 + fixed[best] / 1e6 + best * 8192 / 1e6)
    print(f"fit: cpu_ns_per_output_token = {out}, cpu_ns_per_seq = {cpu}, decode_ns = {fixed[best]}, "
          f"decode_ns_per_token = {best} (S-L 4.1 / S-S 32 under these: {checks[0]:.2f} / {checks[1]:.2f} ms; the published 8k-token GPU step, 32 x 256 tokens with 0.25 ms "
          f"a sequence: {step:.2f} ms; published 43-53 ms)")


if __name__ == "__main__":
    main()
