"""Goodput (DistServe, OSDI'24): the highest request rate whose SLO attainment stays >= a target.

SLO attainment of a run is 1 - `slo_violation_rate` of its summary (sim/metrics.py): the share
of ALL requests that finished with TTFT <= and mean per-token decode time <= their class's
targets (SLOConfig.targets); rejected and failed requests count as misses.

For each deployment (a workload x one combination of its non-rate grid settings) and policy of an
experiment, a search over the arrival rate: bracket (double until attainment < target, halve
until >= target; the grid's `rate` values, else the workload's rate, are the first rates tried),
then bisect (geometric midpoints, 4 significant digits) until the failing rate is within
(1 + tol) of the passing one. A rate passes when the MEAN attainment over the seeds is >= target.
The same search per seed gives per-seed goodputs and their 95 % t interval (results.mean_ci).
With a duration, each run serves rate x duration requests (at least the experiment's count), so
every rate is judged over the same span of arrivals: with a fixed count, a high enough rate turns
the run into one burst that an idle cluster may absorb, and attainment stops falling with rate.
Every search is a pure function of the runs' results, so the output does not depend on --jobs,
and an interrupted search resumes: each run is saved in the output folder as it finishes
(llumverify/study/checkpoint.py), and the same command reads those instead of running them again.
See docs/experiments.md ("Goodput").
"""

from __future__ import annotations

import csv
import dataclasses
import io
import itertools
import math
import os
import sys
import time
import tomllib
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path

from tqdm import tqdm

from llumverify.settings.config import SimConfig
from llumverify.sim.engine_profile import resolve
from llumverify.sim.workload import MAX_REQUESTS
from llumverify.errors import UserError
from llumverify.study.experiment import Experiment, Value, Workload, apply_settings, load_experiment
from llumverify.study.results import dumps, mean_ci
from llumverify.files.paths import write_atomic
from llumverify.files.interrupt import stop_pool, worker_start
from llumverify.study.sweep import SweepFailed, check_runner, check_size, checked_specs, run_task
from llumverify.study.checkpoint import Checkpoint
from llumverify.study.tasks import Point, Task, TaskResult

SCHEMA_VERSION = 2  # 2: points carry their request count (--duration)
DEFAULT_TARGET = 0.9
DEFAULT_TOL = 0.02
MAX_STEPS = 12      # at most 2**12 x above the highest / below the lowest first rate
SIG_DIGITS = 4      # midpoints are rounded to this many significant digits (readable rates)
FILES = ("goodput.json", "goodput.csv", "attainment.png")

# summary values kept for every evaluated run, besides its attainment: point key -> summary key
_POINT_KEYS = (("ttft_miss_rate", "slo_ttft_miss_rate"), ("tpot_miss_rate", "slo_tpot_miss_rate"))


# --- deployments ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Deployment:
    """One workload at one combination of its non-rate grid settings: what a goodput is searched for.

    `start_rates` are the first rates tried (the grid's rates, else the workload's own, else a
    trace's native rate); `gpus` = instances x hardware.tp.
    """

    index: tuple[int, ...]
    workload: Workload
    settings: tuple[tuple[str, Value], ...]
    config: SimConfig
    seeds: tuple[int, ...]
    requests: int
    start_rates: tuple[float, ...]
    instances: int
    tp: int

    @property
    def gpus(self) -> int:
        return self.instances * self.tp

    @property
    def label(self) -> str:
        settings = ", ".join(f"{k}={v}" for k, v in self.settings)
        return f"{self.workload.name} [{settings}]" if settings else self.workload.name


