"""The measured error `simulate` prints (sim/fidelity.py): every kind of run gets a line, and each
line's numbers are what the committed validation reports measured."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from llumverify.settings.config import CostConfig, EngineConfig, HardwareConfig, SimConfig
from llumverify.sim import engines
from llumverify.sim.fidelity import measured_error
from llumverify.sim.stepcost import from_cost_config

ROOT = Path(__file__).resolve().parent.parent
RUNS = json.loads((ROOT / "reports/validation/public-runs/results.json").read_text())
SERVING_DOC = json.loads((ROOT / "reports/validation/public-serving/results.json").read_text())
SERVED = SERVING_DOC["runs"]
SERVING = [r for r in SERVED if r["role"] == "validation"]
TP8 = json.loads((ROOT / "reports/validation/public-bench-results/results.json").read_text())
ROCM = json.loads((ROOT / "reports/validation/rocm-mi300x/results.json").read_text())
B200 = json.loads((ROOT / "reports/validation/inferencex-b200/results.json").read_text())


def line(generation: str = "vllm-v1", **hardware: object) -> str:
    return measured_error(SimConfig(engine=EngineConfig(generation=generation), hardware=HardwareConfig(**hardware)))


def test_every_engine_and_source_gets_a_line(tmp_path) -> None:
    cost = tmp_path / "c.toml"
    cost.write_text(dataclasses.replace(from_cost_config(CostConfig()), error="E2E +2 % on my run").to_toml())
    sources = [{}, {"profile": "p"}, {"cost_file": str(cost)}, {"gpu": "H100", "model": "Llama-3.1-8B"},
               {"gpu": "MI300X", "model": "Mixtral-8x7B"}, {"gpu": "B200", "model": "Qwen3-30B-A3B"}]
    for name in engines.ENGINES:
        for hw in sources:
            assert line(name, **hw)
    assert line(**sources[2]) == "as fitted by `llumverify calibrate`: E2E +2 % on my run"
    assert line("vllm-0.2", **sources[3]).startswith("none: the paper's engine")  # no step costs: its own cost model
    assert line().startswith("the paper's A10 / LLaMA-7B cost fit in the V1 step form")
    assert line(gpu="MI300X", model="Llama-3.1-8B").startswith("AMD's MI300X TP8 fp8 latency tables")
    assert line(gpu="H100", model="Mixtral-8x7B").startswith("MoE:")
    assert line(gpu="A100-40GB", model="Llama-2-70B").startswith("dense:")
    assert line(gpu="A100", model="Llama-2-70B").startswith("A100-80GB: 4 held-out")  # "A100" is the 80 GB part
    assert line(gpu="H100", model="Llama-3.1-8B").endswith("h200-aggregates)")
    assert line(gpu="RTX 5090", model="Llama-3.1-8B").startswith("no run on RTX 5090 measured; on other GPUs: ")


def test_every_gpu_said_to_be_measured_is_in_a_validation_report() -> None:
    from llumverify.sim.catalog import get_gpu
    from llumverify.sim.fidelity import measured_gpus

    reports = "".join((ROOT / "reports/validation" / f).read_text() for f in ("index.md", "vllm-pr-moe/README.md",
                                                                               "public-serving/table.md",
                                                                               "h200-aggregates/table.md",
                                                                               "inferencex-b200/table.md"))
    for name in measured_gpus():
        assert get_gpu(name).name == name and name in reports, name


def _errors(rows: list[dict], keys: tuple[str, ...]) -> np.ndarray:
    return np.array([r["errors"][k] for r in rows for k in keys])


def test_the_profile_line_is_what_the_public_runs_measured() -> None:
    rows = [r for r in RUNS if r["source"] == "profile"]
    assert len({r["run"] for r in rows}) == 4 and {r["tp"] for r in rows} == {1, 2} and any(r["ep"] for r in rows)
    assert np.abs(_errors(rows, ("e2e_mean", "e2e_p90", "tpot_mean", "tpot_p90"))).max() <= 0.06
    assert np.abs(_errors(rows, ("ttft_mean", "ttft_p90"))).max() <= 0.17
    assert "E2E and TPOT within 6 %, TTFT 17 % (mean, P90) on 4 vLLM 0.19 runs" in line(profile="p")


def test_the_first_principles_lines_are_what_the_public_runs_and_serving_runs_measured() -> None:
    dense = [r for r in RUNS if r["source"] == "first principles" and not r["ep"]]
    assert len(dense) == 3 and {r["tp"] for r in dense} == {1, 2}
    assert np.abs(_errors(dense, ("e2e_mean", "e2e_p90", "tpot_mean", "tpot_p90"))).max() <= 0.10
    assert np.abs(_errors(dense, ("ttft_mean", "ttft_p90"))).max() <= 0.09
    h100 = [r for r in SERVING if "mixtral" not in r["run"] and r["gpu"] == "H100"]
    assert len(h100) == 19
    assert round(100 * np.median([abs(r["error"]["e2e_mean"]) for r in h100])) == 4
    assert round(100 * np.median([r["error"]["ttft_mean"] for r in h100])) == 3
    small = [r["error"]["e2e_mean"] for r in h100 if r["tp"] <= 2 and ("-8b-" in r["run"] or "-14b-" in r["run"])]
    large = [r["error"]["e2e_mean"] for r in h100 if "-34b-" in r["run"] or "-70b-" in r["run"]]
    assert len(small) + len(large) == 19
    assert [(round(100 * min(e)), round(100 * max(e))) for e in (small, large)] == [(-15, 0), (1, 7)]
    # the line's "each sampling as its checkpoint says": the top-p runs are the ones it names, priced with the sort
    assert {r["run"].split("-tp")[0].split("-", 1)[1] for r in h100 if r["sampling"] == "top-p"} == {
        "llama-3-1-8b", "qwen3-14b", "llama-2-70b"}
    assert SERVING_DOC["topp_sort_ns"] == SERVING_DOC["topp_sort_ns_fit_on_calibration"] > 0
    assert ("E2E and TPOT within 10 %, TTFT 9 % on 3 vLLM 0.19 runs (TP1-2); on 19 held-out vLLM 0.15.1 H100 runs, "
            "each sampling as its checkpoint's generation_config.json says (`--sampling top-p` for Llama-3.1-Instruct, "
            "Qwen3 and Llama-2: the sampler's sort, its constant fitted on 13 other runs), E2E 4 % median (8-14B at "
            "TP1-2 -15 to 0 %, 34-70B at TP2-4 +1 to +7 %), client TTFT +3 % (median); H200 (70B fp8, vLLM 0.14.1): "
            "decode step 1-2 % low") in line(gpu="H100", model="Llama-3.1-8B")
    h200 = json.loads((ROOT / "reports/validation/h200-aggregates/results.json").read_text())
    assert len(h200) == 8 and (round(-100 * max(r["error"] for r in h200)), round(-100 * min(r["error"] for r in h200))) == (1, 2)

    moe = [r for r in RUNS if r["source"] == "first principles" and r["ep"]]
    assert len(moe) == 1 and round(100 * moe[0]["errors"]["e2e_mean"]) == -2
    mixtral = np.array([r["error"]["e2e_mean"] for r in SERVING if "mixtral" in r["run"]])
    assert len(mixtral) == 13 and (round(100 * mixtral.min()), round(100 * mixtral.max())) == (-4, 5)
    scout = np.array([r["error"]["e2e_mean"] for r in SERVED if "scout" in r["run"]])  # the calibration file's
    assert len(scout) == 4 and (round(100 * scout.min()), round(100 * scout.max())) == (-12, 4)
    assert ("E2E -2 % on a vLLM 0.19 DP2+EP run; on vLLM 0.15.1 H100 runs -12 to +4 % (4 Llama-4-Scout FP8 TP2, "
            "calibration runs) and -4 to +5 % (13 Mixtral, held out)" in line(gpu="H100", model="Mixtral-8x7B"))


@pytest.mark.parametrize("gpu, models", [
    ("A100-80GB", "(Qwen3-14B and Llama-3.1-8B TP1, CodeLlama-34B TP2, Llama-2-70B TP4; light load)"),
    ("L40S", "(Qwen3-14B and Llama-3.1-8B TP1, light load)"),
])
def test_the_a100_80gb_and_l40s_lines_are_what_their_serving_runs_measured(gpu: str, models: str) -> None:
    """Their held-out runs' E2E and client TTFT ranges, first principles, each run sampling as its checkpoint says."""
    runs = [r for r in SERVING if r["gpu"] == gpu]
    e2e, ttft = ([round(100 * f(v)) for f in (min, max)] for v in (
        [r["error"]["e2e_mean"] for r in runs], [r["error"]["ttft_mean"] for r in runs]))
    text = line(gpu=gpu, model="Llama-3.1-8B")
    assert text.startswith(f"{gpu}: {len(runs)} held-out vLLM 0.15.1 serving runs {models}: "
                           f"E2E {e2e[0]} to {e2e[1]} %, client TTFT {ttft[0]} to {ttft[1]} %")
    greedy = sorted(r["run"] for r in runs if r["sampling"] == "greedy")
    assert greedy == (["40-codellama-34b-tp2-general-lite-2"] if gpu == "A100-80GB" else [])
    assert ("all but CodeLlama with `--sampling top-p`" if greedy else "both with `--sampling top-p`") in text


