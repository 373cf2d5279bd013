"""Steps launched without a CUDA graph (sim/graphless.py): the per-layer CPU floor is the median of its published
runs; under full_decode_only a step with a prefill chunk lasts at least layers x that floor, a decode step keeps its
graph-replayed time; the mode is a setting of every front door, refused without a step-cost source, and NONE is
refused by validate."""

from __future__ import annotations

import dataclasses
import json
import statistics
from pathlib import Path

import pytest

from llumverify.cli import main
from llumverify.errors import UserError
from llumverify.settings.config import HardwareConfig
from llumverify.sim.engine_profile import step_cost
from llumverify.sim.graphless import GRAPHLESS_LAYER_NS, PUBLISHED, graphless_step_ns
from llumverify.sim.stepcost import StepCost


def test_the_floor_per_layer_is_the_median_of_the_published_cpu_bound_runs() -> None:
    per_layer = [tpot * 1e6 / layers for _, _, layers, _, tpot, graphs in PUBLISHED]
    assert all(tpot > 2.5 * graphs for *_, tpot, graphs in PUBLISHED)  # CPU-bound: far above the graphed step
    assert GRAPHLESS_LAYER_NS == round(statistics.median(per_layer), -3) == 717_000
    assert graphless_step_ns("full_decode_only", 80) == 80 * 717_000 and graphless_step_ns("full_and_piecewise", 80) == 0


def test_only_a_step_with_a_prefill_chunk_is_held_to_the_floor() -> None:
    cost = StepCost(fixed_ns=1_000_000, linear=((1, 1000), (1 << 20, 1 << 30)), per_seq=((1, 0), (1 << 20, 0)),
                    graphless_step_ns=50_000_000)
    cost.validate()
    bare = dataclasses.replace(cost, graphless_step_ns=0)
    assert cost.step_ns((), 8, 1000) == bare.step_ns((), 8, 1000) < 50_000_000  # decode: graph-replayed
    assert cost.step_ns([(16, 0)], 8, 1000) == 50_000_000 > bare.step_ns([(16, 0)], 8, 1000)
    big = [(60_000, 0)]  # a chunk whose GPU time exceeds the floor keeps its own time
    assert cost.step_ns(big, 0, 0) == bare.step_ns(big, 0, 0) > 50_000_000
    for bad in (-1, 2**63 - 1):  # a step of centuries never ends: the samplers tick each simulated second
        with pytest.raises(UserError, match=r"graphless_step_ns must be an integer in \[0, 60,000,000,000\]"):
            dataclasses.replace(cost, graphless_step_ns=bad).validate()
    with pytest.raises(UserError, match=r"linear: every x and ns must be an integer in \[0, 3,600,000,000,000\]"):
        dataclasses.replace(cost, linear=((1, 1000), (2048, 9 * 10**18))).validate()


def test_only_the_mode_sets_the_floor_for_first_principles_and_a_step_cost_file(tmp_path: Path) -> None:
    hw = HardwareConfig(gpu="H100", model="Llama-3-70B", tp=4, cudagraph_mode="full_decode_only")
    assert step_cost(hw).graphless_step_ns == 80 * GRAPHLESS_LAYER_NS
    assert step_cost(dataclasses.replace(hw, cudagraph_mode="full_and_piecewise")).graphless_step_ns == 0
    path = tmp_path / "c.toml"
    base = dataclasses.replace(step_cost(dataclasses.replace(hw, cudagraph_mode="full_and_piecewise", tp=1,
                                                             model="Llama-3.1-8B")), graphless_step_ns=123)
    path.write_text(base.to_toml())
    from_file = HardwareConfig(cost_file=str(path))
    assert step_cost(from_file).graphless_step_ns == 0  # a file's own floor is not taken
    floored = step_cost(dataclasses.replace(from_file, cudagraph_mode="full_decode_only"))
    assert floored.graphless_step_ns == 32 * GRAPHLESS_LAYER_NS and floored.source.count("lasts at least") == 1
    nameless = tmp_path / "nameless.toml"
    nameless.write_text(dataclasses.replace(base, model="").to_toml())
    with pytest.raises(UserError, match="--cudagraph-mode full_decode_only needs the model's layer count: give --model"):
        step_cost(HardwareConfig(cost_file=str(nameless), cudagraph_mode="full_decode_only"))