def deployments(exp: Experiment) -> list[Deployment]:
    """Per workload, the product of its own and the top-level grid without `rate`, in file order."""
    check_size(exp)
    out = []
    for wi, workload in enumerate(exp.workloads):
        grid = [(name, values) for name, values in (*workload.grid, *exp.grid)]
        where = f"{exp.path}: workload {workload.name!r}"
        if any(name == "rate_scale" for name, _ in grid):
            raise UserError(f"{where}: goodput searches the rate itself: drop rate_scale from the grid")
        if workload.spread:
            raise UserError(f"{where}: goodput replaces a trace's arrivals by generated ones at each rate, "
                            "so spread does not apply: remove it")
        rates = next((tuple(float(v) for v in values) for name, values in grid if name == "rate"), None)
        grid = [(name, values) for name, values in grid if name != "rate"]
        for combo in itertools.product(*(range(len(values)) for _, values in grid)):
            settings = tuple((name, grid[i][1][j]) for i, (name, j) in enumerate(zip([n for n, _ in grid], combo)))
            wl, cfg = apply_settings(exp.path, workload, exp.config, dict(settings))
            seeds = workload.seeds or exp.seeds
            starts = rates or ((wl.rate,) if wl.rate is not None else (_native_rate(wl, seeds[0], where),))
            # the searched rate is the offered rate itself: a trace's rate_scale would multiply it
            wl = dataclasses.replace(wl, rate=None, rate_scale=1.0)
            instances = cfg.autoscale.max_instances if cfg.autoscale.enabled else cfg.cluster.num_instances
            try:  # hardware the catalogs do not know fails here, before the output folder is claimed
                resolve(cfg)
            except UserError as exc:
                raise UserError(f"{where} [{', '.join(f'{k}={v}' for k, v in settings)}]: {exc}") from None
            out.append(Deployment((wi, *combo), wl, settings, cfg, seeds, wl.requests or exp.requests,
                                  tuple(sorted(set(starts))), instances, cfg.hardware.tp))
    return out


def _native_rate(w: Workload, seed: int, where: str) -> float:
    """A trace's own mean arrival rate (times its rate_scale): where its search starts without a rate."""
    from llumverify.sim.traces import read_trace

    assert w.trace_path is not None
    try:
        specs = read_trace(w.trace_path, limit=w.requests, rate_scale=w.rate_scale, seed=seed)
    except UserError as exc:
        raise UserError(f"{where}: {exc} (or give the workload a rate to start the search from)") from None
    span = specs[-1].arrival_s - specs[0].arrival_s if specs else 0.0
    if len(specs) < 2 or not span > 0:
        raise UserError(f"{where}: cannot tell the trace's own rate: give the workload a rate to start from")
    return (len(specs) - 1) / span


def check_slo_targets(exp: Experiment) -> None:
    """Goodput is defined by its SLO: every workload must have ttft_s and per_token_s set explicitly."""
    try:
        top = tomllib.loads(exp.path.read_text()).get("slo", {})
    except (OSError, tomllib.TOMLDecodeError) as exc:  # load_experiment read it a moment ago
        raise UserError(f"{exp.path}: {exc}") from None
    given = set(top) if isinstance(top, dict) else set()
    for w in exp.workloads:
        keys = given | {k.split(".", 1)[1] for k, _ in (*w.config, *w.grid, *exp.grid) if k.startswith("slo.")}
        missing = [k for k in ("ttft_s", "per_token_s") if k not in keys]
        if missing:
            raise UserError(f"{exp.path}: goodput needs SLO targets: set [slo] ttft_s and per_token_s "
                            f"(workload {w.name!r} lacks {' and '.join(missing)})")


# --- the search -------------------------------------------------------------------------------

def _midpoint(lo: float, hi: float) -> float:
    """The geometric midpoint, rounded to SIG_DIGITS significant digits when that stays inside (lo, hi)."""
    mid = math.sqrt(lo * hi)
    rounded = float(f"{mid:.{SIG_DIGITS}g}")
    return rounded if lo < rounded < hi else mid


