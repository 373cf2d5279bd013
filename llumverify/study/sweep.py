"""Grid expansion and the runners: every point × policy × seed of an experiment, in parallel.

A run is a pure function of its `Task` (seeded workload, config, policy; llumverify/study/tasks.py), so
results do not depend on the runner or on --jobs: they are sorted by task key before anything is
written.
Local runs use a process pool; `runner="ray"` sends each task to a Ray cluster (optional extra).
`run_experiment` saves every finished run as it comes (llumverify/study/checkpoint.py), so an
interrupted sweep resumes where it stopped.
"""

from __future__ import annotations

import itertools
import math
import os
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from types import ModuleType

from tqdm import tqdm

from llumverify.study.checkpoint import Checkpoint
from llumverify.errors import UserError, internal_error
from llumverify.files.interrupt import stop_pool, worker_start
from llumverify.study.experiment import Experiment, apply_settings, load_experiment
from llumverify.requests import RequestSpec
from llumverify.settings import metrics_registry as registry
from llumverify.study.results import write_results
from llumverify.sim.run import check_memory, simulate
from llumverify.sim.traces import read_trace
from llumverify.sim.workload import generate
from llumverify.study.tasks import Point, Task, TaskResult

RUNNERS = ("local", "ray")  # where a sweep's runs execute (--runner; not the engine generation)
MAX_JOBS_PER_CPU = 4  # runs are CPU-bound: more processes than this only cost memory
MAX_RUNS = 1_000_000  # runs in one experiment: a week of 1 s runs on 2 cores


class SweepFailed(Exception):
    """A run raised; the message names the point. `audit` is set when a simulator audit failed."""

    def __init__(self, message: str, audit: bool) -> None:
        super().__init__(message)
        self.audit = audit


def expand(exp: Experiment) -> list[Point]:
    """Every grid point: per workload, the product of its own grid and the top-level grid."""
    check_size(exp)
    points = []
    for wi, workload in enumerate(exp.workloads):
        grid = (*workload.grid, *exp.grid)
        names = [name for name, _ in grid]
        for combo in itertools.product(*(range(len(values)) for _, values in grid)):
            settings = tuple((name, grid[i][1][j]) for i, (name, j) in enumerate(zip(names, combo)))
            wl, cfg = apply_settings(exp.path, workload, exp.config, dict(settings))
            points.append(Point((wi, *combo), wl, settings, cfg, workload.seeds or exp.seeds))
    return points


def check_size(exp: Experiment) -> None:
    """UserError, before anything is expanded, for an experiment of more than MAX_RUNS runs (three
    grids of 1,000 values are 1e9 points: expanding them alone would take minutes and gigabytes)."""
    runs = 0
    for workload in exp.workloads:
        points = math.prod(len(values) for _, values in (*workload.grid, *exp.grid))
        runs += points * len(workload.seeds or exp.seeds) * len(exp.policies)
    if runs > MAX_RUNS:
        raise UserError(f"{exp.path}: its grid, seeds and policies make {runs:,} runs, over the {MAX_RUNS:,} "
                        "an experiment may hold; split it into several files")


def tasks(exp: Experiment) -> list[Task]:
    """Points × policies × seeds, in key order, each marked whether to keep its time series.

    "last-point" keeps the first seed of each workload's last grid point: what the report plots.
    """
    points = expand(exp)
    last = {p.index[0]: p.index for p in points}  # each workload's last grid point
    out = []
    for point in points:
        for pi, policy in enumerate(exp.policies):
            for si, seed in enumerate(point.seeds):
                keep = exp.timeseries == "all" or (si == 0 and (
                    exp.timeseries == "first-seed"
                    or (exp.timeseries == "last-point" and last[point.index[0]] == point.index)))
                requests = point.workload.requests or exp.requests
                out.append(Task((*point.index, pi, si), point, policy, seed, requests, keep))
    return out


def workload_specs(task: Task) -> Sequence[RequestSpec]:
    """The task's requests: generated from its seed, or read from its trace (first `requests` rows)."""
    w = task.point.workload
    if w.trace_path is not None:
        limit = w.requests  # a trace is replayed whole unless the workload (or grid) limits it
        return read_trace(w.trace_path, limit=limit, rate_scale=w.rate_scale, seed=task.seed, rate=w.rate,
                          arrival=w.arrival, cv=w.cv, spread=w.spread)
    assert w.lengths is not None and w.rate is not None
    return generate(task.requests, w.rate, lengths=w.lengths, arrival=w.arrival, cv=w.cv, seed=task.seed,
                    high_priority_frac=w.high_priority_frac, stream=w.stream)