def test_a_migrations_slow_down_does_not_stretch_the_cpu_floor() -> None:
    cost = StepCost(fixed_ns=1_000_000, linear=((1, 1000), (1 << 20, 1 << 30)), per_seq=((1, 0), (1 << 20, 0)),
                    graphless_step_ns=50_000_000)
    assert cost.step_ns([(16, 0)], 8, 1000, slow_ppm=500_000) == 50_000_000
    assert cost.step_ns((), 8, 1000, slow_ppm=500_000) > cost.step_ns((), 8, 1000)


def _run(args: list[str]) -> int:
    with pytest.raises(SystemExit) as exc:
        main(args)
    return exc.value.code


def test_simulate_needs_a_step_cost_source_for_the_mode(capsys) -> None:
    assert _run(["simulate", "--cudagraph-mode", "full_decode_only", "--requests", "10"]) == 2
    assert "--cudagraph-mode: applies to step costs, and none are given" in capsys.readouterr().err
    assert _run(["simulate", "--cudagraph-mode", "piecewise", "--requests", "10"]) == 2


def test_calibrate_fits_under_the_mode_and_writes_no_floor(tmp_path: Path) -> None:
    """The fit sees the run's floor; the file it writes carries none (the mode of whoever uses it decides)."""
    from llumverify.sim.stepcost import load_step_cost

    path = tmp_path / "m.csv"
    path.write_text("start_time_ms,ttft_ms,latency_ms,input_num_tokens,output_num_tokens,conversation_id\n"
                    + "".join(f"{1000 * i},30,230,200,20,c{i}\n" for i in range(12)))
    out = tmp_path / "c.toml"
    assert _run(["calibrate", "--run", str(path), "--gpu", "H100", "--model", "Llama-3.1-8B",
                 "--cudagraph-mode", "full_decode_only", "--out", str(out)]) == 0
    written = load_step_cost(out)
    assert written.graphless_step_ns == 0 and "lasts at least" not in written.source


def test_validate_prices_a_multiturn_csv_under_the_mode_and_refuses_none(tmp_path: Path, capsys) -> None:
    """Eight one-turn requests, 1 s apart: every TTFT is one prefill step, which the floor lengthens to 32 x 0.717 ms."""
    path = tmp_path / "m.csv"
    path.write_text("start_time_ms,ttft_ms,latency_ms,input_num_tokens,output_num_tokens,conversation_id\n"
                    + "".join(f"{1000 * i},30,230,200,20,c{i}\n" for i in range(8)))
    ttft = {}
    for mode in ("full_and_piecewise", "full_decode_only"):
        out = tmp_path / mode
        assert _run(["validate", str(path), "--gpu", "H100", "--model", "Llama-3.1-8B", "--client-ms", "0", "--client-us-per-token", "0",
                     "--cudagraph-mode", mode, "--out", str(out)]) == 0
        ttft[mode] = json.loads((out / "validation.json").read_text())["ttft"]["sim_mean_s"]
    assert ttft["full_and_piecewise"] < 0.02 < 32 * GRAPHLESS_LAYER_NS / 1e9 <= ttft["full_decode_only"]
    for graphed in ("PIECEWISE", "full"):  # vLLM's other modes with a graph for every step: priced as the default
        out = tmp_path / graphed
        assert _run(["validate", str(path), "--gpu", "H100", "--model", "Llama-3.1-8B", "--client-ms", "0", "--client-us-per-token", "0",
                     "--cudagraph-mode", graphed, "--out", str(out)]) == 0
        assert json.loads((out / "validation.json").read_text())["ttft"]["sim_mean_s"] == ttft["full_and_piecewise"]
    assert _run(["validate", str(path), "--gpu", "H100", "--model", "Llama-3.1-8B", "--cudagraph-mode", "none"]) == 2
    assert "cudagraph_mode NONE: no CUDA graph for any step" in capsys.readouterr().err


def test_a_run_folder_recording_full_decode_only_is_priced_with_the_floor() -> None:
    from llumverify.validation.run_hardware import run_hardware, source_for_run

    meta = {"model": "meta-llama/Llama-3.1-8B", "hardware": {"device_name": "NVIDIA H100 80GB HBM3"},
            "resolved_config": {"compilation_config": {"cudagraph_mode": [2, 0]}}}
    hw = source_for_run(HardwareConfig(gpu="H100", model="Llama-3.1-8B"), run_hardware(meta, "m.json"), False, "m.json")
    assert hw.cudagraph_mode == "full_decode_only" and step_cost(hw).graphless_step_ns == 32 * GRAPHLESS_LAYER_NS