class RateSearch:
    """Bracket then bisect the rate at which mean attainment over `seeds` crosses `target`.

    A pure function of what it has observed: `next_rates()` gives the rates it needs next (the
    same answer until `observe` is called), None once it has its answer.
    """

    def __init__(self, seeds: tuple[int, ...], starts: tuple[float, ...], target: float, tol: float) -> None:
        self.seeds, self.starts, self.target, self.tol = seeds, starts, target, tol
        self.mean: dict[float, float] = {}  # rate -> mean attainment over the seeds

    def passes(self, rate: float) -> bool:
        return self.mean[rate] >= self.target

    def _split(self) -> tuple[list[float], list[float]]:
        rates = sorted(self.mean)
        return [r for r in rates if self.passes(r)], [r for r in rates if not self.passes(r)]

    def next_rates(self) -> list[float] | None:
        if not self.mean:
            return list(self.starts)
        passing, failing = self._split()
        if not failing:  # double until a rate fails
            top = passing[-1]
            return None if top >= self.starts[-1] * 2**MAX_STEPS else [top * 2]
        hi = failing[0]
        below = [r for r in passing if r < hi]
        if not below:  # halve until a rate passes
            return None if hi <= self.starts[0] / 2**MAX_STEPS else [hi / 2]
        lo = below[-1]
        if hi <= lo * (1 + self.tol):
            return None
        mid = _midpoint(lo, hi)
        return [mid] if lo < mid < hi else None

    def observe(self, rate: float, attainments: Sequence[float]) -> None:
        self.mean[rate] = math.fsum(attainments) / len(attainments)

    def outcome(self) -> dict[str, object]:
        """status ok: goodput = the highest passing rate below the lowest failing one, within tol of it;
        unbounded: every rate up to 2**MAX_STEPS x the first passed (goodput: a lower bound);
        never-met: every rate down to 2**-MAX_STEPS x the first failed (goodput 0)."""
        passing, failing = self._split()
        if not failing:
            return {"status": "unbounded", "goodput_rps": passing[-1], "bracket_rps": [passing[-1], None]}
        hi = failing[0]
        below = [r for r in passing if r < hi]
        if not below:
            return {"status": "never-met", "goodput_rps": 0.0, "bracket_rps": [0.0, hi]}
        return {"status": "ok", "goodput_rps": below[-1], "bracket_rps": [below[-1], hi]}


# --- running points ---------------------------------------------------------------------------

Key = tuple[int, int, int, float]  # (deployment, policy, seed, rate)


def run_requests(dep: Deployment, rate: float, duration_s: float | None) -> int | None:
    """Requests one run at `rate` serves: the deployment's count, or rate x duration_s when larger.
    None (a whole trace) stays None without a duration."""
    if duration_s is None:
        return dep.workload.requests if dep.workload.trace_path else dep.requests
    return max(dep.requests or 0, math.ceil(rate * duration_s))


def point_task(dep: Deployment, di: int, pi: int, policy: str, seed: int, rate: float,
               duration_s: float | None = None) -> Task:
    """The sweep Task of one (deployment, policy, seed, rate): the deployment's workload at `rate`."""
    n = run_requests(dep, rate, duration_s)
    wl = dataclasses.replace(dep.workload, rate=rate)
    if dep.workload.trace_path is not None:  # a trace's rows are limited by the workload's count
        wl = dataclasses.replace(wl, requests=n)
    point = Point(dep.index, wl, (*dep.settings, ("rate", rate)), dep.config, dep.seeds)
    return Task((di, pi, dep.seeds.index(seed), rate), point, policy, seed,  # type: ignore[arg-type]
                n if n is not None else dep.requests, False)


def evaluate(task: Task) -> dict[str, float]:
    """Simulate one point (the cluster resolves the engine profile) and keep its SLO numbers."""
    s = run_task(task).summary
    n = int(s["requests"])  # type: ignore[call-overload]
    out = {"attainment": 1.0 - float(s["slo_violation_rate"])}  # type: ignore[arg-type]
    out.update({k: float(s[src]) for k, src in _POINT_KEYS})  # type: ignore[arg-type]
    out["unfinished_rate"] = (n - int(s["finished"])) / n if n else 0.0  # type: ignore[call-overload]
    out["requests"] = n  # with --duration, rate x duration (a trace shorter than that: its rows)
    return out


def _guarded(task: Task, get: Callable[[], dict[str, float]]) -> dict[str, float]:
    try:
        return get()
    except (UserError, SweepFailed):
        raise
    except Exception as exc:  # noqa: BLE001 - any failure of a run is reported with its point
        from llumverify.sim.audit import AuditError

        raise SweepFailed(f"{task.label}: {exc}", audit=isinstance(exc, AuditError)) from exc


