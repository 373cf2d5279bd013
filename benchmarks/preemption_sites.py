"""Where llumnix preempts: every preemption of a Fig. 11 point, with the state around it.

    python benchmarks/preemption_sites.py                       # the 7 points whose llumnix loss is 2x too high
    python benchmarks/preemption_sites.py --points L-L:3.0 M-M:7.4 --set migration.shared_copies=false
    python benchmarks/preemption_sites.py --points L-L:3.0 --list    # also one line per preemption

Runs a point of experiments/paper-sample-path.toml (the paper's own requests, testbed profile,
the sweep's own settings; --set changes one over it) under llumnix and records, at each preemption
(sim/instance.py `preempt_until_fits`): the instance's free blocks and reservations for incoming
migrations before it, whether the instance was in a migration then and as which end, whether the
victim had been migrated in (and how long before), whether it was the request the instance was
migrating out (the migration then aborts), the most free blocks any other instance had, and for an
instance not migrating what the last round made of it and how its last migration out ended. Why:
issue #29 asks where our llumnix preempts at light load when the paper's barely does. Not a test;
10-40 s a point on 2 shared cores.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections import Counter
from statistics import median
from pathlib import Path

from preemption_rules import setting

from llumverify.protocol.state import Mig
from llumverify.scheduler.pairing import is_destination, is_source
from llumverify.scheduler.policies import get_policy
from llumverify.sim import cluster as cluster_module
from llumverify.sim import instance as instance_module
from llumverify.sim import migration as migration_module
from llumverify.sim.cluster import Cluster
from llumverify.sim.metrics import summarize
from llumverify.study.experiment import load_experiment, with_settings
from llumverify.study.sweep import tasks, workload_specs

ROOT = Path(__file__).resolve().parents[1]
HIGH_POINTS = ("M-M:7.4", "L-L:2.6", "L-L:2.7", "L-L:3.0", "L-S:10", "L-S:12", "L-S:14")
NS = 1_000_000_000


@dataclasses.dataclass
class Site:
    """One preemption: the instance's state before it and what it hit."""

    t_s: float
    inst: int
    free: int
    reserved: int
    running: int
    waiting: int
    role: str  # "source", "destination" or "none": the instance's end of a migration in flight
    last_round: str  # the instance at the last round: "not a source", "no destination", "partner busy", "paired"
    migration_age_s: float | None  # how long the instance's migration had been running
    last_out: tuple[str, float] | None  # not migrating: how its last migration out ended, and how long before
    inflight: int  # migrations in flight in the cluster
    victims: list[tuple[int, float | None, bool]]  # (request id, s since it was migrated in, was S's migrating request)
    best_other_free: int


class Recorder:
    """Wraps preempt_until_fits, the pairing and the migrations' endings while one cluster runs."""

    def __init__(self) -> None:
        self.cluster: Cluster | None = None
        self.sites: list[Site] = []
        self.arrived_by_migration: dict[int, int] = {}  # request id -> when it last joined a batch by migration
        self.round: dict[int, str] = {}  # instance id -> what the last round made of it
        self.ending: dict[int, str] = {}  # migration id -> its abort cause
        self.last_out: dict[int, tuple[migration_module.Migration, int]] = {}  # instance -> its last migration out, when it ended

    def install(self) -> tuple[object, ...]:
        original_preempt = instance_module.Instance.preempt_until_fits
        original_resumed = migration_module.Migration._resumed
        original_pair = cluster_module.pair_instances
        original_end = migration_module.Migration._end_now
        original_release = migration_module.Migrations.release
        rec = self

        def end_now(m: migration_module.Migration, name: str, cause: str) -> None:
            rec.ending[m.id] = cause
            original_end(m, name, cause)

        def release(owner: migration_module.Migrations, m: migration_module.Migration) -> None:
            rec.last_out[m.src.id] = (m, owner.env.now)
            original_release(owner, m)

        def pair_instances(loads, threshold, busy_first=False):  # type: ignore[no-untyped-def]
            pairs = original_pair(loads, threshold, busy_first)
            sources = sorted((ld for ld in loads if is_source(ld, threshold)), key=lambda ld: (ld.freeness, ld.instance))
            dests = sorted((ld for ld in loads if is_destination(ld, threshold)), key=lambda ld: (-ld.freeness, ld.instance))
            rec.round = {ld.instance: "not a source" for ld in loads}
            for i, src in enumerate(sources):
                if i >= len(dests):
                    rec.round[src.instance] = "no destination"
                elif src.migrating or dests[i].migrating:
                    rec.round[src.instance] = "busy" if src.migrating else "partner busy"
                else:
                    rec.round[src.instance] = "paired"
            return pairs

        def preempt_until_fits(inst: instance_module.Instance, now: int) -> None:
            before = dict(inst.running)
            free, reserved, waiting = inst.free, inst.reserved, len(inst.waiting)
            original_preempt(inst, now)
            gone = [r for rid, r in before.items() if rid not in inst.running]
            if gone:
                rec.record(inst, now, free, reserved, len(before), waiting, gone)

        def resumed(m: migration_module.Migration, committed: bool) -> None:
            if committed and m.paused_ns >= 0 and m.req is not None:
                rec.arrived_by_migration[m.req.id] = m.env.now
            original_resumed(m, committed)

        instance_module.Instance.preempt_until_fits = preempt_until_fits  # type: ignore[method-assign]
        migration_module.Migration._resumed = resumed  # type: ignore[method-assign]
        cluster_module.pair_instances = pair_instances
        migration_module.Migration._end_now = end_now  # type: ignore[method-assign]
        migration_module.Migrations.release = release  # type: ignore[method-assign]
        return original_preempt, original_resumed, original_pair, original_end, original_release

    def record(self, inst: instance_module.Instance, now: int, free: int, reserved: int, running: int,
               waiting: int, gone: list[instance_module.Request]) -> None:
        assert self.cluster is not None
        role, migrating = "none", None
        for m in self.cluster.migrations.live:
            if not m.released and m.src is inst:
                role, migrating = "source", m.req
            elif not m.released and m.dst is inst:
                role = "destination"
        victims = []
        for req in gone:
            since = self.arrived_by_migration.get(req.id)
            victims.append((req.id, None if since is None else (now - since) / NS, req is migrating))
        others = [o.free for o in self.cluster.instances if o is not inst]
        busy = self.cluster.migrations.busy
        age = (now - busy[inst.id]) / NS if inst.id in busy else None
        out = self.last_out.get(inst.id) if role == "none" else None
        last_out = None if out is None else (self.outcome(out[0]), (now - out[1]) / NS)
        self.sites.append(Site(now / NS, inst.id, free, reserved, running, waiting, role,
                               self.round.get(inst.id, "no round yet"), age, last_out, len(busy) // 2, victims,
                               max(others)))


    def outcome(self, m: migration_module.Migration) -> str:
        """How a migration ended: its abort cause, committed, or nothing to move (no request chosen)."""
        if m.id in self.ending:
            return self.ending[m.id]
        if m.state is None:
            return "nothing to move"
        return "committed" if m.state.status == Mig.FINISHED else "unended"