@pytest.mark.parametrize("fmt", ["table", "json"])
def test_simulate_prints_the_line(fmt: str, capsys) -> None:
    from llumverify.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["simulate", "--requests", "20", "--instances", "2", "--format", fmt])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    want = line("vllm-0.2")
    assert (json.loads(out)["run"]["measured_error"] == want if fmt == "json"
            else "measured error: none: the paper's engine" in out)


def test_the_amd_line_is_what_amd_s_latency_tables_measured() -> None:
    """Every distinct table: all too fast; its median APE, batch-1 and batch-128 errors as the line says."""
    assert len(ROCM) == 13 and all(r["rows"] == 32 and r["median_signed"] < 0 for r in ROCM)
    assert (round(100 * min(r["median_ape"] for r in ROCM)), round(100 * max(r["median_ape"] for r in ROCM))) == (30, 37)
    v1 = [r["median_ape"] for r in ROCM if r["engine"] == "V1"]
    assert len(v1) == 3 and 0.305 <= min(v1) and max(v1) < 0.32
    for batch, (low, high) in ((1, (19, 34)), (128, (41, 56))):
        errors = [-r[f"signed_{m}_b{batch}_p128"] for r in ROCM for m in ("70b", "405b")]
        assert (round(100 * min(errors)), round(100 * max(errors))) == (low, high)
    assert ("all too fast, median APE 30-37 % (31-32 % on the V1 ones), batch 1 19-34 %, batch 128 41-56 %"
            in line(gpu="MI300X", model="Llama-3.1-8B"))


