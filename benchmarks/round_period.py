"""How often the artifact's trigger would run a migration round in our runs, against our period.

    python benchmarks/round_period.py

The artifact runs a round when the count of step reports reaches a multiple of instances x
need_migrate_frequency = 16 x 4 (osdi24ae vllm/engine/llm_engine_manager.py:397-409; every engine
step sends one report, `:273-275`); the simulator runs one every `scheduler.period_steps` reference
decode steps of time (sim/cluster.py `round_period_ns`). This counts the decode steps of llumnix
runs under the testbed profile at six Fig. 11 points on the paper's own requests (T as the
artifact's run.sh) and prints the mean time per 64 of them against the modelled period. Prefill
steps also report; they are not counted here (0.7-3.4 % of the steps at these points), so the
artifact's rounds would come slightly more often still. Not a test: about 10 s a point.
"""

from __future__ import annotations

from llumverify.scheduler.policies import get_policy
from llumverify.sim.cluster import Cluster
from llumverify.sim.named_profiles import profile_config
from llumverify.sim.workload import ARTIFACT_SEED, generate
from llumverify.study.experiment import with_settings

POINTS = (("L-L", 2.8, 3.0), ("L-L", 3.0, 3.0), ("M-M", 7.8, 10.0), ("S-S", 34.0, 3.0), ("S-L", 4.2, 10.0),
          ("L-S", 14.0, 3.0))  # workload, rate, migration threshold T


def main() -> None:
    for wl, rate, threshold in POINTS:
        cfg = with_settings(profile_config("testbed"), {"scheduler.migrate_threshold": threshold})
        cfg.validate()
        cluster = Cluster(generate(10_000, rate, lengths=wl, seed=ARTIFACT_SEED, stream="artifact"),
                          get_policy("llumnix"), cfg)
        cluster.run()
        steps = sum(inst.steps for inst in cluster.instances)
        seconds = cluster.makespan_ns / 1e9
        per_round = cfg.cluster.num_instances * cfg.scheduler.period_steps * seconds / steps
        modelled = cluster.round_period_ns() / 1e9
        print(f"{wl} {rate:g}: {steps:,} decode steps in {seconds:.0f} s; 64 of them every {per_round:.3f} s, "
              f"modelled period {modelled:.3f} s (ratio {per_round / modelled:.2f})", flush=True)


if __name__ == "__main__":
    main()