class _Runner:
    """Runs batches of points in-process (jobs=1) or in one process pool kept across rounds."""

    def __init__(self, jobs: int) -> None:
        self.pool = (ProcessPoolExecutor(max_workers=jobs, initializer=worker_start)
                     if jobs > 1 else None)

    def run(self, todo: dict[Key, Task]) -> Iterator[tuple[Key, dict[str, float]]]:
        if self.pool is None:
            for key, task in todo.items():
                yield key, _guarded(task, lambda: evaluate(task))
            return
        futures: dict[Future, Key] = {self.pool.submit(evaluate, task): key for key, task in todo.items()}
        try:
            pending = set(futures)
            while pending:
                done, pending = wait(pending, return_when=FIRST_COMPLETED)
                for fut in sorted(done, key=lambda f: futures[f]):
                    yield futures[fut], _guarded(todo[futures[fut]], fut.result)
        except BaseException:  # a failed run or Ctrl-C: stop the runs under way now
            stop_pool(self.pool)
            raise
        finally:
            for fut in futures:
                fut.cancel()

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(cancel_futures=True)


def search_all(exp: Experiment, deps: Sequence[Deployment], target: float, tol: float, jobs: int,
               progress: bool = False, duration_s: float | None = None,
               saved: Checkpoint | None = None) -> tuple[list[dict[str, object]], int]:
    """Every (deployment, policy) search, advanced in rounds (each round runs what every search needs
    next, in parallel). Returns one entry per deployment x policy (file order) and the runs made.
    With `saved`, each run is saved as it finishes and runs saved by an interrupted search are
    read instead of run again (the searches are pure functions of the runs: same output)."""
    searches: list[tuple[int, int, RateSearch]] = []  # mean search first, then one per seed
    for di, dep in enumerate(deps):
        for pi in range(len(exp.policies)):
            searches.append((di, pi, RateSearch(dep.seeds, dep.start_rates, target, tol)))
            searches += [(di, pi, RateSearch((s,), dep.start_rates, target, tol)) for s in dep.seeds]
    cache: dict[Key, dict[str, float]] = {}

    def needs(di: int, pi: int, search: RateSearch) -> list[Key]:
        """Feed the search what is cached until it needs runs (their keys) or is done ([])."""
        while (rates := search.next_rates()) is not None:
            keys = [(di, pi, s, r) for r in rates for s in search.seeds]
            missing = [k for k in keys if k not in cache]
            if missing:
                return missing
            for r in rates:
                search.observe(r, [cache[(di, pi, s, r)]["attainment"] for s in search.seeds])
        return []

    runner = _Runner(jobs)
    try:
        # the searches are adaptive, so no total is known up front: the bar's total is the runs made so far plus
        # this round's to run, and its label says how many searches are still open
        with tqdm(file=sys.stderr, disable=not progress, unit="run", leave=False) as bar:
            for rnd in itertools.count(1):
                wanted = [needs(di, pi, search) for di, pi, search in searches]
                todo_keys = sorted({k for keys in wanted for k in keys})
                if not todo_keys:
                    break
                todo = {k: point_task(deps[k[0]], k[0], k[1], exp.policies[k[1]], k[2], k[3], duration_s)
                        for k in todo_keys}
                if saved is not None:
                    have = saved.done(list(todo.values()))
                    for key in [k for k, task in todo.items() if task.key in have]:
                        cache[key] = saved.load([todo.pop(key)])[0].summary  # type: ignore[assignment]
                bar.total = bar.n + len(todo)  # runs a resumed search reads back are not run again
                bar.set_description(f"round {rnd}, {sum(map(bool, wanted))} of {len(searches)} searches open")
                for key, value in runner.run(todo):
                    cache[key] = value
                    if saved is not None:
                        saved.save(TaskResult(todo[key], value, None, 0.0))  # type: ignore[arg-type]
                    bar.update()
    finally:
        runner.close()

    entries = []
    i = 0  # searches per (deployment, policy): the mean search, then one per seed
    for di, dep in enumerate(deps):
        for pi, policy in enumerate(exp.policies):
            per = 1 + len(dep.seeds)
            group = searches[i:i + per]
            i += per
            entries.append(_entry(dep, policy, group[0][2], [s for _, _, s in group[1:]],
                                  {k: v for k, v in cache.items() if k[:2] == (di, pi)}))
    return entries, len(cache)