def test_the_tp8_line_is_what_the_tp8_runs_measured() -> None:
    """Both NVIDIA TP8 measurements: the A100 run's TPOT and the light-load Mixtral-8x22B TP8 runs' ITL."""
    cold = next(r for r in TP8 if r["cold_prefix_cache"])
    assert round(-100 * cold["errors"]["tpot_mean"]) == 19
    x22b = [r["error"]["e2e_mean"] for r in SERVED if "mixtral-8x22b-tp8" in r["run"]]
    assert len(x22b) == 4 and (round(100 * min(x22b)), round(100 * max(x22b))) == (-4, -3)
    text = line(gpu="H100", model="Mixtral-8x22B", tp=8)
    assert text.startswith("TP 8 and over: too fast at light load on Llama-3.3-70B on A100-40GB (vLLM 0.8.3: TPOT -19 %)")
    assert "4 Mixtral-8x22B H100 runs at 1-20 req/s (vLLM 0.15.1) E2E -4 to -3 %" in text
    dense = [abs(r["error"]["e2e_mean"]) for r in SERVED
             if r["gpu"] == "H100" and "mixtral" not in r["run"] and "scout" not in r["run"]]
    assert (sum(e <= 0.15 for e in dense), len(dense)) == (27, 28)
    assert "E2E within 15 % on 27 of 28 H100 serving runs" in text
    assert line(gpu="H100", model="Mixtral-8x22B", tp=4).startswith("MoE:")
    assert line(gpu="MI300X", model="Llama-3-70B", tp=8).startswith("AMD's")  # its own TP8 tables


