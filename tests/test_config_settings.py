"""One front door for settings: every config field carries its Setting (help, bounds, option),
`simulate`'s options are generated from them, a value is checked by the same code whichever door
it comes through, and a `simulate` run is the one-point experiment an experiment file would run."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import pytest

import llumverify.cli as cli
from llumverify.cli.simulate import SETTING_OPTIONS, simulate
from llumverify.settings.config import SchedulerConfig, SettingError, SimConfig, settings_of
from llumverify.errors import UserError
from llumverify.study.experiment import Workload, load_experiment

# Every option `simulate` had before its options were generated (names and defaults must not change).
OPTIONS = {
    "--policy": None, "--instances": 16, "--rate": None, "--arrival": "poisson", "--cv": 1.0, "--lengths": None,
    "--trace": None, "--requests": None, "--rate-scale": 1.0, "--seed": 0, "--out": None, "--force": False,
    "--memory-budget": None, "--requests-format": "csv", "--format": "table",
    "--cost-config": None, "--slo-ttft": 10.0, "--slo-tpot": 0.2, "--slo-ttft-high": None, "--slo-tpot-high": None,
    "--report-interval": 0.0, "--step-reports": False, "--step-by-step": False, "--migrate-threshold": 3.0, "--migrate-select": "lcfs",
    "--migration-variant": "safe", "--prediction-error": 0.0, "--head-only-freeness": False,
    "--high-priority-frac": 0.0, "--stream": "llumverify", "--no-priorities": False, "--autoscale": False, "--min-instances": 1,
    "--max-instances": 16, "--fail": None, "--fail-rate": 0.0, "--on-failure": "fail", "--num-blocks": 851, "--engine": "vllm-0.2",
    "--preemption-loss": "recompute",
    "--gpu": "", "--model": "", "--tp": 1, "--dp": 1, "--expert-parallel": False, "--profile": None, "--step-cost": None, "--no-prefix-caching": False, "--no-async-scheduling": False,
    "--pd": "", "--pd-fallback": "local",
    # added with the vllm-v1 hardware inputs (issue 28)
    "--max-num-seqs": None, "--max-num-batched-tokens": None, "--max-model-len": None, "--gpu-memory-utilization": 0.9,
    "--cudagraph-mode": "full_and_piecewise", "--attention-backend": "auto", "--sampling": "greedy",
    "--quantization": "", "--kv-cache-dtype": "auto",  # fp8 weights / KV cache (sim/quantization.py)
    "--users": 0,  # closed-loop clients (issue 28: the public serving runs' inference-perf users)
}


def _main(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as info:
        cli.main(argv)
    out, err = capsys.readouterr()
    return info.value.code, out, err  # type: ignore[return-value]


def test_every_config_field_is_a_documented_setting() -> None:
    default = SimConfig()
    for cls in (SimConfig, *(type(getattr(default, f.name)) for f in dataclasses.fields(SimConfig)
                             if dataclasses.is_dataclass(getattr(default, f.name)))):
        documented = settings_of(cls)
        for f in dataclasses.fields(cls):
            if not dataclasses.is_dataclass(getattr(default, f.name, None)) and f.name != "step":
                assert f.name in documented and documented[f.name][0].help, f"{cls.__name__}.{f.name}"
    assert set(settings_of(Workload)) >= {"lengths", "trace", "rate", "cv", "requests", "high_priority_frac"}


def test_simulate_keeps_every_option_name_and_default() -> None:
    import click

    params = {p.opts[0]: p for p in simulate.params if p.opts[0].startswith("--")}
    assert set(params) == set(OPTIONS)
    ctx = click.Context(simulate)
    for flag, default in OPTIONS.items():
        if params[flag].multiple:  # --policy, --fail: none given unless repeated
            continue
        assert params[flag].get_default(ctx) == default, flag
    assert {s.flag for _, s, _, _ in SETTING_OPTIONS.values()} == set(OPTIONS) - {
        "--policy", "--seed", "--out", "--force", "--memory-budget", "--cost-config", "--requests-format", "--format"}


@pytest.mark.parametrize("value", ["nan", "inf", "-inf"])
def test_a_non_finite_threshold_is_rejected_at_every_door(value: str, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SettingError, match="SchedulerConfig.migrate_threshold must be a finite number"):
        SchedulerConfig(migrate_threshold=float(value)).validate()
    path = tmp_path / "exp.toml"
    path.write_text(f'[scheduler]\nmigrate_threshold = {value}\n[[workload]]\nlengths = "S"\nrate = 1.0\n')
    with pytest.raises(UserError, match=f"exp.toml: scheduler.migrate_threshold: must be a finite number, got {value}"):
        load_experiment(path)
    code, out, err = _main(["simulate", "--migrate-threshold", value, "--requests", "10"], capsys)
    assert code == 2 and out == ""
    assert err == f"llumverify: error: --migrate-threshold: must be a finite number, got {float(value)!r}\n"


@pytest.mark.parametrize("args, message", [
    (["--instances", "0"], "--instances: must be a positive integer up to 100,000, got 0"),
    (["--report-interval", "-1"], "--report-interval: must be a finite number >= 0, got -1.0"),
    (["--trace", "x.csv", "--lengths", "S"], "--lengths: cannot be combined with --trace"),
    (["--rate-scale", "2"], "--rate-scale: applies only to traces (use --rate for generated workloads)"),
    (["--cv", "2"], "--cv: a Poisson process has cv 1: set --arrival to gamma to vary cv"),
    (["--gpu", "H100", "--model", "Llama-3.1-8B", "--engine", "vllm-0.2"], "--engine: must be vllm-v1"),
    (["--gpu", "H100", "--model", "Qwen2-72B"], "Qwen2-72B does not fit on 1 × H100 at gpu_memory_utilization 0.9: "
                                                "-65.04 GiB left for the KV cache (it fits at TP 2)"),
    (["--pd", "1:1"], "ClusterConfig.pd 1:1 needs 2 instances, num_instances is 16"),
])
def test_command_line_errors_name_the_option(args: list[str], message: str, tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    if "x.csv" in args:
        (tmp_path / "x.csv").write_text("arrival_s,prompt_tokens,output_tokens\n0.0,10,5\n")
        args = [str(tmp_path / a) if a == "x.csv" else a for a in args]
    code, out, err = _main(["simulate", *args, "--requests", "10"], capsys)
    assert code == 2 and out == "" and err.count("\n") == 1 and message in err, err


def test_a_step_cost_source_without_engine_selects_vllm_v1(capsys: pytest.CaptureFixture[str]) -> None:
    """The paper's vllm-0.2 takes no --gpu/--model; typed without --engine they mean the V1 engine."""
    code, out, err = _main(["simulate", "--gpu", "H100", "--model", "Llama-3.1-8B", "--requests", "10",
                            "--policy", "least-loaded"], capsys)
    assert code == 0 and "engine vllm-v1 | H100 / Llama-3.1-8B" in out, err
    assert "engine vllm-0.2" in _main(["simulate", "--requests", "10", "--policy", "least-loaded"], capsys)[1]