def _entry(dep: Deployment, policy: str, mean: RateSearch, per_seed: Sequence[RateSearch],
           points: dict[Key, dict[str, float]]) -> dict[str, object]:
    found = mean.outcome()
    goodput = float(found["goodput_rps"])  # type: ignore[arg-type]
    seeds = [{"seed": s.seeds[0], **s.outcome()} for s in per_seed]
    stats = mean_ci([float(s["goodput_rps"]) for s in seeds])  # type: ignore[arg-type]
    half = stats["ci95"]
    ci: dict[str, object] = {"n": stats["n"], "mean_rps": stats["mean"], "half_width_rps": half,
                             "low_rps": None, "high_rps": None, "mean_per_gpu": None, "low_per_gpu": None,
                             "high_per_gpu": None}
    if stats["mean"] is not None:
        m = float(stats["mean"])
        ci["mean_per_gpu"] = m / dep.gpus
        if half is not None:  # a rate is never negative: the interval's low end is clipped at 0
            low = max(0.0, m - half)
            ci.update(low_rps=low, high_rps=m + half, low_per_gpu=low / dep.gpus, high_per_gpu=(m + half) / dep.gpus)
    return {
        "workload": dep.workload.name, "settings": dict(dep.settings), "policy": policy,
        "instances": dep.instances, "tp": dep.tp, "gpus": dep.gpus, "seeds": list(dep.seeds),
        "requests": dep.workload.requests if dep.workload.trace_path else dep.requests,  # None: a whole trace
        "start_rates": list(dep.start_rates),
        **found, "goodput_per_gpu": goodput / dep.gpus,
        "rates": [{"rate": r, "mean_attainment": mean.mean[r], "passes": mean.passes(r)} for r in sorted(mean.mean)],
        "seed_goodputs": seeds, "ci95": ci,
        "points": [{"rate": k[3], "seed": k[2], **v}
                   for k, v in sorted(points.items(), key=lambda kv: (kv[0][3], kv[0][2]))],
    }


# --- the command's work -----------------------------------------------------------------------

def _check_trace_rows(exp: Experiment, dep: Deployment, di: int, duration_s: float | None) -> None:
    """A trace workload holds the rows its first rates' runs ask for (sweep.checked_specs), before any run: its
    `requests`, or with --duration rate x duration (at least `requests`). Why: a short trace would otherwise be
    replayed whole and the point judged on fewer requests than it records. Runs the search reaches above the
    first rates take a trace too short for them whole (docs/experiments.md; `short_runs` counts them)."""
    rate = dep.start_rates[-1]
    task = point_task(dep, di, 0, exp.policies[0], dep.seeds[0], rate, duration_s)
    if duration_s is None:
        asked = ""
    elif task.requests == dep.requests:
        asked = ("every run needs with --duration (at least the workload's or the experiment's requests, 1,000 unless "
                 "set): set requests to at most the trace's rows")
    else:
        asked = (f"its first rate's runs need ({rate:g} req/s x --duration {duration_s:g} s): give a shorter "
                 "--duration, a lower rate or a longer trace")
    try:
        checked_specs(task, asked)
    except UserError as exc:
        raise UserError(f"{exp.path}: workload {dep.workload.name!r} "  # as sweep.preflight names a point
                        f"[{', '.join(f'{k}={v}' for k, v in dep.settings)}]: {exc}") from None


def short_runs(doc: dict[str, object]) -> int:
    """Runs of a --duration search that replayed their trace whole: fewer requests than rate x duration."""
    duration = doc.get("duration_s")
    if duration is None:
        return 0
    return sum(1 for entry in doc["results"] for p in entry["points"]  # type: ignore[attr-defined]
               if p["requests"] < math.ceil(p["rate"] * duration))  # type: ignore[operator]


def check_options(target: float, tol: float, jobs: int | None, duration_s: float | None = None) -> int:
    """One-line UserErrors for bad numbers; returns the resolved job count."""
    if duration_s is not None and not (isinstance(duration_s, (int, float)) and 0 < duration_s < 1e7):
        raise UserError(f"--duration must be a positive number of seconds below 1e7 (e.g. 120), got {duration_s!r}")
    if not (isinstance(target, (int, float)) and 0 < target < 1):
        raise UserError(f"--target must be a share strictly between 0 and 1 (e.g. 0.9), got {target!r}")
    if not (isinstance(tol, (int, float)) and 0 < tol <= 1):
        raise UserError(f"--tol must be a relative tolerance in (0, 1] (e.g. 0.02), got {tol!r}")
    return check_runner(jobs, "local")


