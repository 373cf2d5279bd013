"""What a sweep runs and what each run returns: grid points, tasks and task results.

Plain data shared by the sweep's runners (llumverify/study/sweep.py), its checkpoint
(llumverify/study/checkpoint.py), the results writers (llumverify/study/results.py) and goodput searches
(llumverify/study/goodput.py); this module imports none of them.
"""

from __future__ import annotations

from dataclasses import dataclass

from llumverify.settings.config import SimConfig
from llumverify.study.experiment import Value, Workload


@dataclass(frozen=True)
class Point:
    """One grid point of one workload: the swept settings (in grid order) and what they resolve to.

    `index` orders points as the file lists them: workload, then each grid value's position.
    """

    index: tuple[int, ...]
    workload: Workload
    settings: tuple[tuple[str, Value], ...]
    config: SimConfig
    seeds: tuple[int, ...]


@dataclass(frozen=True)
class Task:
    """One simulation: a point under one policy with one seed. `key` sorts results deterministically."""

    key: tuple[int, ...]
    point: Point
    policy: str
    seed: int
    requests: int
    keep_timeseries: bool

    @property
    def label(self) -> str:
        settings = ", ".join(f"{k}={v}" for k, v in self.point.settings)
        return f"{self.point.workload.name} [{settings}] {self.policy} seed {self.seed}"


@dataclass(frozen=True)
class TaskResult:
    """What a run returns to the parent: its summary, optional time series and wall time."""

    task: Task
    summary: dict[str, object]
    timeseries: dict[str, list[float]] | None
    wall_s: float
