"""Reports: byte-identical regeneration, the finding line, ratios, and time-series plots when present."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from llumverify.cli.report import report
from llumverify.errors import UserError
from llumverify.settings import metrics_registry as registry
from llumverify.study.experiment import load_experiment
from llumverify.study.report import _plot_vs, finding, interval, ratios
from llumverify.study.sweep import run_experiment

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
    # 2 seeds of 200 requests: every interval pair overlaps, so the template's ratio is not claimed
    assert index.startswith("# quick\n\n**Finding:** _(the template's ratio is not claimed: ")
    assert "| rate | policy | TTFT mean s |" in index and "| 2 | least-loaded | 0.0948 (0–0.2) |" in index
    assert b"Software" not in first["latency_sharegpt.png"]


def test_report_of_missing_results(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="results.json: not found"):
        report.main([str(tmp_path)], standalone_mode=False)


CORPUS_RESULTS = Path(__file__).resolve().parent / "bad_inputs" / "results"


@pytest.mark.parametrize("results, message", [
    ("finding_attribute", "experiment tiny2: finding template: {ratio.__class__.__mro__}: expected one of "
                          "ratio[METRIC][A/B]"),
    ("finding_no_value", "experiment tiny2: finding template: no value for 'ttft_mean_s'"),
])
def test_a_bad_finding_is_refused_before_the_reports_dir_is_made(tmp_path: Path, results: str, message: str) -> None:
    """A template `sweep` refuses in an experiment file is refused in results.json too (it was
    rendered into index.md: attribute access on the values); a template with no value left an
    empty --reports-dir behind."""
    with pytest.raises(UserError) as info:
        report.main([str(CORPUS_RESULTS / results), "--reports-dir", str(tmp_path / "reports")], standalone_mode=False)
    assert str(info.value).startswith(message), str(info.value)
    assert not (tmp_path / "reports").exists()


PAIR = "round-robin/least-loaded"


@pytest.mark.parametrize("template, problem", [
    ("{ratio.__class__.__mro__}", "{ratio.__class__.__mro__}: expected one of ratio[METRIC][A/B]"),
    (f"{{ratio[ttft_p99_s][{PAIR}].__class__}}", f"{{ratio[ttft_p99_s][{PAIR}].__class__}}: expected one of"),
    ("{}", "{}: expected one of"),
    (f"{{ratio[nope][{PAIR}]}}", f"{{ratio[nope][{PAIR}]}}: unknown metric 'nope'"),
    (f"{{wratio[v][ttft_p99_s][{PAIR}]}}", "no workload 'v'"),
    ("{ratio[ttft_p99_s][round-robin/c]}", "'c' is not in policies"),
    (f"{{ratio[ttft_p99_s][{PAIR}]:99999999999f}}", "format spec '99999999999f': widths and precisions up to 999"),
    (f"{{ratio[ttft_p99_s][{PAIR}]:{{ratio}}}}", "format spec '{ratio}': no fields inside a format spec"),
])
def test_the_report_checks_a_finding_as_an_experiment_file_does(tmp_path: Path, template: str, problem: str) -> None:
    """One check (experiment.finding_problem) for both readers of a template: the same text is
    refused by `report` (from results.json) and by `sweep` (from the experiment file)."""
    exp = {"name": "x", "policies": PAIR.split("/"), "workloads": [{"name": "w", "grid": {"rate": [1.0]}}],
           "grid": {}, "finding": template}
    aggs = [{**agg(p, 1.0, t), "workload": "w"} for p, t in zip(PAIR.split("/"), (2.0, 1.0))]
    with pytest.raises(UserError, match="^experiment x: finding template: .*" + re.escape(problem)):
        finding(exp, aggs)
    (tmp_path / "exp.toml").write_text(f'policies = {json.dumps(PAIR.split("/"))}\nfinding = {json.dumps(template)}\n'
                                       '[[workload]]\nname = "w"\nlengths = "S"\ngrid.rate = [1.0]\n')
    with pytest.raises(UserError, match=r"exp\.toml: finding: .*" + re.escape(problem)):
        load_experiment(tmp_path / "exp.toml")


def agg(policy: str, rate: float, ttft: float, ci: float | None = None) -> dict[str, object]:
    return {"workload": "w", "policy": policy, "rate": rate, "seeds": [0],
            "metrics": {"ttft_p99_s": {"n": 1, "mean": ttft, "ci95": ci}}}


def test_intervals_keep_to_the_metric_range() -> None:
    share = {"metrics": {"slo_violation_rate": {"mean": 0.9, "ci95": 0.3}, "ttft_mean_s": {"mean": 0.1, "ci95": 0.5},
                         "kv_util_mean": {"mean": 0.5, "ci95": None}}}
    assert interval(share, "slo_violation_rate") == pytest.approx((0.6, 1.0))
    assert interval(share, "ttft_mean_s") == (0.0, 0.6)
    assert interval(share, "kv_util_mean") == (0.5, 0.5) and interval(share, "fragmentation") is None


def test_a_finding_claims_a_ratio_only_where_intervals_separate() -> None:
    exp = {"name": "x", "policies": ["a", "b"], "workloads": [{"name": "w", "grid": {"rate": [1.0, 2.0]}}],
           "grid": {}, "finding": "b is {ratio[ttft_p99_s][a/b]:.1f}x better"}
    apart = [agg("a", 1.0, 2.0, 0.2), agg("b", 1.0, 1.0, 0.2), agg("a", 2.0, 9.0, 5.0), agg("b", 2.0, 3.0, 2.0)]
    assert finding(exp, apart) == "b is 2.0x better"  # 9 vs 3 overlap (4-14 and 1-5): not the 3x
    overlapping = [{**a, "metrics": {"ttft_p99_s": {**a["metrics"]["ttft_p99_s"], "ci95": 5.0}}} for a in apart]
    assert "not claimed" in finding(exp, overlapping)
    with pytest.raises(UserError, match="no value for 'b/a'"):  # a wrong template stays an error
        finding({**exp, "finding": "{ratio[ttft_p99_s][b/a]}"}, overlapping)


def test_an_all_zero_metric_gets_no_panel(tmp_path: Path) -> None:
    rows = [{**agg(p, 1.0, 0.0), "metrics": {"ttft_p99_s": {"n": 2, "mean": 0.0, "ci95": 0.0},
                                            "ttft_mean_s": {"n": 2, "mean": 0.5, "ci95": 0.9}}} for p in ("a", "b")]
    panels = [registry.get("ttft_p99_s")]
    assert not _plot_vs(tmp_path / "x.png", "t", rows, ["a", "b"], "rate", [], panels)
    assert _plot_vs(tmp_path / "y.png", "t", rows, ["a", "b"], "rate", [], [*panels, registry.get("ttft_mean_s")])


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
    from llumverify.study import sweep as sweep_module

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


def test_touching_intervals_are_not_called_separate() -> None:
    """Intervals that meet at one value overlap there: no ratio is claimed (1.0 +- 0.5 and 2.0 +- 0.5 share 1.5)."""
    aggs = [{**agg("a", 1.0, 1.0, 0.5), "seeds": [0, 1]}, {**agg("b", 1.0, 2.0, 0.5), "seeds": [0, 1]}]
    assert ratios(aggs, ["a", "b"]) == {}
    assert ratios(aggs, ["a", "b"], separated=False)["w"]["ttft_p99_s"]["a/b"][0] == 0.5


def test_a_finding_s_ratio_is_the_largest_over_every_workload() -> None:
    exp = {"name": "x", "policies": ["a", "b"], "grid": {}, "finding": "{ratio[ttft_p99_s][a/b]:.1f}",
           "workloads": [{"name": "w1", "grid": {"rate": [1.0]}}, {"name": "w2", "grid": {"rate": [1.0]}}]}
    aggs = [{**agg(p, 1.0, t), "workload": w} for w, pair in (("w1", (2.0, 1.0)), ("w2", (3.0, 1.0)))
            for p, t in zip("ab", pair)]
    assert finding(exp, aggs) == "3.0"


def test_the_point_table_puts_each_value_and_its_interval_under_its_header_in_display_units() -> None:
    """Cells follow the header even when most table metrics are absent; a share shows as % with its interval
    scaled too (0.25 +- 0.05 -> 25 (20-30))."""
    from llumverify.study.report import _point_table

    row = {"workload": "w", "policy": "a", "rate": 1.0, "seeds": [0, 1],
           "metrics": {"ttft_mean_s": {"n": 2, "mean": 0.5, "ci95": 0.1}, "kv_util_mean": {"n": 2, "mean": 0.25, "ci95": 0.05}}}
    head, _, line, _ = _point_table([row], ["a"], "rate", [])
    cells = dict(zip((c.strip() for c in head.strip("|").split("|")), (c.strip() for c in line.strip("|").split("|"))))
    assert len(head.split("|")) == len(line.split("|"))
    assert (cells["rate"], cells["policy"], cells["TTFT mean s"], cells["KV used %"]) == \
        ("1", "a", "0.5 (0.4–0.6)", "25 (20–30)")


def test_the_workload_s_swept_setting_comes_before_the_experiment_s() -> None:
    """The x axis and the `at` key: the workload's own grid first, then the top-level grid (finding's doc)."""
    from llumverify.study.report import _swept

    exp = {"name": "x", "policies": ["a", "b"], "grid": {"cv": [4.0]},
           "workloads": [{"name": "w", "grid": {"rate": [1.0, 2.0]}}], "finding": "{at[w][2.0,4.0][a][ttft_p99_s]:.0f} s"}
    assert _swept(exp, exp["workloads"][0]) == ("rate", ["cv"])
    aggs = [{**agg(p, r, t), "cv": 4.0} for r in (1.0, 2.0) for p, t in zip("ab", (9.0 * r, 3.0))]
    assert finding(exp, aggs) == "18 s"


def _corpus_results(tmp_path: Path, case: str, edit) -> Path:
    """A copy of a corpus results.json (tests/bad_inputs/results/CASE), edited."""
    doc = json.loads((Path(__file__).parent / "bad_inputs" / "results" / case / "results.json").read_text())
    edit(doc)
    (tmp_path / "r").mkdir(parents=True)
    (tmp_path / "r" / "results.json").write_text(json.dumps(doc))
    return tmp_path / "r"


def test_a_share_of_exactly_one_is_read_and_a_series_longer_than_its_times_is_refused(tmp_path: Path) -> None:
    """Every request violating the SLO (a share of 1.0, an overloaded point) is a result, not a percentage;
    a series with more samples than t_s is as misaligned as one with fewer."""
    from llumverify.study.results import load_results

    def all_violate(doc) -> None:
        doc["aggregates"][0]["metrics"]["slo_violation_rate"]["mean"] = 1.0

    assert load_results(_corpus_results(tmp_path / "a", "share_in_percent", all_violate))["aggregates"]

    def longer(doc) -> None:
        series = doc["timeseries"][0]["series"]
        series["instances"] = series["t_s"] + [series["t_s"][-1] + 1.0]

    with pytest.raises(UserError, match=r"timeseries\[0\].series.instances has 14 samples, t_s 13"):
        load_results(_corpus_results(tmp_path / "b", "series_lengths", longer))