def test_a_simulate_run_is_the_one_point_experiment(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from llumverify.study.sweep import run_experiment

    args = ["--policy", "least-loaded", "--policy", "llumnix", "--requests", "80", "--rate", "6", "--instances", "3",
            "--seed", "4", "--migrate-threshold", "10", "--high-priority-frac", "0.2", "--arrival", "gamma",
            "--cv", "2"]
    assert _main(["simulate", *args, "--out", str(tmp_path / "cli")], capsys)[0] == 0
    exp = tmp_path / "exp.toml"
    exp.write_text('policies = ["least-loaded", "llumnix"]\nseeds = [4]\nrequests = 80\n'
                   "[cluster]\nnum_instances = 3\n[scheduler]\nmigrate_threshold = 10.0\n[failures]\nseed = 4\n"
                   '[[workload]]\nlengths = "sharegpt"\nrate = 6.0\nhigh_priority_frac = 0.2\n'
                   'arrival = "gamma"\ncv = 2.0\n')
    folder = run_experiment(exp, tmp_path / "sweep", jobs=1, progress=False)
    cli_summaries = json.loads((tmp_path / "cli" / "summary.json").read_text())["policies"]
    rows = json.loads((folder / "results.json").read_text())["rows"]
    for row in rows:
        summary = cli_summaries[row["policy"]]
        assert all(row[k] == v or (isinstance(v, float) and math.isnan(v)) for k, v in summary.items()), row["policy"]


def test_step_time_costs_are_refused_beside_hardware_step_costs(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    """With --gpu/--model the step costs time every step: a --cost-config decode_ns would be ignored."""
    cost = tmp_path / "cost.toml"
    cost.write_text("decode_ns = 30000000\n")
    code, _, err = _main(["simulate", "--cost-config", str(cost), "--gpu", "H100", "--model", "Llama-3.1-8B",
                          "--requests", "10"], capsys)
    assert code == 2 and "cost.decode_ns: times steps by the paper's A10 fit" in err
    assert _main(["simulate", "--cost-config", str(cost), "--engine", "vllm-v1", "--requests", "10",
                  "--policy", "least-loaded"], capsys)[0] == 0  # no hardware: vllm-v1 times steps by the cost config