def test_the_b200_line_is_what_the_b200_sweep_measured() -> None:
    """The 16-client runs at TP 1-8 and the runs with more clients in TPOT and mean TTFT, the a + b/TP split and
    the prefix-cache hits as the lines quote them."""
    runs = B200["runs"]
    assert len(runs) == 15 and len(B200["not_replayed"]["ran while another experiment ran, sweep.log says"]) == 8
    sixteen = sorted((r for r in runs if r["clients"] == 16), key=lambda r: r["tp"])
    assert [r["tp"] for r in sixteen] == [1, 2, 4, 8] and all(r["complete"] for r in sixteen)
    assert [round(100 * r["errors"]["tpot_mean"]) for r in sixteen] == [-6, -2, -3, -8]
    assert [round(100 * r["errors"]["ttft_mean"]) for r in sixteen] == [-6, -5, -5, -10]
    more = {tp: [-100 * r["errors"]["tpot_mean"] for r in runs if r["tp"] == tp and r["clients"] > 16] for tp in (1, 8)}
    assert [(round(min(v)), round(max(v))) for v in more.values()] == [(15, 29), (13, 16)]
    assert [round(100 * r["errors"]["tpot_mean"]) for r in runs if r["tp"] in (2, 4) and r["clients"] == 512] == [-9, -10]
    ttft = [-100 * r["errors"][k] for r in runs if r["clients"] > 16 for k in ("ttft_mean", "ttft_p90")]
    assert (round(min(ttft)), round(max(ttft))) == (10, 31)
    short = [100 * (1 - r["priced_decode_ms"] / r["server_steps"]["decode_ms"]) for r in runs
             if r["clients"] > 16 and r["measured_hit"] > 0.5]  # the report's decode steps with more clients
    assert (round(min(short)), round(max(short))) == (15, 44)
    (ra, rb), (sa, sb) = B200["tpot_tp_fit_ms"]["real"], B200["tpot_tp_fit_ms"]["sim"]
    assert (round(ra, 1), round(rb, 1), round(sa, 1), round(sb, 1)) == (7.9, 9.7, 7.5, 9.1)
    low = [-100 * r["errors"]["ttft_mean"] for r in sixteen]  # the graphless line's "mean TTFT 5-10 % low"
    assert (round(min(low)), round(max(low))) == (5, 10)
    admit = [r["server_steps"]["admit_ms"] for r in sixteen]
    assert (round(min(admit)), round(max(admit))) == (50, 59)
    held = [r for r in runs if r["measured_hit"] > 0.5]  # the server's cache did not thrash
    assert len(held) == 13 and max(abs(r["sim_hit"] - r["measured_hit"]) for r in held) < 0.02
    text = line(gpu="B200", model="nvidia/Llama-3.3-70B-Instruct-FP4", tp=8)
    assert text.startswith("B200 NVFP4: one vLLM 0.15.0 multi-turn sweep") and text.endswith("(reports/validation/inferencex-b200)")
    assert line(gpu="B200", model="Llama-3-70B", tp=8).startswith("B200 in 16 or 8 bits: not measured")
    assert ("at 16 clients TPOT -6, -2, -3, -8 % and mean TTFT -6, -5, -5, -10 % at TP1, 2, 4, 8; with more "
            "clients all too fast: TPOT at TP1 15-29 %, at TP2 and TP4 with 512 clients 9-10 %, at TP8 13-16 %, TTFT "
            "10-31 %, the priced decode step with 32-512 sequences 15-44 % short") in text
    assert "7.5 + 9.1/TP simulated" in text
    assert "TPOT at 16 clients is -8 % at TP8 and 13-16 % too fast" in line(gpu="H100", model="Mixtral-8x22B", tp=8)
    tpot = [-100 * r["errors"]["tpot_mean"] for r in runs]
    assert ([round(-x) for x in tpot if x < 9] == [-6, -2, -3, -8]  # the 16-client runs
            and (round(min(x for x in tpot if x > 9)), round(max(tpot))) == (9, 29))
    assert "(TPOT at 16 clients -2 to -8 %; with more clients 9-29 % too fast)" in line(gpu="B200", model="Llama-3-70B", tp=8)


def test_a_run_without_graphs_for_its_prefill_steps_adds_the_floors_basis_to_any_line(tmp_path) -> None:
    """Whatever case the run matches (dense H100, TP8, a step-cost file), full_decode_only appends the floor's
    basis with the per-layer time the code uses."""
    from llumverify.sim.graphless import GRAPHLESS_LAYER_NS

    cost = tmp_path / "c.toml"
    cost.write_text(dataclasses.replace(from_cost_config(CostConfig()), model="Llama-3.1-8B").to_toml())
    clause = f"; steps with a prefill chunk without CUDA graphs: a CPU floor of {GRAPHLESS_LAYER_NS / 1e6:.3f} ms a layer"
    for hardware in ({"gpu": "H100", "model": "Llama-3-70B", "tp": 4}, {"gpu": "H100", "model": "Llama-3-70B", "tp": 8},
                     {"cost_file": str(cost)}):
        plain, graphless = line(**hardware), line(**hardware, cudagraph_mode="full_decode_only")
        assert graphless.startswith(plain) and clause in graphless and "mean TTFT 5-10 % low" in graphless
        assert "a step admitting one request at 16 clients at 50-59 ms against the 57.4 ms priced" in graphless

