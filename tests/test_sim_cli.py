"""`llumverify simulate` as a user sees it: the default run, result files, one-line errors."""

from __future__ import annotations

import json

import pytest

import llumverify.cli as cli
from llumverify.cli import simulate as command
from llumverify.sim.audit import AuditError
from llumverify.sim.request_output import COLUMNS as CSV_COLUMNS


def _main(argv: list[str], capsys) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exit_info:
        cli.main(argv)
    out, err = capsys.readouterr()
    return exit_info.value.code, out, err


def test_default_run_compares_every_policy(capsys):
    code, out, err = _main(["simulate", "--requests", "500"], capsys)  # the default's settings, fewer requests
    assert code == 0, err
    assert all(p in out for p in ("round-robin", "least-loaded", "llumnix")) and "16 instances" in out
    assert out.startswith(f"500 requests, poisson at {command.DEFAULT_RATE:g} req/s, sharegpt lengths, seed 0; "
                          "SLO TTFT <= 10 s and TPOT <= 200 ms\n")  # the targets "SLO attainment" counts against


@pytest.mark.slow
def test_default_run_shows_why_balancing_and_migration_matter(capsys):
    """The default run (module doc of llumverify/cli/simulate.py): round-robin's imbalance
    queues requests past the SLO, least-loaded and Llumnix keep P99 TTFT under 1 s, and Llumnix's
    migrations cut preemptions."""
    code, out, err = _main(["simulate", "--format", "json"], capsys)
    assert code == 0, err
    doc = json.loads(out)
    rr, ll, lx = (doc["policies"][p] for p in ("round-robin", "least-loaded", "llumnix"))
    assert doc["run"]["requests"] == command.DEFAULT_REQUESTS
    assert rr["slo_attainment_pct"] < 90 and rr["ttft_p99_ms"] > 10_000
    assert min(ll["slo_attainment_pct"], lx["slo_attainment_pct"]) > 99.9
    assert max(ll["ttft_p99_ms"], lx["ttft_p99_ms"]) < 1000
    assert lx["migrations"] > 0 and 5 * lx["preemptions"] < ll["preemptions"]


def test_out_dir_files_are_byte_identical_for_the_same_seed(tmp_path, capsys):
    args = ["simulate", "--requests", "300", "--seed", "7", "--rate", "5"]
    assert _main([*args, "--out", str(tmp_path / "a")], capsys)[0] == 0
    assert _main([*args, "--out", str(tmp_path / "b")], capsys)[0] == 0
    for name in ("requests.csv", "summary.json"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    lines = (tmp_path / "a" / "requests.csv").read_text().splitlines()
    assert lines[0] == ",".join(CSV_COLUMNS) and len(lines) == 1 + 3 * 300
    summary = json.loads((tmp_path / "a" / "summary.json").read_text())
    assert set(summary["policies"]) == {"round-robin", "least-loaded", "llumnix"}
    assert {"ttft_p99_s", "tpot_mean_s", "e2e_p50_s", "queue_mean_s", "slo_violation_rate", "preemptions",
            "preemption_loss_s", "kv_util_mean", "kv_util_p99", "fragmentation", "throughput_rps",
            "makespan_s"} <= set(summary["policies"]["least-loaded"])


def test_rejected_rows_have_a_reason_and_empty_times(tmp_path, capsys):
    trace = tmp_path / "t.csv"
    trace.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.0000000,14050,3\n"
                     "2023-11-16 18:15:47.0000000,100,3\n")
    out = tmp_path / "out"  # a new folder: tmp_path holds the trace, and a non-empty --out needs --force
    assert _main(["simulate", "--trace", str(trace), "--policy", "least-loaded", "--out", str(out)], capsys)[0] == 0
    rows = (out / "requests.csv").read_text().splitlines()
    assert rows[1] == "0,least-loaded,0.0,14050,3,0,,,,0,0,rejected:prompt_exceeds_capacity"
    assert rows[2].endswith(",finished")


@pytest.mark.parametrize("args, option", [
    (["--policy", "nope"], "--policy"), (["--rate", "0"], "--rate"), (["--rate", "-2"], "--rate"),
    (["--instances", "0"], "--instances"), (["--cv", "-1"], "--cv"), (["--requests", "0"], "--requests"),
    (["--arrival", "uniform"], "--arrival"), (["--lengths", "XXL"], "--lengths"), (["--trace", "/no/such.csv"], "/no/such.csv"),
    (["--slo-ttft", "0"], "--slo-ttft"), (["--report-interval", "-1"], "--report-interval"),
    (["--rate-scale", "2"], "--rate-scale"), (["--cost-config", "/no/such.toml"], "--cost-config"),
    (["--slo-ttft-high", "0"], "--slo-ttft-high"), (["--slo-tpot-high", "-1"], "--slo-tpot-high"),
    (["--prediction-error", "-1"], "--prediction-error"),
])
def test_bad_input_is_one_line_naming_the_option_and_exit_2(capsys, args, option):
    code, out, err = _main(["simulate", *args], capsys)
    assert code == 2
    assert err.count("\n") == 1 and option in err and "Traceback" not in err


def test_an_audit_failure_is_one_line_and_exit_3(capsys, monkeypatch):
    def broken(*_args, **_kwargs):
        raise AuditError("blocks", "instance 0: free -1")
    monkeypatch.setattr(command, "run_policy", broken)
    code, _, err = _main(["simulate", "--requests", "10"], capsys)
    assert code == 3 and err.count("\n") == 1 and "audit 'blocks' failed" in err


def test_class_targets_and_predicted_policy_from_the_command_line(tmp_path, capsys):
    args = ["simulate", "--requests", "300", "--rate", "5", "--high-priority-frac", "0.3", "--policy", "predicted",
            "--prediction-error", "0.5", "--out", str(tmp_path)]
    assert _main([*args, "--slo-ttft-high", "1e-6"], capsys)[0] == 0  # no first token comes within 1 us
    s = json.loads((tmp_path / "summary.json").read_text())["policies"]["predicted"]
    assert s["slo_violation_rate_high"] == 1.0 and s["slo_violation_rate_normal"] < 1.0
    assert s["finished"] == 300


def test_a_negated_flag_takes_its_positive_spelling_too(capsys):
    """--async-scheduling/--no-async-scheduling as validate and calibrate spell it: the positive one is the default
    (the same numbers), the negative one changes the run, and either on an engine without it is refused."""
    base = ["simulate", "--engine", "vllm-v1", "--policy", "least-loaded", "--requests", "60", "--instances", "2",
            "--format", "json"]
    runs = {flags: _main(base + list(flags), capsys) for flags in
            ((), ("--async-scheduling", "--prefix-caching"), ("--no-async-scheduling",))}
    assert all(code == 0 for code, _, _ in runs.values())
    default, positive, off = (json.loads(out)["policies"] for _, out, _ in runs.values())
    assert positive == default and off != default
    code, out, err = _main(["simulate", "--prefix-caching", "--requests", "20", "--instances", "2"], capsys)
    assert code == 2 and err.startswith("llumverify: error: --prefix-caching/--no-prefix-caching: applies only to an "
                                        "engine with prefix caching (vllm-v1); this run's engine, vllm-0.2, has none")
