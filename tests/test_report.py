"""Reports: byte-identical regeneration, the finding line, ratios, and time-series plots when present."""

from __future__ import annotations

from pathlib import Path

import pytest

from llumverify.commands.report import report
from llumverify.errors import UserError
from llumverify.report import finding, ratios
from llumverify.sweep import run_experiment

QUICK = Path(__file__).resolve().parents[1] / "experiments" / "quick.toml"


@pytest.fixture(scope="module")
def quick_results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return run_experiment(QUICK, tmp_path_factory.mktemp("results"), jobs=1, progress=False)


def files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


@pytest.mark.slow
def test_report_regenerates_byte_identically(quick_results: Path, tmp_path: Path) -> None:
    report.main([str(quick_results), "--reports-dir", str(tmp_path / "a")], standalone_mode=False)
    report.main([str(quick_results), "--reports-dir", str(tmp_path / "b"), "--name", "quick"], standalone_mode=False)
    first, second = files(tmp_path / "a" / "quick"), files(tmp_path / "b" / "quick")
    assert first == second
    assert {"index.md", "latency_sharegpt.png", "memory_sharegpt.png"} <= set(first)
    report.main([str(quick_results), "--reports-dir", str(tmp_path / "a")], standalone_mode=False)
    assert files(tmp_path / "a" / "quick") == first
    index = first["index.md"].decode()
    assert index.startswith("# quick\n\n**Finding:** On 4 instances least-loaded's P99 TTFT is up to ")
    assert "| rate | policy | TTFT mean s |" in index and " ± " in index
    assert b"Software" not in first["latency_sharegpt.png"]


def test_report_of_missing_results(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="results.json: not found"):
        report.main([str(tmp_path)], standalone_mode=False)


def agg(policy: str, rate: float, ttft: float) -> dict[str, object]:
    return {"workload": "w", "policy": policy, "rate": rate, "seeds": [0],
            "metrics": {"ttft_p99_s": {"n": 1, "mean": ttft, "ci95": None}}}


def test_ratios_and_finding_template() -> None:
    aggs = [agg("a", 1.0, 2.0), agg("b", 1.0, 1.0), agg("a", 2.0, 9.0), agg("b", 2.0, 3.0), agg("b", 3.0, 0.0)]
    by_wl = ratios(aggs, ["a", "b"])
    value, where = by_wl["w"]["ttft_p99_s"]["a/b"]
    assert value == 3.0 and where["rate"] == 2.0
    exp = {"name": "x", "policies": ["a", "b"], "workloads": [{"name": "w", "grid": {"rate": [1.0, 2.0, 3.0]}}],
           "grid": {}, "finding": "b is {ratio[ttft_p99_s][a/b]:.1f}x better "
           "({wratio[w][ttft_p99_s][a/b]:.0f}x on w; at 2 req/s {at[w][2.0][a][ttft_p99_s]:.0f} vs "
           "{at[w][2.0][b][ttft_p99_s]:.0f} s)"}
    assert finding(exp, aggs) == "b is 3.0x better (3x on w; at 2 req/s 9 vs 3 s)"
    two = [{**a, "cv": 4.0} for a in aggs]  # two swept settings: the values joined in sweep order
    exp2 = {**exp, "workloads": [{"name": "w", "grid": {"rate": [1.0, 2.0, 3.0], "cv": [4.0]}}],
            "finding": "{at[w][2.0,4.0][a][ttft_p99_s]:.0f} s"}
    assert finding(exp2, two) == "9 s"
    ints = [{**a, "rate": int(a["rate"])} for a in aggs]  # an all-digit index reaches the template as an int
    assert finding({**exp, "finding": "{at[w][2][b][ttft_p99_s]:.0f} s"}, ints) == "3 s"
    with pytest.raises(UserError, match="finding template: no value for 'b/a'"):
        finding({**exp, "finding": "{ratio[ttft_p99_s][b/a]}"}, aggs)
    assert "none written" in finding({**exp, "finding": None}, aggs)


@pytest.mark.slow
def test_timeseries_are_plotted_when_present(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from llumverify import sweep as sweep_module

    real = sweep_module.simulate

    def with_series(specs, policy, cfg):  # type: ignore[no-untyped-def]
        result = real(specs, policy, cfg)
        t = [float(i) for i in range(5)]
        result.timeseries = {"t_s": t, "kv_util_mean": [0.1 * i for i in range(5)], "instances": [4.0] * 5}
        return result

    monkeypatch.setattr(sweep_module, "simulate", with_series)
    results = run_experiment(QUICK, tmp_path / "results", jobs=1, progress=False)
    report.main([str(results), "--reports-dir", str(tmp_path / "r")], standalone_mode=False)
    out = files(tmp_path / "r" / "quick")
    assert "timeseries_sharegpt.png" in out
    assert "![time series](timeseries_sharegpt.png)" in out["index.md"].decode()
