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


def test_moe_layer_ns_is_the_median_one_token_gap_of_fitted_series_on_nvidia_hbm(tmp_path: Path) -> None:
    import dataclasses

    from llumverify.sim.roofline import load_efficiency

    script = benchmark_script("moe_kernels_published")
    bare = dataclasses.replace(load_efficiency(), moe_layer_ns=0)
    lines = []
    for gpu, model, tp, weights, config, gaps_us in (("H100", "Mixtral-8x7B", 2, "bf16", "tuned", (20.0,)),
                                                     ("H200", "Qwen3-235B-A22B", 8, "fp8", "default", (30.0, 30.0, 30.0)),
                                                     ("A100-PCIe-40GB", "Qwen3-30B-A3B", 1, "bf16", "default", (50.0,)),
                                                     ("H100", "Qwen3-30B-A3B", 1, "fp8", "unshipped default", (900.0,)),
                                                     ("B200", "Qwen3-30B-A3B", 1, "bf16", "held out: default", (900.0,)),
                                                     ("RTX PRO 6000", "Qwen3-30B-A3B", 1, "bf16", "tuned", (900.0,)),
                                                     ("MI300X", "Mixtral-8x7B", 1, "bf16", "tuned", (900.0,))):
        us = script.expert_layers_ns(model, gpu, tp, weights, 1, bare) / 1e3
        lines += [f"{gpu},{model},{tp},{weights},{config},1,{us + gap},https://x\n" for gap in gaps_us]
        lines.append(f"{gpu},{model},{tp},{weights},{config},64,{10 * us},https://x\n")  # not a one-token row
    path = tmp_path / "rows.csv"
    path.write_text(HEADER + "".join(lines))
    # one gap a series however many one-token rows it has; GDDR, AMD, unshipped and held-out series are not fitted on
    assert script.fit_moe_layer_ns(script.read_rows(path)) == 30_000


def test_the_shipped_moe_layer_ns_is_the_fit_on_the_published_rows() -> None:
    from llumverify.sim.roofline import load_efficiency

    script = benchmark_script("moe_kernels_published")
    assert script.fit_moe_layer_ns(script.read_rows(script.ROWS)) == load_efficiency().moe_layer_ns > 0


def test_block_ns_is_the_simulator_s_moe_layer() -> None:
    """moe_kernel_check.block_ns (what the kernel checks price) is layer_dense_ns's MoE part: the layer
    minus its attention GEMMs and small ops, on an NVIDIA HBM GPU that pays the fixed time and on one that does not."""
    import pytest

    from llumverify.sim.catalog import get_gpu, get_model
    from llumverify.sim.roofline import gemm_ns, gemm_params, layer_dense_ns, layer_small_ops, load_efficiency, small_op_ns

    block = benchmark_script("moe_kernel_check").block_ns
    eff = load_efficiency()
    for name, gpu_name, tp in (("Mixtral-8x7B", "H100", 2), ("Llama-4-Scout-17B-16E-Instruct", "H100", 2),
                               ("Qwen3-30B-A3B", "RTX PRO 6000", 1)):
        model, gpu = get_model(name), get_gpu(gpu_name)
        gp = gemm_params(model, tp)
        for t in (1, 8, 512):
            rest = sum(gemm_ns(gp[op], t, model.op_bytes(attention=True), gpu, eff) for op in ("qkv_proj", "o_proj"))
            rest += sum(small_op_ns(model, op, t, gpu, eff, tp) for op in layer_small_ops(model)
                        if op not in ("act_fn", "shared_act_fn"))
            moe = block(model, gpu, eff, t, tp=tp, shared=bool(model.shared_intermediate))
            assert layer_dense_ns(model, t, gpu, eff, tp) == pytest.approx(rest + moe, rel=1e-12), (name, t)


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


def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, capsys) -> None:
    script = benchmark_script("moe_kernels_published")
    assert script.main([str(tmp_path / "absent.csv")]) == 2
    assert "No such file" in capsys.readouterr().err
    bad = tmp_path / "bad.csv"
    for text, problem in (("gpu,model\nH100,Mixtral-8x7B\n", "missing columns"),
                          (HEADER + "H100,Mixtral-8x7B,2,bf16,tuned,8,0,u\n", ":2: tokens must be >= 1 and kernel_us > 0"),
                          (HEADER + "H100,Mixtral-8x7B,2\n", ":2: every column needs a value"),
                          (HEADER + "H100,Llama-3-8B,1,bf16,tuned,8,10,u\n", ":2: Llama-3-8B is not a mixture of experts"),
                          (HEADER + "H100,Mixtral-8x7B,3,bf16,tuned,8,10,u\n", ":2: tp=3 must be"),
                          (HEADER + "H100,Mixtral-8x7B,2,int4,tuned,8,10,u\n", ":2: weights must be one of bf16, fp8")):
        bad.write_text(text)
        assert script.main([str(bad)]) == 2
        err = capsys.readouterr().err
        assert problem in err and err.count("\n") == 1, err
    assert script.main(["a.csv", "b.csv"]) == 2
