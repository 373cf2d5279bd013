"""benchmarks/moe_kernels_published.py: a row published at twice the simulator's expert-layer time
reads -50.0 % in every column it falls in; fp8 weights are priced at fp8's bytes; moe_layer_ns is
fitted on one-token rows of shipped configs on NVIDIA HBM GPUs only; bad input is exit 2."""

from __future__ import annotations

from pathlib import Path

from conftest import benchmark_script

HEADER = "gpu,model,tp,weights,moe_config,tokens,kernel_us,source\n"


def test_twice_the_simulated_time_reads_minus_fifty_percent(tmp_path: Path, capsys) -> None:
    script = benchmark_script("moe_kernels_published")
    rows = [(t, 2 * script.expert_layers_ns("Mixtral-8x7B", "H100", 2, "bf16", t) / 1e3) for t in (4, 64, 512)]
    path = tmp_path / "rows.csv"
    path.write_text(HEADER + "".join(f"H100,Mixtral-8x7B,2,bf16,tuned,{t},{us},https://x (y)\n" for t, us in rows))
    assert script.main([str(path)]) == 0
    line = next(line for line in capsys.readouterr().out.splitlines() if "Mixtral" in line)
    cells = [c.strip() for c in line.strip("|").split("|")]
    assert cells[6:10] == ["-50.0 % (3)", "-50.0 % (1)", "-50.0 % (1)", "-50.0 % (1)"], cells
    assert cells[10:12] == ["-", "https://x"]  # no one-token row


def test_moe_layer_ns_is_the_median_one_token_gap_of_shipped_configs_on_nvidia_hbm(tmp_path: Path) -> None:
    import dataclasses

    from llumverify.sim.roofline import load_efficiency

    script = benchmark_script("moe_kernels_published")
    bare = dataclasses.replace(load_efficiency(), moe_layer_ns=0)
    lines = []
    for gpu, model, tp, weights, config, gap_us in (("H100", "Mixtral-8x7B", 2, "bf16", "tuned", 20.0),
                                                    ("H200", "Qwen3-235B-A22B", 8, "fp8", "default", 30.0),
                                                    ("A100-PCIe-40GB", "Qwen3-30B-A3B", 1, "bf16", "default", 50.0),
                                                    ("H100", "Qwen3-30B-A3B", 1, "fp8", "unshipped default", 900.0),
                                                    ("RTX PRO 6000", "Qwen3-30B-A3B", 1, "bf16", "tuned", 900.0)):
        us = script.expert_layers_ns(model, gpu, tp, weights, 1, bare) / 1e3 + gap_us
        lines.append(f"{gpu},{model},{tp},{weights},{config},1,{us},https://x\n")
        lines.append(f"{gpu},{model},{tp},{weights},{config},64,{10 * us},https://x\n")  # not a one-token row
    path = tmp_path / "rows.csv"
    path.write_text(HEADER + "".join(lines))
    assert script.fit_moe_layer_ns(script.read_rows(path)) == 30_000  # GDDR and unshipped rows are not fitted on


def test_fp8_weights_halve_the_bytes_read_at_one_token() -> None:
    import dataclasses

    from llumverify.sim.roofline import load_efficiency

    script = benchmark_script("moe_kernels_published")
    bare = dataclasses.replace(load_efficiency(), moe_layer_ns=0)
    bf16 = script.expert_layers_ns("Qwen3-30B-A3B", "H100", 1, "bf16", 1, bare)
    fp8 = script.expert_layers_ns("Qwen3-30B-A3B", "H100", 1, "fp8", 1, bare)
    assert 0.45 < fp8 / bf16 < 0.6  # weight reads dominate at one token; the small fixed terms do not halve
    shipped = script.expert_layers_ns("Qwen3-30B-A3B", "H100", 1, "fp8", 1)
    assert shipped - fp8 == load_efficiency().moe_layer_ns  # the fixed time, once


def test_bad_input_is_exit_2(tmp_path: Path, capsys) -> None:
    script = benchmark_script("moe_kernels_published")
    assert script.main([str(tmp_path / "absent.csv")]) == 2
    bad = tmp_path / "bad.csv"
    bad.write_text("gpu,model\nH100,Mixtral-8x7B\n")
    assert script.main([str(bad)]) == 2
    assert "missing columns" in capsys.readouterr().err
