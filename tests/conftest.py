"""Shared test setup: the Hypothesis profiles ("ci" loaded by default, `examples`) and simulator helpers."""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
import simpy
from hypothesis import settings

from llumverify import _native
from llumverify.settings.config import ClusterConfig, CostConfig, EngineConfig, SimConfig
from llumverify.requests import RequestSpec
from llumverify.sim.request_output import RequestsFile
from llumverify.sim.run import RunResult, simulate



@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    """A test marked `spies` watches simulator internals by monkeypatching or subclassing them, which
    compiled modules call directly (llumverify/_native.py): with the compiled build active it runs
    in a child pytest on the sources (LLUMVERIFY_PURE=1), and passes or fails with it. One child
    runs every spies test of the session (`_spies_on_sources`): a child per test was a third of
    the fast tier's time, most of it start-up."""
    if pyfuncitem.get_closest_marker("spies") is None or not _native.compiled():
        return None
    outcome, output = _spies_on_sources(pyfuncitem.session).get(pyfuncitem.nodeid, ("MISSING", ""))
    if outcome != "PASSED":
        pytest.fail(f"on the sources (LLUMVERIFY_PURE=1): {outcome}\n{output}", pytrace=False)
    return True


def _spies_on_sources(session: pytest.Session) -> dict[str, tuple[str, str]]:
    """Every collected spies test's outcome in one child pytest on the sources (nodeid ->
    (PASSED | FAILED | ERROR | SKIPPED, the child's output if not passed)), run by the first
    process of this test run to need it (pytest-xdist workers share the file, under a lock)."""
    base = session.config._tmp_path_factory.getbasetemp()  # type: ignore[attr-defined]
    uid = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    done = (base.parent / f"spies-{uid}.json") if uid else base / "spies.json"
    with open(f"{done}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            ids = [item.nodeid for item in session.items if item.get_closest_marker("spies") is not None]
            child = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider",
                                    "-m", "slow or not slow", *ids], cwd=session.config.rootpath,
                                   env={**os.environ, "LLUMVERIFY_PURE": "1"}, capture_output=True, text=True)
            tail = f"{child.stdout[-4000:]}{child.stderr[-2000:]}"
            results = {}
            for line in child.stdout.splitlines():
                outcome, _, rest = line.partition(" ")
                if outcome in ("PASSED", "FAILED", "ERROR", "SKIPPED") and rest.split(" - ")[0] in ids:
                    results[rest.split(" - ")[0]] = (outcome, "" if outcome == "PASSED" else tail)
            done.write_text(json.dumps(results))
        return {k: (v[0], v[1]) for k, v in json.loads(done.read_text()).items()}


