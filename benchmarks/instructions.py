"""Instructions one simulation executes, counted by valgrind's callgrind: a speed measure that
does not move with the machine's load (wall times on a shared 2-core host moved 1.45x within a
day for the same code). Not a test: run `python benchmarks/instructions.py [WORKLOAD ...]`
(needs valgrind). Each workload's count is taken net of a run that only imports and generates
the same requests, so it is the simulation's own; compare two commits with it (the same Python,
and the same build: counts before the compiled build, 2026-12-03, are of the sources, which
`LLUMVERIFY_PURE=1` runs).

Workloads: `pd` (vllm-v1, P/D 4:12, 3,000 ShareGPT-like requests at 7.5 req/s, least-loaded),
`ll64` and `llumnix64` (vllm-0.2, 64 instances, 6,000 requests at 30 req/s), and
`scale:N:POLICY:REQUESTS` (N instances at 30/64 req/s each, as benchmarks/bench_scale.py).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

WORKLOADS = {"pd": ("4:12", "vllm-v1", "least-loaded", 16, 3000, 7.5),
             "ll64": ("", "vllm-0.2", "least-loaded", 64, 6000, 30.0),
             "llumnix64": ("", "vllm-0.2", "llumnix", 64, 6000, 30.0)}


def _workload(name: str) -> tuple[str, str, str, int, int, float]:
    if name in WORKLOADS:
        return WORKLOADS[name]
    match = re.fullmatch(r"scale:(\d+):([\w-]+):(\d+)", name)
    if not match:
        raise SystemExit(f"unknown workload {name!r}: one of {', '.join(WORKLOADS)} or scale:N:POLICY:REQUESTS")
    n = int(match[1])
    return "", "vllm-0.2", match[2], n, int(match[3]), 30 / 64 * n


def _child(name: str, simulate_it: bool) -> None:
    from llumverify.settings.config import ClusterConfig, EngineConfig, SimConfig
    from llumverify.sim.run import simulate
    from llumverify.sim.workload import generate
    pd, engine, policy, n, requests, rate = _workload(name)
    specs = generate(requests, rate, seed=0)
    if simulate_it:
        simulate(specs, policy, SimConfig(engine=EngineConfig(generation=engine),
                                          cluster=ClusterConfig(num_instances=n, pd=pd)))


def _count(name: str, simulate_it: bool) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "callgrind.out")
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}  # no compile in the count
        done = subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", sys.executable,
                               __file__, "--child", name] + ([] if simulate_it else ["--imports-only"]),
                              env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if done.returncode:
            last = done.stderr.strip().splitlines()[-1:] or ["no message"]
            raise SystemExit(f"{name}: the run under valgrind failed (exit {done.returncode}): {last[0]}")
        with open(out) as f:
            totals = [line for line in f if line.startswith("totals:") or line.startswith("summary:")]
        return int(totals[-1].split()[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workloads", nargs="*", default=["pd", "ll64"])
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--imports-only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(args.child, not args.imports_only)
        return
    from llumverify.errors import UserError
    from llumverify.scheduler.policies import get_policy
    for name in args.workloads:  # a typo fails before minutes of valgrind
        try:
            get_policy(_workload(name)[2])
        except UserError as exc:
            raise SystemExit(f"{name}: {exc}") from None
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind not found on PATH: this benchmark counts instructions with its callgrind tool")
    for name in args.workloads:
        requests = _workload(name)[4]
        net = _count(name, True) - _count(name, False)
        print(f"{name}: {net:,} instructions in the simulation ({net / requests:,.0f} per request)", flush=True)


if __name__ == "__main__":
    main()
