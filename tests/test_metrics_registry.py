"""The metrics registry: summaries carry exactly the registered metrics, and a missing or unknown
metric is an error wherever it is used (results tables, reports, finding templates) instead of a
column or a panel that silently disappears."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from llumverify.settings import metrics_registry as registry
from llumverify.errors import UserError
from llumverify.study.results import SCHEMA_VERSION, columns_of, load_results
from llumverify.sim.run import simulate
from llumverify.sim.workload import generate

QUICK = Path(__file__).resolve().parents[1] / "experiments" / "quick.toml"


def test_the_registry_is_consistent() -> None:
    for table in (registry.METRICS, registry.SERIES):
        assert all(name == m.name for name, m in table.items())
    assert all(m.over_seeds in registry.AGGREGATIONS for m in registry.METRICS.values())
    assert all(registry.get(name).higher_is_better is False for name in registry.RATIO_METRICS)
    assert registry.get("tpot_p99_s").header == "TPOT P99 ms" and registry.get("tpot_p99_s").scale == 1000.0
    assert registry.get("kv_util_mean").panel == "KV memory used, mean (%)"
    with pytest.raises(registry.UnknownMetric, match="unknown metric 'ttft_p99'"):
        registry.get("ttft_p99")


def test_a_summary_has_every_always_metric_and_nothing_unregistered() -> None:
    specs = generate(60, 4.0, seed=1, high_priority_frac=0.2)
    summary = simulate(specs, "llumnix").summary
    always = {m.name for m in registry.METRICS.values() if m.when == registry.ALWAYS}
    assert always <= set(summary) and set(summary) <= set(registry.METRICS)
    assert "slo_violation_rate_high" in summary  # per-class metrics come with high-priority requests
    with pytest.raises(registry.UnknownMetric, match="'ttft_p42_s'"):
        registry.check_summary({**summary, "ttft_p42_s": 1.0})
    with pytest.raises(registry.UnknownMetric, match="lacks the metric 'fragmentation'"):
        registry.check_summary({k: v for k, v in summary.items() if k != "fragmentation"})
    with pytest.raises(registry.UnknownMetric, match="derived by results.py"):
        registry.check_summary({**summary, "migrations_per_s": 0.0})


def test_results_columns_refuse_an_unregistered_metric() -> None:
    row = {"workload": "w", "policy": "p", "seed": 0, "ttft_p99_s": 1.0}
    assert columns_of([row])[-1] == "ttft_p99_s"
    with pytest.raises(registry.UnknownMetric, match="'ttft_p98_s'"):
        columns_of([{**row, "ttft_p98_s": 1.0}])


@pytest.fixture(scope="module")
def quick(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from llumverify.study.sweep import run_experiment

    return run_experiment(QUICK, tmp_path_factory.mktemp("results"), jobs=1, progress=False)


def _edited(src: Path, dst: Path, edit) -> Path:  # type: ignore[no-untyped-def]
    """A copy of results folder `src` whose results.json went through `edit`."""
    shutil.copytree(src, dst)
    doc = json.loads((dst / "results.json").read_text())
    edit(doc)
    (dst / "results.json").write_text(json.dumps(doc))
    return dst


def test_results_json_carries_its_schema_version(quick: Path, tmp_path: Path) -> None:
    assert json.loads((quick / "results.json").read_text())["schema_version"] == SCHEMA_VERSION
    assert json.loads((quick / "timing.json").read_text())["schema_version"] == SCHEMA_VERSION
    legacy = _edited(quick, tmp_path / "v1", lambda d: d.pop("schema_version"))
    assert load_results(legacy)["experiment"]["name"] == "quick"  # committed folders predate the field
    newer = _edited(quick, tmp_path / "v99", lambda d: d.update(schema_version=99))
    with pytest.raises(UserError, match="schema_version 99 is not one this llumverify reads"):
        load_results(newer)


def test_a_report_fails_loudly_when_a_panel_metric_is_missing(quick: Path, tmp_path: Path) -> None:
    from llumverify.study.report import write_report

    def drop(doc: dict) -> None:
        for agg in doc["aggregates"]:
            del agg["metrics"]["fragmentation"]

    renamed = _edited(quick, tmp_path / "renamed", drop)
    with pytest.raises(UserError, match="no aggregate has the metric 'fragmentation' \\(fragmentation \\(%\\)\\)"):
        write_report(renamed, reports_dir=tmp_path / "reports")