# Seconds per test of a recent full run (tests over a second), only to order the run: the longest
# first, so that pytest-xdist's work stealing fills the end with short tests instead of starting
# a minute-long one last. Rewrite it with LLUMVERIFY_STORE_DURATIONS=tests/durations.json.
DURATIONS = Path(__file__).with_name("durations.json")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The slow tier first, longest first by DURATIONS (file order otherwise)."""
    seconds = json.loads(DURATIONS.read_text()) if DURATIONS.exists() else {}
    items.sort(key=lambda item: (item.get_closest_marker("slow") is None, -seconds.get(item.nodeid, 0.0)))


_RUN_SECONDS: dict[str, float] = {}


def pytest_configure(config: pytest.Config) -> None:
    """A bad LLUMVERIFY_STORE_DURATIONS path is refused before any test runs, not after all of them."""
    path = os.environ.get("LLUMVERIFY_STORE_DURATIONS")
    if path and not Path(path).resolve().parent.is_dir():
        raise pytest.UsageError(f"LLUMVERIFY_STORE_DURATIONS={path}: folder {Path(path).parent} not found")


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.when == "call" and os.environ.get("LLUMVERIFY_STORE_DURATIONS"):
        _RUN_SECONDS[report.nodeid] = report.duration


def pytest_sessionfinish(session: pytest.Session) -> None:
    """With LLUMVERIFY_STORE_DURATIONS=PATH, the run's tests over a second, written by the
    controller (the process that is not an xdist worker)."""
    path = os.environ.get("LLUMVERIFY_STORE_DURATIONS")
    if path and not os.environ.get("PYTEST_XDIST_WORKER") and _RUN_SECONDS:
        slow = {k: round(v, 1) for k, v in sorted(_RUN_SECONDS.items()) if v >= 1.0}
        Path(path).write_text(json.dumps(slow, indent=0) + "\n")


# HYPOTHESIS_PROFILE picks one: ci (the default: derandomized, the same examples every run),
# dev (randomized) or nightly (randomized, 10x the examples).
settings.register_profile("ci", derandomize=True, deadline=None)
settings.register_profile("dev", deadline=None)
settings.register_profile("nightly", deadline=None, max_examples=10 * settings.get_profile("ci").max_examples)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


def examples(n: int) -> int:
    """max_examples for a test that sets its own: n, scaled like the loaded profile's default
    (1x under ci and dev, 10x under nightly). Settings built without a parent, such as
    `settings(max_examples=examples(300))`, inherit the rest (derandomize, deadline) from it."""
    return n * max(1, settings.default.max_examples // settings.get_profile("ci").max_examples)

# A cost model whose step times are easy to add up by hand: prefill 100 ns, decode 10 ns.
TOY_COST = CostConfig(prefill_ns_per_token=0, prefill_ps_per_token_sq=0, prefill_ns=100,
                      decode_ns_per_seq=0, decode_ns_per_token=0, decode_ns=10, gap_ns=0)


def toy_config(num_blocks: int = 16, block_size: int = 4, watermark_frac: float = 0.0, max_num_seqs: int = 256,
               max_num_batched_tokens: int = 12_800, instances: int = 1, fast: bool = True,
               cost: CostConfig = TOY_COST, report_interval_s: float = 0.0) -> SimConfig:
    """A tiny engine with hand-checkable step times."""
    engine = EngineConfig(num_blocks=num_blocks, block_size=block_size, watermark_frac=watermark_frac,
                          max_num_seqs=max_num_seqs, max_num_batched_tokens=max_num_batched_tokens)
    return SimConfig(engine=engine, cost=cost, fast=fast,
                     cluster=ClusterConfig(num_instances=instances, report_interval_s=report_interval_s))


def specs_of(*rows: tuple[float, int, int]) -> list[RequestSpec]:
    """RequestSpecs from (arrival_s, prompt, output) rows, ids in order."""
    return [RequestSpec(i, t, p, o) for i, (t, p, o) in enumerate(rows)]


def streamed_csv(specs: Sequence[RequestSpec], policy: str, cfg: SimConfig, folder: Path,
                 keep_records: bool = False) -> tuple[RunResult, bytes]:
    """A run and the requests.csv the CLI streams for it (into `folder`, created)."""
    folder.mkdir(parents=True, exist_ok=True)
    with RequestsFile(folder) as rows:
        res = simulate(specs, policy, cfg, keep_records=keep_records, rows=rows)
    return res, (folder / "requests.csv").read_bytes()


def run_both_paths(specs: Sequence[RequestSpec], policy: str, cfg: SimConfig, tmp_path: Path) -> tuple[bytes, bytes]:
    """requests.csv from the closed-form path and from the step-by-step path."""
    return (streamed_csv(specs, policy, replace(cfg, fast=True), tmp_path / "fast")[1],
            streamed_csv(specs, policy, replace(cfg, fast=False), tmp_path / "slow")[1])


def traces_dir() -> Path:
    """../shared/traces next to the repository, or $LLUMVERIFY_TRACES."""
    env = os.environ.get("LLUMVERIFY_TRACES")
    return Path(env) if env else Path(__file__).resolve().parents[2] / "shared" / "traces"


def validation_dir() -> Path:
    """../shared/validation next to the repository, or $LLUMVERIFY_VALIDATION."""
    env = os.environ.get("LLUMVERIFY_VALIDATION")
    return Path(env) if env else Path(__file__).resolve().parents[2] / "shared" / "validation"


def benchmark_script(name: str):
    """benchmarks/<name>.py as a module, loaded as `python benchmarks/<name>.py` runs it (its sibling
    scripts importable)."""
    import importlib.util

    folder = str(Path(__file__).resolve().parents[1] / "benchmarks")
    sys.path.insert(0, folder)
    try:
        spec = importlib.util.spec_from_file_location(name, f"{folder}/{name}.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # as an imported module is: a dataclass in it looks its module up
        spec.loader.exec_module(module)  # type: ignore[union-attr]
        return module
    finally:
        sys.path.remove(folder)


# For tests that read the real traces: on a clean machine without ../shared they skip, saying why.
needs_traces = pytest.mark.skipif(
    not traces_dir().is_dir(), reason=f"../shared/traces not found: looked in {traces_dir()} (set LLUMVERIFY_TRACES)")



class EventCounter:
    """Counts the SimPy events an environment processes from now on (wraps its `step`), for
    tests that a run costs events, not simulated time or dead timers."""

    def __init__(self, env: simpy.Environment) -> None:
        self.events = 0
        step = env.step

        def counted() -> None:
            self.events += 1
            step()

        env.step = counted  # type: ignore[method-assign]


@dataclass(frozen=True)
class CheckRun:
    """`python -m llumverify.cli check ARGS --json-out F` (and --skip-scheduler with --variant):
    its exit code, what it printed, and the JSON report it wrote (tests read text and JSON from
    one run)."""

    returncode: int
    stdout: str
    stderr: str
    report: dict


@pytest.fixture(scope="session")
def check_cli(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., CheckRun]:
    """check_cli(*args): `llumverify check ARGS` in a child process, run once per test session and
    shared by every test that only reads its output, across pytest-xdist workers too (a file per
    invocation, written under a lock by the first to need it). Z3 runs are most of the slow tier:
    tests read each variant's verdicts and traces from one run of every variant,
    `check_cli("--traces")` (`variant_part`), not from a run per variant (each starts the package
    and its workers again), and leave `--variant` runs to what only they show. PYTHONHASHSEED is 1, where
    reports/protocol-findings.md is regenerated under 0: the report's test, which compares every
    verdict line and trace, then also shows that the output does not depend on string hashing."""
    uid = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    base = tmp_path_factory.getbasetemp()
    folder = (base.parent / f"check-runs-{uid}") if uid else base / "check-runs"
    folder.mkdir(exist_ok=True)

    def run(*args: str) -> CheckRun:
        key = hashlib.sha256(json.dumps(args).encode()).hexdigest()[:16]
        with open(folder / f"{key}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            done, report = folder / f"{key}.json", folder / f"{key}.report.json"
            if not done.exists():
                env = {**os.environ, "PYTHONHASHSEED": "1"}
                # the scheduler's check does not depend on the variant: the run of every variant has it
                skip = ["--skip-scheduler"] if "--variant" in args else []
                proc = subprocess.run([sys.executable, "-m", "llumverify.cli", "check", *args, *skip, "--json-out",
                                       str(report)], capture_output=True, text=True, env=env, check=False)
                done.write_text(json.dumps([proc.returncode, proc.stdout, proc.stderr]))
            code, out, err = json.loads(done.read_text())
            return CheckRun(code, out, err, json.loads(report.read_text()) if report.exists() else {})

    return run


def check_details(stdout: str) -> str:
    """The part of `check --traces`'s stdout that reports/protocol-findings.md quotes: each
    variant's verdicts and traces and the scheduler's line, without the state legend and the
    summary table that follow."""
    from llumverify.cli.check_summary import STATE_TITLE, TITLE

    for title in (STATE_TITLE, TITLE):
        stdout = stdout.split("\n\n" + title)[0]
    return stdout


def variant_part(run: CheckRun, name: str) -> str:
    """The block a run of every variant (`check --traces`) printed for one: `variant NAME:`, its
    verdict lines, then its counterexamples and lassos (what `--variant NAME --traces` prints
    before the scheduler's lines, the state legend and the summary)."""
    import re
    for part in re.split(r"\n\n(?=variant [\w-]+:\n|scheduler \()", check_details(run.stdout)):
        if part.startswith(f"variant {name}:\n"):
            return part.rstrip("\n") + "\n"
    raise AssertionError(f"check printed no block for variant {name}")


def printed_trace(stdout: str, prop: str) -> list[str]:
    """The lines of the counterexample `check --traces` printed for a property: its initial
    state, then one numbered line per step (empty if none was printed)."""
    import itertools
    import re
    parts = stdout.split(f"  counterexample to {prop}:\n")
    if len(parts) < 2:
        return []
    return list(itertools.takewhile(lambda ln: re.match(r"\s+(initial:|\d+\. )", ln), parts[1].splitlines()))