def checked_specs(task: Task, asked: str = "") -> Sequence[RequestSpec]:
    """workload_specs, refusing a trace that holds fewer requests than the workload asks for: the run would have
    fewer requests than it says. asked: who asked and what to do instead (default: requests, --requests)."""
    specs, w = workload_specs(task), task.point.workload
    if w.trace_path is not None and w.requests is not None and len(specs) < w.requests:
        asked = asked or (f"asked (requests, --requests): ask for at most {len(specs):,}, or leave requests out to "
                          "replay it whole")
        raise UserError(f"{w.trace_path}: holds {len(specs):,} requests, fewer than the {w.requests:,} {asked}")
    return specs


def preflight(path: Path, todo: Sequence[Task]) -> None:
    """Build every grid point's requests once (its first task's seed) before any run.

    Why: a trace that is binary or whose arrivals overflow the simulator, a rate too low for its
    requests, hardware the catalogs do not know (a model's config.json that cannot be read), or a
    point too large for the machine's memory, should fail the sweep in its first seconds with a
    one-line error, not after its first runs.
    """
    from llumverify.sim.engine_profile import resolve

    seen: set[tuple[int, ...]] = set()
    for task in todo:
        if task.point.index not in seen:
            seen.add(task.point.index)
            try:
                resolve(task.point.config)
                specs = checked_specs(task)
                check_memory(len(specs), None, task.point.config, specs[-1].arrival_s if specs else 0.0)
            except UserError as exc:
                raise UserError(f"{path}: workload {task.point.workload.name!r} "
                                f"[{', '.join(f'{k}={v}' for k, v in task.point.settings)}]: {exc}") from None


def run_task(task: Task) -> TaskResult:
    """Simulate one task (runs in a worker process or a Ray task)."""
    start = time.perf_counter()
    result = simulate(workload_specs(task), task.policy, task.point.config)
    series = getattr(result, "timeseries", None) if task.keep_timeseries else None
    kept = {k: list(v) for k, v in series.items()} if series else None  # plain lists for JSON
    return TaskResult(task, result.summary, kept, time.perf_counter() - start)


def check_runner(jobs: int | None, runner: str, ray_address: str | None = None) -> int:
    """The number of local processes; UserError for a bad --jobs or --runner, a --ray-address the
    runner would ignore, or --runner ray without Ray (checked before any run or output folder)."""
    if runner not in RUNNERS:
        raise UserError(f"--runner: unknown runner {runner!r} (choose from {', '.join(RUNNERS)})")
    if ray_address is not None and runner != "ray":
        raise UserError("--ray-address needs --runner ray (the local runner does not use it)")
    if runner == "ray":
        _import_ray()
    if jobs is None:
        jobs = os.cpu_count() or 1
    if jobs < 1:
        raise UserError(f"--jobs must be a positive integer, got {jobs}")
    most = MAX_JOBS_PER_CPU * (os.cpu_count() or 1)
    if jobs > most:
        raise UserError(f"--jobs {jobs}: at most {most} processes on this machine ({MAX_JOBS_PER_CPU} per CPU; "
                        "more only add memory and start-up time)")
    return jobs


def run_tasks(todo: Sequence[Task], jobs: int | None = None, runner: str = "local", ray_address: str | None = None,
              progress: bool = True, on_result: Callable[[TaskResult], None] | None = None) -> list[TaskResult]:
    """Run every task and return the results sorted by task key (independent of jobs and runner).

    on_result: called with each result as it arrives (in completion order), e.g. to save it.
    """
    jobs = check_runner(jobs, runner, ray_address)
    arriving = _run_ray(todo, ray_address) if runner == "ray" else _run_local(todo, jobs)
    results = []
    with tqdm(total=len(todo), file=sys.stderr, disable=not progress, unit="run", leave=False) as bar:
        for res in arriving:
            if on_result is not None:
                on_result(res)
            results.append(res)
            bar.update()
    return sorted(results, key=lambda r: r.task.key)