def run_goodput(path: str | Path, out: str | Path | None = None, *, target: float = DEFAULT_TARGET,
                tol: float = DEFAULT_TOL, jobs: int | None = None, force: bool = False,
                progress: bool = False, duration_s: float | None = None) -> tuple[Path, dict[str, object]]:
    """Search every deployment x policy of the experiment at `path`; write out/goodput.{json,csv} and
    out/attainment.png (default out: results/<name>-goodput). Returns the folder and the document.

    Raises UserError on bad input (before any run) and SweepFailed when a run fails.
    """
    jobs = check_options(target, tol, jobs, duration_s)
    exp = load_experiment(path)
    check_slo_targets(exp)
    out = Path(out) if out is not None else Path("results") / f"{exp.name}-goodput"
    deps = deployments(exp)
    for di, dep in enumerate(deps):  # the search may double the highest start rate MAX_STEPS times: its runs must stay runnable
        n = run_requests(dep, dep.start_rates[-1] * 2**MAX_STEPS, duration_s)
        if duration_s is not None and n is not None and n > MAX_REQUESTS:
            raise UserError(f"--duration {duration_s:g}: the search may run {dep.start_rates[-1] * 2**MAX_STEPS:g} req/s "
                            f"(2**{MAX_STEPS} x the first rate) for {duration_s:g} s, {n:,} requests a run, over the "
                            f"{MAX_REQUESTS:,} a run may hold; give a shorter --duration")
        if dep.workload.trace_path is not None:
            _check_trace_rows(exp, dep, di, duration_s)
    if duration_s is not None and all(dep.requests and run_requests(dep, dep.start_rates[-1] * 2**MAX_STEPS, duration_s)
                                      == dep.requests for dep in deps):  # as simulate --users: it would change nothing
        dep = max(deps, key=lambda d: d.start_rates[-1])
        raise UserError(f"--duration {duration_s:g}: changes no run: even the search's highest rate "
                        f"({dep.start_rates[-1] * 2**MAX_STEPS:g} req/s, 2**{MAX_STEPS} x the first) for {duration_s:g} s "
                        f"is no more than the experiment's {dep.requests:,} requests a run; give a longer --duration, or none")
    saved = Checkpoint.open(out, exp, 0, force, extra={"goodput_duration_s": duration_s})
    start = time.perf_counter()
    with saved:
        entries, runs = search_all(exp, deps, target, tol, jobs, progress, duration_s, saved)
        doc = {"schema_version": SCHEMA_VERSION, "name": exp.name, "target": target, "tol": tol,
               **({"duration_s": duration_s} if duration_s is not None else {}),
               "max_steps": MAX_STEPS, "policies": list(exp.policies), "experiment": exp.describe(),
               "runs": runs, "results": entries}
        write_outputs(out, doc)
    doc["wall_s"] = time.perf_counter() - start  # not written: the files are byte-identical for any --jobs
    return out, doc


# --- outputs ----------------------------------------------------------------------------------

CSV_COLUMNS = ("workload", "policy", "instances", "tp", "gpus", "status", "goodput_rps", "goodput_per_gpu",
               "bracket_high_rps", "seed_mean_rps", "ci95_low_rps", "ci95_high_rps", "ci95_low_per_gpu",
               "ci95_high_per_gpu", "runs")


def csv_text(doc: dict[str, object]) -> str:
    """One row per deployment x policy; the deployment's settings as columns after the workload."""
    entries: list[dict] = doc["results"]  # type: ignore[assignment]
    settings = sorted({k for e in entries for k in e["settings"]})
    columns = [CSV_COLUMNS[0], *settings, *CSV_COLUMNS[1:]]
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(columns)
    for e in entries:
        ci = e["ci95"]
        row = {**e, **e["settings"], "bracket_high_rps": e["bracket_rps"][1], "seed_mean_rps": ci["mean_rps"],
               "ci95_low_rps": ci["low_rps"], "ci95_high_rps": ci["high_rps"], "ci95_low_per_gpu": ci["low_per_gpu"],
               "ci95_high_per_gpu": ci["high_per_gpu"], "runs": len(e["points"])}
        writer.writerow([_cell(row.get(c)) for c in columns])
    return buf.getvalue()


def _cell(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value) if isinstance(value, float) else str(value)


