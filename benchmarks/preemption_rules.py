"""One rule changed at a time, on the paper's own requests: preemption loss and count per policy.

    python benchmarks/preemption_rules.py                                    # the testbed profile as it is
    python benchmarks/preemption_rules.py --set migration.variant=ae         # one setting changed
    python benchmarks/preemption_rules.py --set cost.bandwidth_bps=6778666667 --points S-L M-M --policies llumnix
    python benchmarks/preemption_rules.py --points sharegpt burstgpt --cv 2      # burstier arrivals

Fig. 11's points where the paper's Llumnix loses the most to preemption (S-L 4.2, M-M 7.8, L-L 2.8,
S-S 34; T = 10 for M-M and S-L as the artifact's run.sh), on the artifact's own draws (stream
"artifact", seed 0xCADE), and the two trace families at their highest rate (ShareGPT 8.0, BurstGPT
8.5; our Table-1 length fits, seed 0; experiments/testbed-traces.toml runs the artifact's streams), 16 instances, 10,000
requests, under the testbed profile with the given settings over it (section.field=value, as in
an experiment file; repeatable). Workload candidates: --cv (Gamma arrivals of that coefficient of
variation instead of Poisson), --rate-factor (the rate times a factor). Prints, per point,
the paper's INFaaS++ / Llumnix preemption loss (Fig. 11) and ours with the count of preemptions,
P99 and mean TTFT and mean decode latency. Not a test: 2-8 s a run.
"""

from __future__ import annotations

import argparse
import tomllib

from llumverify.errors import UserError
from llumverify.study.experiment import with_settings
from llumverify.sim.named_profiles import profile_config
from llumverify.sim.run import simulate
from llumverify.sim.workload import ARTIFACT_SEED, generate

# Fig. 11 (the artifact's figure11_paper.pdf; benchmarks/fig11_compare.py): rate, T, paper's
# INFaaS++ and Llumnix preemption loss (s per request)
POINTS = {"S-L": (4.2, 10.0, 6.38, 1.70), "M-M": (7.8, 10.0, 1.41, 0.33), "L-L": (2.8, 3.0, 1.15, 0.063),
          "S-S": (34.0, 3.0, 0.36, 0.25), "sharegpt": (8.0, 3.0, 1.061, 0.437), "burstgpt": (8.5, 3.0, 0.296, 0.246)}
TRACES = {"sharegpt", "burstgpt"}  # the paper sampled them from data we do not have: our length fits, seed 0


def setting(text: str) -> tuple[str, object]:
    """section.field=value -> (key, value): the value as TOML, or a bare word as a string."""
    key, sep, value = text.partition("=")
    if not sep or "." not in key:
        raise argparse.ArgumentTypeError(f"expected section.field=value, got {text!r}")
    try:
        return key, tomllib.loads(f"v = {value}")["v"]
    except tomllib.TOMLDecodeError:
        return key, value  # a bare word: a string setting


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--set", dest="settings", type=setting, action="append", default=[],
                        help="section.field=value over the testbed profile (repeatable)")
    parser.add_argument("--points", nargs="+", choices=list(POINTS), default=list(POINTS))
    parser.add_argument("--policies", nargs="+", default=["least-loaded", "llumnix"])
    parser.add_argument("--cv", type=float, default=None, help="Gamma arrivals of this CV (default: Poisson)")
    parser.add_argument("--rate-factor", type=float, default=1.0, help="every point's rate times this")
    args = parser.parse_args()
    if (args.cv is not None and not args.cv > 0) or not args.rate_factor > 0:
        raise SystemExit(f"preemption_rules.py: --cv and --rate-factor must be > 0, got {args.cv} and {args.rate_factor}")
    arrival = {"arrival": "gamma", "cv": args.cv} if args.cv is not None else {}
    changed = dict(args.settings)
    for wl in args.points:
        rate, threshold, paper_ll, paper_llumnix = POINTS[wl]
        try:
            cfg = with_settings(profile_config("testbed"), {"scheduler.migrate_threshold": threshold, **changed})
            cfg.validate()
        except (UserError, TypeError, AttributeError) as exc:
            raise SystemExit(f"preemption_rules.py: --set: {exc}") from None
        stream = {"seed": 0} if wl in TRACES else {"seed": ARTIFACT_SEED, "stream": "artifact"}
        try:
            specs = generate(10_000, rate * args.rate_factor, lengths=wl, **arrival, **stream)
        except UserError as exc:
            raise SystemExit(f"preemption_rules.py: {wl}: {exc}") from None
        cells = []
        for policy in args.policies:
            s = simulate(specs, policy, cfg).summary
            cells.append(f"{policy} loss {s['preemption_loss_s']:.3f} s ({s['preemptions']} preemptions), P99 TTFT "
                         f"{s['ttft_p99_s']:.2f} s, mean {s['ttft_mean_s']:.2f} s, decode {1000 * s['tpot_mean_s']:.1f} ms")
        print(f"{wl} {rate}: paper {paper_ll} / {paper_llumnix} s | " + " | ".join(cells), flush=True)


if __name__ == "__main__":
    main()