def _failed(task: Task, exc: BaseException) -> SweepFailed:
    """An audit failure names the audit; anything else is a bug: one line and its traceback's file."""
    from llumverify.sim.audit import AuditError

    if isinstance(exc, AuditError):
        return SweepFailed(f"{task.label}: {exc}", audit=True)
    return SweepFailed(f"{task.label}: {internal_error(exc)}", audit=False)


def _run_local(todo: Sequence[Task], jobs: int) -> Iterator[TaskResult]:
    jobs = min(jobs, len(todo))  # a pool starts all its processes at once
    if jobs <= 1:
        for task in todo:
            yield _guarded(task, lambda: run_task(task))
        return
    with ProcessPoolExecutor(max_workers=jobs, initializer=worker_start) as pool:
        futures = {pool.submit(run_task, task): task for task in todo}
        try:
            for fut in as_completed(futures):
                yield _guarded(futures[fut], fut.result)
        except BaseException:  # a failed run, Ctrl-C, or the consumer gave up: stop the runs under way now
            stop_pool(pool)
            raise


def _guarded(task: Task, get: Callable[[], TaskResult]) -> TaskResult:
    """get() the task's result; any failure names the task (a UserError stays a UserError)."""
    try:
        return get()
    except SweepFailed:
        raise
    except UserError as exc:
        raise UserError(f"{task.label}: {exc}") from None
    except Exception as exc:  # noqa: BLE001 - any failure of a run is reported with its point
        raise _failed(task, exc) from exc


def _import_ray() -> ModuleType:
    """Ray, an optional extra; UserError saying how to install it."""
    try:
        import ray
    except ImportError:
        raise UserError("--runner ray needs Ray: pip install 'llumverify[ray]'") from None
    return ray


def _run_ray(todo: Sequence[Task], address: str | None) -> Iterator[TaskResult]:
    """One Ray task per run on ray.init(address) (a fresh local instance when address is None)."""
    ray = _import_ray()
    started = not ray.is_initialized()
    if started:
        ray.init(address=address, include_dashboard=False, log_to_driver=False)
    try:
        remote = ray.remote(run_task)
        pending = {remote.remote(task): task for task in todo}
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1)
            ref = done[0]
            task = pending.pop(ref)
            yield _guarded(task, lambda: _ray_get(ray, ref))
    finally:
        if started:
            ray.shutdown()


def _ray_get(ray: object, ref: object) -> TaskResult:
    """ray.get, unwrapping Ray's task error into the run's own exception."""
    try:
        return ray.get(ref)  # type: ignore[attr-defined]
    except ray.exceptions.RayTaskError as exc:  # type: ignore[attr-defined]
        raise getattr(exc, "cause", None) or exc from None


def run_experiment(path: str | Path, out: str | Path | None = None, *, jobs: int | None = None,
                   runner: str = "local", ray_address: str | None = None, progress: bool = True,
                   force: bool = False) -> Path:
    """Run the experiment file at `path` and write results.csv, results.json and timing.json.

    out: the results folder (default results/<experiment name>, relative to the working directory):
    new or empty, or holding a partial sweep of this same experiment, which is resumed (only the
    missing runs run); force: start over whatever it holds. Every finished run is saved as it
    comes, so an interrupted sweep loses only the runs under way. Returns the folder written.
    Raises UserError on bad input (before any run) and SweepFailed when a run fails.
    """
    exp = load_experiment(path)
    out = Path(out) if out is not None else Path("results") / exp.name
    todo = tasks(exp)
    check_runner(jobs, runner, ray_address)
    store = Checkpoint.open(out, exp, len(todo), force, check_summary=registry.check_summary)
    preflight(exp.path, todo)
    done = store.done(todo) if store.resume else set()  # a damaged saved run: refused before the folder is touched
    with store:
        if done and progress:
            print(f"resuming {out}: {len(done)} of {len(todo)} runs already done", file=sys.stderr)
        start = time.perf_counter()
        run_tasks([t for t in todo if t.key not in done], jobs=jobs, runner=runner, ray_address=ray_address,
                  progress=progress, on_result=store.save)
        write_results(out, exp, store.load(todo), total_wall_s=time.perf_counter() - start)
    return out
