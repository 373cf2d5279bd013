"""Sweeps: deterministic results whatever the parallelism or engine, CIs by hand, failures named."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from llumverify.cli.sweep import RunFailed, sweep
from llumverify.errors import UserError
from llumverify.study.experiment import load_experiment
from llumverify.study.results import mean_ci, t975
from llumverify.study.sweep import run_experiment, run_tasks, tasks

QUICK = Path(__file__).resolve().parents[1] / "experiments" / "quick.toml"


@pytest.fixture(scope="module")
def quick_serial(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return run_experiment(QUICK, tmp_path_factory.mktemp("serial"), jobs=1, progress=False)


def test_results_identical_for_any_jobs(quick_serial: Path, tmp_path: Path) -> None:
    parallel = run_experiment(QUICK, tmp_path / "parallel", jobs=2, progress=False)
    for name in ("results.csv", "results.json"):
        assert (quick_serial / name).read_bytes() == (parallel / name).read_bytes()


def test_results_shape(quick_serial: Path) -> None:
    doc = json.loads((quick_serial / "results.json").read_text())
    assert len(doc["rows"]) == 2 * 2 * 2
    assert [(r["rate"], r["policy"], r["seed"]) for r in doc["rows"][:3]] == [
        (2.0, "round-robin", 0), (2.0, "round-robin", 1), (2.0, "least-loaded", 0)]
    header = (quick_serial / "results.csv").read_text().splitlines()[0].split(",")
    assert header[:3] == ["workload", "policy", "seed"]
    assert {"rate", "cv", "ttft_p99_s", "slo_violation_rate", "fragmentation"} <= set(header)
    assert len(doc["aggregates"]) == 2 * 2
    agg = doc["aggregates"][0]
    assert agg["seeds"] == [0, 1] and agg["policy"] == "round-robin"
    values = [r["ttft_p99_s"] for r in doc["rows"][:2]]
    assert agg["metrics"]["ttft_p99_s"] == mean_ci(values)
    assert doc["experiment"]["config"]["cluster"]["num_instances"] == 4
    timing = json.loads((quick_serial / "timing.json").read_text())
    assert len(timing["runs"]) == 8 and timing["total_wall_s"] > 0


def test_confidence_interval_by_hand() -> None:
    # values 1, 2, 3, 6: mean 3, sample variance (4 + 1 + 0 + 9) / 3 = 14/3, t(3) = 3.182446305
    ci = mean_ci([1.0, 2.0, 3.0, 6.0])
    assert ci["n"] == 4 and ci["mean"] == 3.0
    assert ci["ci95"] == pytest.approx(3.182446305 * math.sqrt(14 / 3) / 2, rel=1e-12)
    assert mean_ci([5.0]) == {"n": 1, "mean": 5.0, "ci95": None}
    assert mean_ci([1.0, math.nan]) == {"n": 2, "mean": None, "ci95": None}


@pytest.mark.parametrize("df, exact", [(1, 12.706204736), (30, 2.042272456), (31, 2.039513446),
                                       (40, 2.021075390), (60, 2.000297822), (120, 1.979930405)])
def test_t_quantiles(df: int, exact: float) -> None:
    assert t975(df) == pytest.approx(exact, abs=1e-7)


def test_cli_and_bad_options(tmp_path: Path) -> None:
    sweep.main([str(QUICK), "--out", str(tmp_path / "cli"), "--jobs", "1", "--quiet"], standalone_mode=False)
    assert (tmp_path / "cli" / "results.csv").is_file()
    with pytest.raises(UserError, match="--jobs must be a positive integer"):
        sweep.main([str(QUICK), "--out", str(tmp_path / "x"), "--jobs", "0", "--quiet"], standalone_mode=False)
    with pytest.raises(UserError, match="experiment file not found"):
        sweep.main([str(tmp_path / "none.toml")], standalone_mode=False)


def test_failed_run_names_its_point(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from llumverify.study import sweep as sweep_module
    from llumverify.sim.audit import AuditError

    def broken(*args: object, **kwargs: object) -> None:
        raise AuditError("blocks", "free went negative")

    monkeypatch.setattr(sweep_module, "simulate", broken)
    with pytest.raises(RunFailed) as info:
        sweep.main([str(QUICK), "--out", str(tmp_path), "--jobs", "1", "--quiet"], standalone_mode=False)
    assert info.value.exit_code == 3
    assert "sharegpt [rate=2.0] round-robin seed 0" in str(info.value.message)


@pytest.mark.slow
def test_ray_engine_matches_local(quick_serial: Path, tmp_path: Path) -> None:
    ray = pytest.importorskip("ray", reason="Ray is an optional extra: pip install 'llumverify[ray]'")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        exp = load_experiment(QUICK)
        local = run_tasks(tasks(exp), jobs=1, progress=False)
        remote = run_tasks(tasks(exp), runner="ray", progress=False)
    finally:
        ray.shutdown()
    assert [(r.task.key, r.summary) for r in remote] == [(r.task.key, r.summary) for r in local]


@pytest.fixture
def no_ray(monkeypatch: pytest.MonkeyPatch) -> None:
    """`import ray` fails, as where the optional extra is not installed (whether or not it is here)."""
    import builtins

    real_import = builtins.__import__

    def no_ray(name: str, *args: object, **kwargs: object) -> object:
        if name == "ray":
            raise ImportError("no ray")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_ray)


@pytest.mark.usefixtures("no_ray")
def test_ray_missing_is_one_line() -> None:
    with pytest.raises(UserError, match=r"--runner ray needs Ray: pip install 'llumverify\[ray\]'"):
        run_tasks(tasks(load_experiment(QUICK))[:1], runner="ray", progress=False)


@pytest.mark.usefixtures("no_ray")
def test_ray_missing_is_refused_before_the_out_folder_is_made(tmp_path: Path) -> None:
    """It left manifest.json, points/ and PARTIAL behind."""
    with pytest.raises(UserError, match=r"--runner ray needs Ray"):
        run_experiment(QUICK, tmp_path / "out", runner="ray", progress=False)
    assert not (tmp_path / "out").exists()


def test_a_ray_address_without_the_ray_runner_is_refused(tmp_path: Path) -> None:
    """The local runner silently ignored it."""
    with pytest.raises(UserError, match=r"^--ray-address needs --runner ray \(the local runner does not use it\)$"):
        run_experiment(QUICK, tmp_path / "out", ray_address="127.0.0.1:1", progress=False)
    assert not (tmp_path / "out").exists()
    with pytest.raises(UserError, match=r"--ray-address needs --runner ray"):
        run_tasks(tasks(load_experiment(QUICK))[:1], jobs=1, ray_address="127.0.0.1:1", progress=False)


def test_time_series_kept_for_the_plotted_point_by_default() -> None:
    exp = load_experiment(QUICK)
    kept = [(t.point.settings, t.policy, t.seed) for t in tasks(exp) if t.keep_timeseries]
    assert kept == [((("rate", 3.0),), "round-robin", 0), ((("rate", 3.0),), "least-loaded", 0)]


def test_config_columns_hold_the_value_each_run_used(tmp_path: Path) -> None:
    from llumverify.study.results import rows_of

    path = tmp_path / "exp.toml"
    path.write_text('policies = ["round-robin"]\nrequests = 20\n'
                    '[[workload]]\nlengths = "S"\nrate = 2.0\n'
                    '[[workload]]\nname = "b"\nlengths = "S"\nrate = 2.0\ncluster.num_instances = 2\n')
    rows = rows_of(run_tasks(tasks(load_experiment(path)), jobs=1, progress=False))
    assert [(r["workload"], r["cluster.num_instances"]) for r in rows] == [("S", 16), ("b", 2)]


def test_json_packs_long_number_lists_and_round_trips() -> None:
    from llumverify.study.results import dumps

    doc = {"series": {"t_s": [i / 3 for i in range(40)], "x": [None] * 20 + [math.nan]}, "seeds": [0, 1]}
    text = dumps(doc)
    assert json.loads(text) == {"series": {"t_s": doc["series"]["t_s"], "x": [None] * 21}, "seeds": [0, 1]}
    assert '"t_s": [0.0,0.3333333333333333,' in text and '"seeds": [\n' in text


def test_aggregate_groups_by_point_even_when_a_metric_is_sometimes_none() -> None:
    from llumverify.study.results import aggregate

    base = {"workload": "w", "policy": "p", "lengths": "S", "trace": None, "arrival": "poisson", "rate": 1.0,
            "cv": 1.0, "rate_scale": 1.0, "high_priority_frac": 0.0, "spread": False}
    rows = [{**base, "seed": 0, "ttft_p99_s": 1.0, "downtime_mean_s": None},
            {**base, "seed": 1, "ttft_p99_s": 3.0, "downtime_mean_s": 0.02}]
    (agg,) = aggregate(rows)
    assert agg["seeds"] == [0, 1]
    assert agg["metrics"]["ttft_p99_s"]["mean"] == 2.0
    assert agg["metrics"]["downtime_mean_s"] == {"n": 1, "mean": 0.02, "ci95": None}


def test_migrations_per_s_counts_committed_migrations_over_the_makespan() -> None:
    """The derived column divides the committed migrations (not those started, some of them aborted) by the makespan."""
    from types import SimpleNamespace

    from llumverify.study.results import rows_of

    workload = SimpleNamespace(name="w", config=(), settings=lambda: {})
    task = SimpleNamespace(point=SimpleNamespace(workload=workload, settings=(), config=None), policy="llumnix", seed=0)
    summary = {"migrations": 3, "migrations_started": 5, "makespan_s": 2.0}
    [row] = rows_of([SimpleNamespace(task=task, summary=summary)])
    assert row["migrations_per_s"] == 3 / 2.0
