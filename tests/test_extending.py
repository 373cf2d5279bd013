"""Adding an engine or a dispatch policy: a class or a function, plus one registration, and no
other file (docs/extending.md). The toy engine and the toy policy below live in this file only."""

from __future__ import annotations

import ast
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from llumverify.requests import RequestSpec
from llumverify.scheduler import policies
from llumverify.scheduler.dispatch import Policy, candidates
from llumverify.scheduler.snapshot import InstanceSnapshot
from llumverify.settings.config import ClusterConfig, EngineConfig, SettingError, SimConfig
from llumverify.sim import engines
from llumverify.sim.cluster import Cluster
from llumverify.sim.instance import Instance
from llumverify.sim.workload import generate

ROOT = Path(__file__).resolve().parents[1]


class ToyEngine(Instance):
    """The vllm-0.2 engine with a batch of at most two requests, counting the steps it schedules."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.max_seqs = 2
        self.scheduled = 0

    def schedule_step(self, now: int) -> None:
        self.scheduled += 1
        super().schedule_step(now)


CHOSEN: list[int] = []


def highest_id(snapshots: Sequence[InstanceSnapshot], request: RequestSpec) -> int:
    """Every request to the live instance with the highest id."""
    chosen = max(s.instance for s in candidates(snapshots))
    CHOSEN.append(chosen)
    return chosen


@pytest.fixture
def toys() -> Iterator[tuple[engines.Engine, Policy]]:
    """The two registrations (undone afterwards, so other tests see the built-ins only)."""
    before = (dict(engines.ENGINES), dict(policies.POLICIES))
    engine = engines.register(engines.Engine("toy", ToyEngine))
    policy = policies.register(Policy("highest-id", highest_id))
    assert (len(engines.ENGINES), len(policies.POLICIES)) == (len(before[0]) + 1, len(before[1]) + 1)
    CHOSEN.clear()
    yield engine, policy
    engines.ENGINES.clear()
    engines.ENGINES.update(before[0])
    policies.POLICIES.clear()
    policies.POLICIES.update(before[1])


def run(generation: str, policy: str) -> Cluster:
    cfg = SimConfig(engine=EngineConfig(generation=generation), cluster=ClusterConfig(num_instances=3))
    engines.validate(cfg)
    cluster = Cluster(generate(60, 20.0, seed=5), policies.get_policy(policy), cfg, keep_records=True)
    cluster.run()
    return cluster


@pytest.mark.spies  # subclasses Instance: on the sources when the build is compiled
def test_a_toy_engine_and_a_toy_policy_need_one_registration_each(toys) -> None:
    cluster = run("toy", "highest-id")
    assert cluster.records is not None and len(cluster.records) == 60
    assert all(r.status == "finished" for r in cluster.records)
    assert len(CHOSEN) == 60 and set(CHOSEN) == {2}  # the toy policy chose every instance
    assert {r.instance for r in cluster.records} == {2}
    assert all(type(inst) is ToyEngine for inst in cluster.instances)
    assert cluster.instances[2].scheduled > 0 and cluster.instances[0].scheduled == 0
    # the toy's batch limit took effect: the same run on the vllm-0.2 engine ends sooner
    assert run("vllm-0.2", "highest-id").makespan_ns < cluster.makespan_ns


def test_an_unknown_engine_is_one_line_naming_the_registered_ones() -> None:
    with pytest.raises(engines.SettingError, match=r"generation must be one of vllm-0\.2, vllm-v1, got 'toy'"):
        engines.validate(SimConfig(engine=EngineConfig(generation="toy")))


def test_registering_a_name_twice_is_refused(toys) -> None:
    with pytest.raises(ValueError, match="registered already"):
        engines.register(engines.Engine("toy", ToyEngine))
    with pytest.raises(ValueError, match="registered already"):
        policies.register(Policy("llumnix", highest_id))


def names_compared(path: Path, names: set[str]) -> list[str]:
    """Where a file compares something with one of `names` (an `if engine == "vllm-v1"` branch)."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Compare):
            for side in (node.left, *node.comparators):
                if isinstance(side, ast.Constant) and side.value in names:
                    out.append(f"{path.relative_to(ROOT)}:{node.lineno} {side.value!r}")
    return out


def test_only_the_registries_know_the_names() -> None:
    """So a new engine or policy touches no other file: nothing branches on a registered name."""
    names = set(engines.ENGINES) | set(policies.POLICIES)
    files = [p for folder in ("llumverify", "sim") for p in (ROOT / folder).rglob("*.py")]
    assert len(files) > 50
    assert [hit for p in files for hit in names_compared(p, names)] == []


def test_engines_override_only_the_documented_hooks() -> None:
    """An engine varies Instance through its public hooks (sim/instance.py), never a private method."""
    for engine in engines.ENGINES.values():
        cls = engine.cls
        assert isinstance(cls, type) and issubclass(cls, Instance)
        private = [name for name in vars(cls) if name.startswith("_") and not name.startswith("__")
                   and callable(getattr(Instance, name, None))] if cls is not Instance else []
        assert private == [], f"{engine.name} overrides private methods of Instance: {private}"
    assert "schedule_step" in vars(engines.ENGINES["vllm-v1"].cls)


def test_an_engine_setting_only_its_engines_run_is_refused_by_the_registry() -> None:
    """engine.spare_block is vLLM 0.2's rule: the registry, not a name test, says who runs it."""
    cfg = SimConfig(engine=EngineConfig(generation="vllm-v1", spare_block=True))
    with pytest.raises(SettingError, match="spare_block.*vllm-0.2.*'vllm-v1'"):
        engines.validate(cfg)
    engines.validate(SimConfig(engine=EngineConfig(generation="vllm-0.2", spare_block=True)))
