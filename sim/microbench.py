"""The migration micro-benchmark (the paper's Fig. 10): the stall a request sees when it moves.

Three ways to move a decoding request of L tokens from instance 0 to instance 1 (LLaMA-7B):
- live migration: simulated on a 2-instance cluster through the shared protocol (variant as
  chosen); the stall is its downtime (out of any batch from the final-stage pause to D's batch);
- blocking copy: the same simulation with every block copied in one final stage (the request is
  paused for the whole copy), i.e. the protocol with an unbounded last-stage size;
- recompute: the prefill of the whole sequence on the destination (the cost model).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from llumverify.settings.config import ClusterConfig, MigrationConfig, SimConfig
from llumverify.requests import RequestSpec
from llumverify.scheduler.policies import get_policy
from llumverify.sim.cluster import Cluster
from llumverify.sim.costmodel import CostModel

LENGTHS = (256, 512, 1024, 2048, 4096, 8192)
OUTPUT_TOKENS = 1000  # long enough to keep decoding through any migration
PAPER_MS = {"live": {256: 13.0, 8192: 26.0}, "blocking": {256: 68.0, 8192: 1682.0}, "recompute": {8192: 1995.0}}


def migration_stall_ns(tokens: int, cfg: SimConfig) -> int:
    """Downtime of one request of `tokens` prompt tokens migrated 0 -> 1 right after its prefill."""
    cluster = Cluster([RequestSpec(0, 0.0, tokens, OUTPUT_TOKENS)], get_policy("least-loaded"), cfg, keep_records=True)
    cluster.schedule_migration(cluster.cost.prefill_ns(tokens, tokens * tokens) + 1, 0, 1)
    cluster.run()
    req = cluster.records[0]
    if req.migrations != 1:
        raise RuntimeError(f"{tokens} tokens: the benchmark migration did not commit")
    return req.downtime_ns


def measure(lengths: tuple[int, ...] = LENGTHS, variant: str = "safe", cfg: SimConfig = SimConfig()) -> list[dict[str, float]]:
    """One row per length: live, blocking and recompute stalls in ms."""
    two = replace(cfg, cluster=ClusterConfig(num_instances=2))
    live = replace(two, migration=replace(cfg.migration, variant=variant))
    blocking = replace(two, migration=MigrationConfig(variant="safe", last_stage_blocks=1 << 30))
    cost = CostModel(cfg.cost)
    rows = []
    for n in lengths:
        rows.append({"tokens": n, "live_ms": migration_stall_ns(n, live) / 1e6,
                     "blocking_ms": migration_stall_ns(n, blocking) / 1e6,
                     "recompute_ms": (cost.prefill_ns(n, n * n) - cfg.cost.gap_ns) / 1e6})
    return rows


def plot(rows: list[dict[str, float]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    fig = Figure(figsize=(5, 3.5))
    ax = fig.add_subplot()
    x = [r["tokens"] for r in rows]
    for key, label in (("live_ms", "live migration"), ("blocking_ms", "blocking copy"), ("recompute_ms", "recompute")):
        ax.plot(x, [r[key] for r in rows], marker="o", label=label)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("sequence length (tokens)")
    ax.set_ylabel("stall (ms)")
    ax.set_title("Migration stall, LLaMA-7B (cf. Llumnix Fig. 10)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, format="png", dpi=100, metadata={"Software": None})