def run_point(point: str, changed: dict[str, object]) -> tuple[dict[str, object], list[Site]]:
    name, rate = point.split(":")
    exp = load_experiment(ROOT / "experiments" / "paper-sample-path.toml")
    matches = [t for t in tasks(exp) if t.policy == "llumnix" and t.point.workload.name == name
               and t.point.workload.rate == float(rate)]
    if not matches:
        raise SystemExit(f"preemption_sites.py: no point {point} in paper-sample-path (e.g. L-L:3.0)")
    task = matches[0]
    cfg = with_settings(task.point.config, changed)
    cfg.validate()
    rec = Recorder()
    originals = rec.install()
    try:
        cluster = Cluster(workload_specs(task), get_policy("llumnix"), cfg)
        rec.cluster = cluster
        cluster.run()
    finally:
        (instance_module.Instance.preempt_until_fits, migration_module.Migration._resumed,  # type: ignore[method-assign]
         cluster_module.pair_instances, migration_module.Migration._end_now,
         migration_module.Migrations.release) = originals
    return summarize(cluster, cfg.slo), rec.sites


def describe(point: str, summary: dict[str, object], sites: list[Site], capacity: int, listing: bool) -> None:
    victims = [v for s in sites for v in s.victims]
    roles = Counter(s.role for s in sites)
    moved_in = sum(1 for _, since, _ in victims if since is not None)
    recent = sum(1 for _, since, _ in victims if since is not None and since < 5.0)
    own = sum(1 for *_, mig in victims if mig)
    room = sum(1 for s in sites if s.best_other_free - s.free >= 100)
    idle = Counter(s.last_round for s in sites if s.role == "none")
    ages = sorted(s.migration_age_s for s in sites if s.role != "none" and s.migration_age_s is not None)
    inflight = sorted(s.inflight for s in sites if s.role != "none")
    outs = Counter("never" if s.last_out is None else s.last_out[0] for s in sites if s.role == "none")
    out_ago = [s.last_out[1] for s in sites if s.role == "none" and s.last_out is not None]
    print(f"{point}: preemption loss {summary['preemption_loss_s']:.4f} s/request, {len(victims)} victims in "
          f"{len(sites)} events; instance was a migration's source {roles['source']}, destination "
          f"{roles['destination']}, neither {roles['none']}; victims migrated in before {moved_in} "
          f"(within 5 s {recent}); victim = the request being migrated out {own}; events with another "
          f"instance >= 100 blocks freer {room}; not migrating, at the last round: {dict(idle)}; migrating: "
          f"age median {median(ages) if ages else float('nan'):.2f} s, migrations in flight median "
          f"{median(inflight) if inflight else float('nan'):g}; not migrating, its last migration out: {dict(outs)}, "
          f"ended a median {median(out_ago) if out_ago else float('nan'):.2f} s before")
    if listing:
        for s in sites:
            vs = " ".join(f"{rid}{'' if since is None else f'(in {since:.1f}s ago)'}{'*' if mig else ''}"
                          for rid, since, mig in s.victims)
            print(f"  t={s.t_s:8.2f} inst {s.inst:2d} free {s.free:3d}/{capacity} reserved {s.reserved:3d} "
                  f"running {s.running:3d} waiting {s.waiting:3d} {s.role:11s} {s.last_round:14s} "
                  f"{'' if s.last_out is None else f'last out {s.last_out[0]} {s.last_out[1]:.1f}s ago '}"
                  f"{'' if s.migration_age_s is None else f'{s.migration_age_s:5.2f}s of {s.inflight}'} best other free "
                  f"{s.best_other_free:3d}  victims {vs}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", nargs="+", default=list(HIGH_POINTS), help="NAME:RATE of paper-sample-path")
    parser.add_argument("--set", dest="settings", type=setting, action="append", default=[],
                        help="section.field=value over the point's settings (repeatable)")
    parser.add_argument("--list", action="store_true", help="one line per preemption")
    args = parser.parse_args()
    changed = dict(args.settings)
    for point in args.points:
        summary, sites = run_point(point, changed)
        capacity = 792
        describe(point, summary, sites, capacity, args.list)


if __name__ == "__main__":
    main()