def test_an_fp8_cache_read_by_the_fa2_kernels_adds_the_slowdowns_basis() -> None:
    """flashinfer-fa2 with an fp8 cache appends the slowdown the code uses and its bounds; with a 16-bit cache, whose
    price it does not change, nothing."""
    from llumverify.sim.kv_dequant import DEQUANT_RATIO

    hardware = {"gpu": "B200", "model": "nvidia/Llama-3.3-70B-Instruct-FP4", "tp": 8}
    plain, fa2 = line(**hardware, kv_cache_dtype="fp8"), line(**hardware, kv_cache_dtype="fp8",
                                                               attention_backend="flashinfer-fa2")
    assert fa2.startswith(plain) and f"at {DEQUANT_RATIO:.3f}x their 16-bit-cache time" in fa2 and "0.6.13" in fa2
    assert line(**hardware, kv_cache_dtype="bf16", attention_backend="flashinfer-fa2") == line(**hardware,
                                                                                               kv_cache_dtype="bf16")


def test_the_ci_latency_readme_is_what_its_rows_price_to(tmp_path) -> None:
    """reports/validation/vllm-ci-latency: each signed error and median its README prints is what
    `validate --static-batch` gives today, under both engine-term sets."""
    from llumverify.cli import main

    folder = ROOT / "reports/validation/vllm-ci-latency"
    readme = (folder / "README.md").read_text()
    for terms, label in ((), "default terms"), (("--engine-terms", "none"), "`none`"):
        out = tmp_path / label.strip("`").replace(" ", "-")
        with pytest.raises(SystemExit) as ended:
            main(["validate", "--static-batch", str(folder / "rows.csv"), *terms, "--out", str(out)])
        assert ended.value.code == 0
        result = json.loads((out / "validation.json").read_text())
        assert result["n_rows"] == 9 and not result["skipped"]
        for gpu in ("H200", "H100", "A100-80GB"):
            signed = [f"{100 * (r['sim_s'] / r['real_s'] - 1):+.1f} %".replace("-", "−")
                      for tp in (1, 4, 2) for r in result["rows"] if r["hardware"] == gpu and r["tp"] == tp]
            assert f"| {gpu}, {label} | {' | '.join(signed)} |" in readme
        assert f"all 9: {'**' if not terms else ''}{100 * result['median_ape']:.1f} %" in readme


def test_4_bit_runs_say_what_was_measured_of_their_format() -> None:
    """An int4 run on any GPU names the H100 int4 checks (too fast there), not the 16-bit H100 serving line;
    NVFP4 off B200 says it is unmeasured."""
    for hw in ({"gpu": "H100", "model": "Llama-3.1-8B-AWQ"}, {"gpu": "L40S", "model": "Llama-3.1-8B", "quantization": "int4"}):
        assert line(**hw).startswith("int4 (W4A16) weights: no serving run replayed")
    assert line(gpu="H100", model="nvidia/Llama-3.3-70B-Instruct-FP4", tp=4).startswith("NVFP4 weights off B200: not measured")
    assert line(gpu="H100", model="Llama-3.1-8B").startswith("dense:")
    assert line(gpu="B200", model="Qwen3-30B-A3B", quantization="nvfp4").startswith("NVFP4 mixture of experts: not measured")
    assert line(gpu="MI300X", model="Llama-3.1-8B", quantization="int4").startswith("AMD's")