def _atomic_png(path: Path, write: Callable[[Path], None]) -> None:
    """A binary output (the plot) via a temp file + rename; text goes through paths.write_atomic."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def write_outputs(out: Path, doc: dict[str, object]) -> None:
    """goodput.json (canonical JSON), goodput.csv and attainment.png, each via a temp file + rename."""
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"--out {out}: {exc.strerror or exc}") from None
    write_atomic(out / "goodput.json", dumps(doc))
    write_atomic(out / "goodput.csv", csv_text(doc))
    _atomic_png(out / "attainment.png", lambda p: plot_attainment(doc, p))


def plot_attainment(doc: dict[str, object], path: Path) -> None:
    """Mean attainment vs rate, one panel per deployment, one line per policy (seeds as dots), the
    target as a dashed line and each policy's goodput as a dotted vertical line."""
    import matplotlib.style
    from matplotlib.figure import Figure

    from llumverify.study.report import DPI, PNG_METADATA

    entries: list[dict] = doc["results"]  # type: ignore[assignment]
    policies: list[str] = doc["policies"]  # type: ignore[assignment]
    target = float(doc["target"])  # type: ignore[arg-type]
    groups: dict[str, list[dict]] = {}
    for e in entries:
        label = e["workload"] + "".join(f", {k}={v}" for k, v in e["settings"].items())
        groups.setdefault(label, []).append(e)
    with matplotlib.style.context("default"):
        cols = min(len(groups), 3)
        rows = math.ceil(len(groups) / cols)
        fig = Figure(figsize=(5.0 * cols, 3.6 * rows), dpi=DPI, layout="constrained")
        axes = fig.subplots(rows, cols, squeeze=False).ravel().tolist()
        for ax in axes[len(groups):]:
            ax.set_axis_off()
        colors = [f"C{i}" for i in range(10)]
        for ax, (label, members) in zip(axes, groups.items()):
            rates_all = []
            for e in members:
                color = colors[policies.index(e["policy"]) % len(colors)]
                xs = [r["rate"] for r in e["rates"]]
                rates_all += [p["rate"] for p in e["points"]]
                ax.plot(xs, [100 * r["mean_attainment"] for r in e["rates"]], marker="o", markersize=4,
                        color=color, label=f"{e['policy']}: {e['goodput_rps']:.3g} req/s")
                ax.scatter([p["rate"] for p in e["points"]], [100 * p["attainment"] for p in e["points"]],
                           s=8, color=color, alpha=0.3, linewidths=0)
                if e["goodput_rps"] > 0:
                    ax.axvline(e["goodput_rps"], color=color, linestyle=":", linewidth=1)
            ax.axhline(100 * target, color="black", linestyle="--", linewidth=1, label=f"target {100 * target:g} %")
            if rates_all and min(rates_all) > 0 and max(rates_all) / min(rates_all) > 20:
                ax.set_xscale("log")
            ax.set_ylim(-2, 102)
            ax.set_title(label, fontsize=10)
            ax.set_xlabel("request rate (req/s)")
            ax.set_ylabel("SLO attainment (%)")
            ax.grid(True, alpha=0.3)
            ax.legend(fontsize=8)
        fig.suptitle(f"{doc['name']}: goodput at {100 * target:g} % SLO attainment", fontsize=11)
        fig.savefig(path, format="png", dpi=DPI, metadata=PNG_METADATA)


def table(doc: dict[str, object]) -> str:
    """The printed summary: one row per deployment x policy."""
    from tabulate import tabulate

    rows = []
    for e in doc["results"]:  # type: ignore[union-attr]
        ci = e["ci95"]
        gp = e["goodput_rps"]
        shown = {"ok": f"{gp:.4g}", "unbounded": f">= {gp:.4g}", "never-met": "0"}[e["status"]]
        seeds = "" if ci["mean_rps"] is None else (
            f"{ci['mean_rps']:.4g}" + ("" if ci["half_width_rps"] is None else f" ± {ci['half_width_rps']:.2g}"))
        settings = ", ".join(f"{k}={v}" for k, v in e["settings"].items())
        rows.append([e["workload"] + (f" [{settings}]" if settings else ""), e["policy"], e["gpus"], shown,
                     f"{e['goodput_per_gpu']:.4g}", seeds, len(e["points"])])
    return tabulate(rows, headers=["deployment", "policy", "GPUs", "goodput req/s", "per GPU",
                                   "per-seed mean ± 95% CI", "runs"], disable_numparse=True)