def test_the_int4_gap_is_what_the_h100_static_batches_measure(tmp_path) -> None:
    """vLLM PR #23197's rows (reports/validation/vllm-pr-int4), zero engine terms: per batch size, how many
    points int4's signed error is above bf16's, and each format's range, as the int4 line and the README quote
    them."""
    from llumverify.cli import main

    rows = Path(__file__).resolve().parents[1] / "reports" / "validation" / "vllm-pr-int4" / "rows.csv"
    with pytest.raises(SystemExit) as exc:
        main(["validate", "--static-batch", str(rows), "--engine-terms", "none", "--out", str(tmp_path / "v")])
    assert exc.value.code == 0
    err = {(r["model"], r["batch"]): r["sim_s"] / r["real_s"] - 1
           for r in json.loads((tmp_path / "v" / "validation.json").read_text())["rows"]}
    gaps = [100 * (err[("Llama-3.1-8B-int4", b)] - err[("Llama-3.1-8B", b)]) for b in (1, 4, 8, 16)]
    quoted = f"int4's error is {round(min(gaps))} to {round(max(gaps)):+d} points from bf16's"

    def span(model: str) -> str:
        signed = [round(100 * err[(model, b)]) for b in (1, 4, 8, 16)]
        return f"{max(signed)} to {min(signed)} %"

    ranges = f"(int4 {span('Llama-3.1-8B-int4')}, bf16 {span('Llama-3.1-8B')}"
    assert quoted + " " + ranges in line(gpu="H100", model="Llama-3.1-8B-AWQ")
    readme = (rows.parent / "README.md").read_text()
    assert quoted in readme


def test_the_testbed_profile_s_error_is_what_fig11_compare_gives_on_the_committed_sweeps(capsys) -> None:
    """The testbed profile states its own error against the paper's Fig. 11: each factor pair (least-loaded /
    llumnix) is the one benchmarks/fig11_compare.py prints for the committed sweeps; the line holds only while the
    profile's fitted constants do, and only for the paper's engine with no step-cost source."""
    import re

    from conftest import benchmark_script
    from llumverify.sim.named_profiles import profile_config, profile_error

    fig11 = benchmark_script("fig11_compare")
    fig11.report(fig11.means([ROOT / "results/paper-sample-path/results.csv", ROOT / "results/testbed-traces/results.csv"]))
    factor = {(m.strip(), p): f for m, p, f in re.findall(r"^(\S+(?: \S+)?)\s+(least-loaded|llumnix)\s+\d+ points  "
                                                          r"median \|ln\| [\d.]+ = ([\d.]+)x", capsys.readouterr().out,
                                                          re.M)}
    cfg = profile_config("testbed")
    text = profile_error("testbed", cfg)
    for metric in ("mean decode", "mean prefill", "P99 prefill", "preemption loss"):
        assert f"{metric} {factor[metric, 'least-loaded']}x / {factor[metric, 'llumnix']}x" in text, metric
    assert "35 points" in text and "35 Fig. 11 points" not in text  # the count is the script's, stated once
    changed = dataclasses.replace(cfg, cost=dataclasses.replace(cfg.cost, decode_ns=cfg.cost.decode_ns + 1))
    assert profile_error("testbed", changed) == ("none for this run: the testbed profile's own error (against the "
                                                 "paper's Fig. 11) holds with every setting it sets, and this run "
                                                 "changes cost.decode_ns")
    unfitted = dataclasses.replace(cfg, engine=dataclasses.replace(cfg.engine, num_blocks=4000))  # a sourced setting
    assert "changes engine.num_blocks" in profile_error("testbed", unfitted)
    assert profile_error("published", cfg) is None


def test_the_testbed_header_tells_its_kv_size_costs_and_error_from_the_default_s(capsys) -> None:
    import llumverify.cli as cli

    def header(*args: str) -> str:
        with pytest.raises(SystemExit):
            cli.main(["simulate", "--requests", "20", "--policy", "least-loaded", *args])
        return " ".join(capsys.readouterr().out.split("\n\n")[0].split())

    testbed, plain = header("--profile", "testbed"), header()
    assert "792 KV blocks (testbed profile's costs)" in testbed and "error: against the paper's Fig. 11" in testbed
    assert "851 KV blocks (the paper's cost fit)" in plain and "never compared with a real run" in plain
    fewer = header("--profile", "testbed", "--num-blocks", "700")
    assert "700 KV blocks (testbed profile's costs)" in fewer and "this run changes engine.num_blocks" in fewer
    import tempfile

    with tempfile.NamedTemporaryFile("w", suffix=".toml") as cost:  # a cost file replaces the profile's costs
        cost.write("decode_ns = 30000000\n")
        cost.flush()
        given = header("--cost-config", cost.name)
        assert "(costs as given)" in given and "paper's engine with costs as given" in given
        assert "(costs as given)" in header("--profile", "testbed", "--cost-config", cost.name)
    on_gpu = header("--profile", "testbed", "--gpu", "H100", "--model", "Llama-3.1-8B")
    assert "Fig. 11" not in on_gpu  # first-principles step costs: their own line
