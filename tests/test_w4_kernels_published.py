"""benchmarks/w4_kernels_published.py, the fp4 terms (fp4_gemm_ns, fp4_gemm_ps_per_k, fp4_gemm_bw, fp4_gemm_flops) and
the Hopper W4A16 ones (w4a16_hopper_bw, w4a16_hopper_ns): a row published at twice the simulator's GEMM time reads
-50.0 %; each set is fitted on its own `fit` rows only, weighting each source once, and recovers the terms rows were
made with; rows that cannot set a term are refused; the fp4 terms are paid by W4A4 NVFP4 GEMMs on FP4 tensor cores
alone, the W4A16 ones by weight-only 4-bit GEMMs on Hopper (shares by an MoE's experts too, fixed times not), both
shares of the datasheet bandwidth; bad input is one line and exit 2."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
from conftest import benchmark_script

from llumverify.errors import UserError
from llumverify.sim.catalog import get_gpu
from llumverify.sim.roofline import gemm_ns, load_efficiency

HEADER = "gpu,weights,kernel,n,k,tokens,kernel_us,role,source\n"
EFF = load_efficiency()
BARE = dataclasses.replace(EFF, fp4_gemm_ns=0, fp4_gemm_ps_per_k=0, fp4_gemm_bw=0.0, fp4_gemm_flops=0.0, fp4_grouped_bw=0.0)


def _row(script, gpu: str, weights: str, tokens: int, role: str, scale: float = 1.0, plus_us: float = 0.0,
         eff=EFF, n: int = 8192, source: str = "https://x", k: int = 8192) -> str:
    r = {"gpu": gpu, "weights": weights, "n": str(n), "k": str(k), "tokens": str(tokens)}
    return (f"{gpu},{weights},kern {weights},{n},{k},{tokens},{scale * script.priced_us(r, eff) + plus_us},{role},"
            f"{source} (y)\n")


def test_twice_the_simulated_time_reads_minus_fifty_percent(tmp_path: Path, capsys) -> None:
    script = benchmark_script("w4_kernels_published")
    path = tmp_path / "rows.csv"
    path.write_text(HEADER + "".join(_row(script, "A10", "int4", t, "check", scale=2) for t in (1, 64)))
    assert script.main([str(path)]) == 0
    line = next(line for line in capsys.readouterr().out.splitlines() if "kern int4" in line)
    cells = [c.strip() for c in line.strip("|").split("|")]
    assert cells[8:11] == ["-50.0 %", "-50.0 %", "https://x"], cells


def test_the_fit_recovers_the_terms_the_fit_rows_were_made_with_and_ignores_the_others(tmp_path: Path) -> None:
    """Rows priced at a bandwidth share of 0.3, a compute share of 0.4, a fixed 5 us and 0.6 ns per reduction element,
    at shapes of 4-470 MB, K of 1,024-28,672 and 1-16,384 tokens, from two sources (one with most of the rows: weighted
    per source); newer and check rows far off do not move the fit."""
    script = benchmark_script("w4_kernels_published")
    made = dataclasses.replace(EFF, fp4_gemm_ns=5000, fp4_gemm_ps_per_k=600, fp4_gemm_bw=0.3, fp4_gemm_flops=0.4)
    lines = [_row(script, "B200", "nvfp4", 1, "fit", eff=made, n=n, k=k, source="https://a")
             for n, k in ((1024, 4096), (8192, 1024), (8192, 28672), (28672, 8192))]
    lines += [_row(script, "B200", "nvfp4", t, "fit", eff=made, n=114688, source="https://b") for t in (1, 4096, 16384)]
    lines += [_row(script, "B200", "nvfp4", 1, "newer", plus_us=900.0), _row(script, "H100", "int4", 1, "check", plus_us=900.0)]
    path = tmp_path / "rows.csv"
    path.write_text(HEADER + "".join(lines))
    assert script.fit_fp4_terms(script.read_rows(path)) == {"fp4_gemm_bw": 0.3, "fp4_gemm_flops": 0.4, "fp4_gemm_ns": 5000,
                                                             "fp4_gemm_ps_per_k": 600}
    path.write_text(HEADER + "".join(lines[7:]))
    assert script.fit_fp4_terms(script.read_rows(path)) == {"fp4_gemm_bw": 0.0, "fp4_gemm_flops": 0.0, "fp4_gemm_ns": 0,
                                                             "fp4_gemm_ps_per_k": 0}


@pytest.mark.parametrize(("rows", "why"), [
    (((8192, 4096, 11.34), (8192, 4096, 11.34)), "the W4A4 fit rows hold one weight size"),
    (((4096, 4096, 9.37), (28672, 4096, 24.74)), "the W4A4 fit rows hold one reduction length"),
    (((4096, 4096, 11.34), (6144, 8192, 11.34), (8192, 2048, 11.34)),
     "the W4A4 fit rows put the bandwidth share at the end of its range"),
    (((4096, 4096, 9.37), (28672, 4096, 24.74), (8192, 28672, 59.06)), "no fit row's time depends on compute"),
    (((4096, 4096, 9.37 * 1.03), (28672, 4096, 24.74 * 0.98), (8192, 28672, 59.06)),
     "no fit row's time depends on compute"),
])
def test_a_fit_that_cannot_separate_the_terms_is_refused(tmp_path: Path, capsys, rows: tuple, why: str) -> None:
    """One weight size fits any share, one reduction length any time per element; sizes all at one time (a fixed
    time alone, as #20578's one-token rows alone read) put the bandwidth share at the range's end; one-token rows
    alone (helion#3046's), exact or a few % off, cannot set the compute share."""
    script = benchmark_script("w4_kernels_published")
    path = tmp_path / "rows.csv"
    path.write_text(HEADER + "".join(f"B200,nvfp4,k,{n},{k},1,{us},fit,https://a (y)\n" for n, k, us in rows))
    with pytest.raises(UserError, match=why):
        script.fit_fp4_terms(script.read_rows(path))
    assert script.main([str(path)]) == 2 and why in capsys.readouterr().err


def test_main_prints_each_fitted_term_with_its_unit(capsys) -> None:
    script = benchmark_script("w4_kernels_published")
    assert script.main([]) == 0
    last = capsys.readouterr().out.splitlines()[-6:]
    assert last[0].endswith(f": {EFF.fp4_gemm_bw} (shipped: {EFF.fp4_gemm_bw})") and last[0].startswith("fp4_gemm_bw")
    assert last[1].endswith(f": {EFF.fp4_gemm_flops} (shipped: {EFF.fp4_gemm_flops})")
    assert last[2].endswith(f": {EFF.fp4_gemm_ns:,} ns (shipped: {EFF.fp4_gemm_ns:,} ns)")
    assert last[3].endswith(f": {EFF.fp4_gemm_ps_per_k:,} ps (shipped: {EFF.fp4_gemm_ps_per_k:,} ps)")
    assert last[4].endswith(f": {EFF.w4a16_hopper_bw} (shipped: {EFF.w4a16_hopper_bw})") and last[4].startswith("w4a16_hop")
    assert last[5].endswith(f": {EFF.w4a16_hopper_ns:,} ns (shipped: {EFF.w4a16_hopper_ns:,} ns)")


def test_a_share_outside_0_to_1_in_an_efficiency_file_is_one_line(tmp_path: Path) -> None:
    from llumverify.sim.roofline import EFFICIENCY_TOML

    text = Path(EFFICIENCY_TOML).read_text()
    for name, why in (("fp4_gemm_bw", "a share of the bandwidth in"), ("fp4_gemm_flops", "a share of the FP4 peak in"),
                      ("fp4_grouped_bw", "a share of the bandwidth in"), ("w4a16_hopper_bw", "a share of the bandwidth in")):
        shipped = f"{name} = {getattr(EFF, name)}"
        assert shipped in text
        for bad in ("-0.1", "1.5", "true"):
            path = tmp_path / "eff.toml"
            path.write_text(text.replace(shipped, f"{name} = {bad}"))
            with pytest.raises(UserError, match=f"{name} must be {why}"):
                load_efficiency(path)


def test_the_shipped_fp4_terms_are_what_the_published_rows_fit() -> None:
    script = benchmark_script("w4_kernels_published")
    fitted = script.fit_fp4_terms(script.read_rows(script.ROWS))
    assert {t: getattr(EFF, t) for t in fitted} == fitted
    assert 0 < EFF.fp4_gemm_bw < EFF.gemm_bw and 0 < EFF.fp4_gemm_flops < EFF.gemm_flops and EFF.fp4_gemm_ns > 0
    assert EFF.fp4_gemm_ps_per_k > 0


@pytest.mark.parametrize(("gpu", "fmt", "pays"), [
    ("B200", "nvfp4", True), ("RTX PRO 6000", "nvfp4", True), ("H100", "nvfp4", False),
    ("B200", "int4", False), ("B200", "fp8", False), ("B200", "bf16", False),
])
def test_only_w4a4_gemms_on_fp4_tensor_cores_pay_the_fp4_terms(gpu: str, fmt: str, pays: bool) -> None:
    g = get_gpu(gpu)
    fixed_only = dataclasses.replace(EFF, fp4_gemm_bw=0.0, fp4_gemm_flops=0.0, fp4_gemm_ps_per_k=0,
                                     fp4_grouped_bw=0.0)
    assert gemm_ns(1e6, 4, 0.5625, g, fixed_only, fmt=fmt, k=1) - gemm_ns(1e6, 4, 0.5625, g, BARE, fmt=fmt, k=1) == (
        EFF.fp4_gemm_ns if pays else 0)
    if pays:
        with pytest.raises(ValueError, match="a dense W4A4 GEMM is priced with its reduction length"):
            gemm_ns(1e6, 4, 0.5625, g, EFF, fmt=fmt)
    # a 1 GB weight matrix at one token: memory-bound, so its time is the bytes over the format's share of bandwidth
    fixed = EFF.fp4_gemm_ns if pays else 0
    slower = ((gemm_ns(1e9, 1, 0.5625, g, EFF, fmt=fmt, k=1) - fixed) /
              (gemm_ns(1e9, 1, 0.5625, g, fixed_only, fmt=fmt, k=1) - fixed))
    assert slower == (pytest.approx(EFF.gemm_bw / EFF.fp4_gemm_bw, rel=0.01) if pays else 1.0)
    # an MoE's grouped expert GEMM: the same bytes at fp4_grouped_bw, no fixed time
    grouped = gemm_ns(1e9, 1, 0.5625, g, EFF, fmt=fmt, grouped=True) / gemm_ns(1e9, 1, 0.5625, g, fixed_only, fmt=fmt,
                                                                                grouped=True)
    assert grouped == (pytest.approx(EFF.gemm_bw / EFF.fp4_grouped_bw, rel=0.01) if pays else 1.0)
    # without a grouped share of its own, the dense one
    no_grouped = dataclasses.replace(EFF, fp4_grouped_bw=0.0)
    grouped = gemm_ns(1e9, 1, 0.5625, g, no_grouped, fmt=fmt, grouped=True) / gemm_ns(1e9, 1, 0.5625, g, fixed_only,
                                                                                       fmt=fmt, grouped=True)
    assert grouped == (pytest.approx(EFF.gemm_bw / EFF.fp4_gemm_bw, rel=0.01) if pays else 1.0)
    # 65,536 tokens through a 64 MB matrix: compute-bound, so the time is the FLOPs over the format's share of its peak
    slower = ((gemm_ns(1e8, 65536, 0.5625, g, EFF, fmt=fmt, k=1) - fixed) /
              (gemm_ns(1e8, 65536, 0.5625, g, fixed_only, fmt=fmt, k=1) - fixed))
    assert slower == (pytest.approx(EFF.gemm_flops / EFF.fp4_gemm_flops, rel=0.02) if pays else 1.0)


@pytest.mark.parametrize(("text", "why"), [
    ("gpu,weights\n", "missing columns"),
    (HEADER + "B200,int3,k,1,1,1,1.0,fit,s\n", "weights must be one of"),
    (HEADER + "B200,nvfp4,k,1,1,1,1.0,guess,s\n", "role must be one of"),
    (HEADER + "B200,nvfp4,k,1,1,0,1.0,fit,s\n", "tokens must be >= 1"),
    (HEADER + "Z9,nvfp4,k,1,1,1,1.0,fit,s\n", "unknown GPU"),
    (HEADER + "A100-80GB,nvfp4,k,1,1,1,1.0,fit,s\n", "a fit row must run W4A4 (nvfp4 on a Blackwell GPU) or W4A16 on "
                                                      "Hopper (int4 or nvfp4 on sm_90), got nvfp4 on A100-80GB"),
    (HEADER + "B200,int4,k,1,1,1,1.0,fit,s\n", "a fit row must run W4A4"),
    (HEADER + "A100-80GB,int4,k,1,1,1,1.0,fit,s\n", "a fit row must run W4A4"),
])
def test_bad_rows_are_one_line_and_exit_2(tmp_path: Path, capsys, text: str, why: str) -> None:
    path = tmp_path / "rows.csv"
    path.write_text(text)
    assert benchmark_script("w4_kernels_published").main([str(path)]) == 2
    err = capsys.readouterr().err
    assert why in err and err.count("\n") == 1
    assert benchmark_script("w4_kernels_published").main([str(tmp_path / "none.csv")]) == 2


def test_an_sm_100a_gpu_file_is_blackwell_and_moe_experts_pay_the_share_not_the_dense_fixed_time() -> None:
    import dataclasses as dc

    from llumverify.sim.catalog import get_model
    from llumverify.sim.roofline import moe_gemm_ns

    b200a = dc.replace(get_gpu("B200"), arch="sm_100a")
    share_only = dc.replace(EFF, fp4_gemm_ns=0, fp4_gemm_ps_per_k=0)
    assert gemm_ns(1e6, 4, 0.5625, b200a, EFF, fmt="nvfp4", k=1000) - gemm_ns(1e6, 4, 0.5625, b200a, share_only,
                                                                              fmt="nvfp4", k=1000) == pytest.approx(
        EFF.fp4_gemm_ns + 1000 * EFF.fp4_gemm_ps_per_k / 1e3)
    moe = dc.replace(get_model("Mixtral-8x7B"), weight_format="nvfp4")
    assert moe_gemm_ns(1e7, 4, moe, get_gpu("B200"), EFF) == moe_gemm_ns(1e7, 4, moe, get_gpu("B200"), share_only)
    assert moe_gemm_ns(1e7, 4, moe, get_gpu("B200"), EFF) > moe_gemm_ns(1e7, 4, moe, get_gpu("B200"), BARE)


@pytest.mark.parametrize("tp", [1, 4])
def test_each_dense_projection_pays_the_k_term_for_its_own_reduction_length(tp: int) -> None:
    """Column-parallel projections (qkv, gate_up, a shared expert's gate_up) reduce over the whole hidden size,
    row-parallel ones (o, down, shared down) over their sharded width; on a model whose query width is not its
    hidden size (Qwen3-32B) and one with a shared expert beside its routed ones (Llama 4 Scout), a W4A4 layer's
    K term is ps_per_k x the sum of those, its routed experts' GEMMs paying none."""
    from llumverify.sim.roofline import gemm_k, layer_dense_ns
    from llumverify.sim.quantization import with_formats
    from llumverify.sim.catalog import get_model

    qwen = get_model("Qwen3-32B")
    assert {op: gemm_k(qwen, op, tp) for op in ("qkv_proj", "o_proj", "gate_up_proj", "down_proj")} == {
        "qkv_proj": 5120, "o_proj": 8192 // tp, "gate_up_proj": 5120, "down_proj": 25600 // tp}
    scout = get_model("Llama-4-Scout-17B-16E-Instruct")
    assert (gemm_k(scout, "shared_gate_up_proj", tp), gemm_k(scout, "shared_down_proj", tp)) == (5120, 8192 // tp)
    b200, no_k = get_gpu("B200"), dataclasses.replace(EFF, fp4_gemm_ps_per_k=0)
    for model, dense in ((qwen, ("qkv_proj", "o_proj", "gate_up_proj", "down_proj")),
                         (scout, ("qkv_proj", "o_proj", "shared_gate_up_proj", "shared_down_proj"))):
        fp4 = with_formats(model, "nvfp4", "auto")
        k_term = layer_dense_ns(fp4, 1, b200, EFF, tp) - layer_dense_ns(fp4, 1, b200, no_k, tp)
        assert k_term == pytest.approx(EFF.fp4_gemm_ps_per_k / 1e3 * sum(gemm_k(model, op, tp) for op in dense))


def test_the_fixed_and_per_k_times_are_the_constrained_least_squares() -> None:
    """Against a brute-force search over the rounded lattice (100 ns, 1 ps): rows whose unconstrained fixed time is
    negative (a clamp of it to 0 would keep the wrong per-K time) and rows fitted exactly."""
    script = benchmark_script("w4_kernels_published")
    k = np.array([1024.0, 4096.0, 8192.0, 28672.0])
    p = np.array([[1000.0, 3000.0, 6000.0, 20000.0]])  # the memory-compute part at one grid point, ns
    w = np.ones(4)

    def best(y: np.ndarray) -> tuple[float, float]:
        f, c = np.meshgrid(np.arange(0, 20001, 100.0), np.round(np.arange(0, 2001) * 0.001, 3), indexing="ij")
        err = np.sum(w * ((f[..., None] + c[..., None] * k + p[0]) / y - 1) ** 2, axis=-1)
        i, j = np.unravel_index(int(np.argmin(err)), err.shape)
        return float(f[i, j]), float(c[i, j])

    for y in (p[0] + 0.8 * k - 1500.0,  # the unconstrained fixed time is -1.5 us: the best with none
              p[0] + 4000.0 + 0.5 * k):  # exact: 4 us and 500 ps
        f, c = script._fixed_and_per_k(y, k, w, p)
        assert (float(f[0]), float(c[0])) == pytest.approx(best(y), abs=1e-9)


def test_the_int4_fit_recovers_the_hopper_terms_its_rows_were_made_with(tmp_path: Path) -> None:
    """H200 int4 rows priced at a bandwidth share of 0.4 and 9 us a GEMM (8-350 MB, from two sources) give back 0.4 and
    9,000 ns; an FP4 fit row and int4 check rows far off move neither; one weight size is refused."""
    script = benchmark_script("w4_kernels_published")
    made = dataclasses.replace(EFF, w4a16_hopper_bw=0.4, w4a16_hopper_ns=9000)
    lines = [_row(script, "H200", "int4", 1, "fit", eff=made, n=n, k=k, source=src)
             for (n, k), src in zip(((4096, 4096), (8192, 8192), (7168, 20480), (8192, 81920)), ("https://a",) * 3 + ("https://b",))]
    lines += [_row(script, "H100", "int4", 1, "check", plus_us=900.0), _row(script, "A10", "int4", 1, "check", plus_us=900.0)]
    path = tmp_path / "rows.csv"
    path.write_text(HEADER + "".join(lines))
    assert script.fit_w4a16_terms(script.read_rows(path)) == {"w4a16_hopper_bw": 0.4, "w4a16_hopper_ns": 9000}
    path.write_text(HEADER + "".join(lines[1:2] * 2))
    with pytest.raises(UserError, match="the W4A16 fit rows hold one weight size"):
        script.fit_w4a16_terms(script.read_rows(path))
    path.write_text(HEADER + "".join(lines[4:]))
    assert script.fit_w4a16_terms(script.read_rows(path)) == {"w4a16_hopper_bw": 0.0, "w4a16_hopper_ns": 0}


def test_the_shipped_int4_terms_are_what_the_published_rows_fit_and_only_hopper_int4_pays_them() -> None:
    """The shipped Hopper terms are the fit of reports/validation/w4-kernels/rows.csv; a weight-only 4-bit GEMM (int4,
    NVFP4) on H100 or H200 (an sm_90a file too) streams at w4a16_hopper_bw and pays w4a16_hopper_ns, an MoE's grouped
    one the share only; int4 on A100, L40S and B200, NVFP4 on B200 (W4A4) and 8- and 16-bit weights on H100 pay
    neither."""
    import dataclasses as dc

    script = benchmark_script("w4_kernels_published")
    assert script.fit_w4a16_terms(script.read_rows(script.ROWS)) == {t: getattr(EFF, t) for t in script.W4A16_TERMS}
    assert 0 < EFF.w4a16_hopper_bw < EFF.gemm_bw and EFF.w4a16_hopper_ns > 0
    bare = dc.replace(EFF, w4a16_hopper_bw=0.0, w4a16_hopper_ns=0)
    for gpu, fmt, pays in (("H100", "int4", True), ("H200", "int4", True), ("A100-80GB", "int4", False),
                           ("L40S", "int4", False), ("B200", "int4", False), ("H100", "fp8", False),
                           ("H100", "bf16", False), ("H100", "nvfp4", True), ("B200", "nvfp4", False)):
        g = get_gpu(gpu)
        for arch in {g.arch, g.arch + "a"}:
            g = dc.replace(g, arch=arch)
            fixed = gemm_ns(1e3, 1, 0.5, g, EFF, fmt=fmt, k=1) - gemm_ns(1e3, 1, 0.5, g, bare, fmt=fmt, k=1)
            assert fixed == pytest.approx(EFF.w4a16_hopper_ns if pays else 0, abs=1), (gpu, fmt, arch)
            slower = ((gemm_ns(1e9, 1, 0.5, g, EFF, fmt=fmt, k=1) - fixed) / gemm_ns(1e9, 1, 0.5, g, bare, fmt=fmt, k=1))
            assert slower == (pytest.approx(EFF.gemm_bw / EFF.w4a16_hopper_bw, rel=0.01) if pays else 1.0), (gpu, fmt)
            grouped = gemm_ns(1e9, 1, 0.5, g, EFF, fmt=fmt, grouped=True) / gemm_ns(1e9, 1, 0.5, g, bare, fmt=fmt,
                                                                                     grouped=True)
            assert grouped == (pytest.approx(EFF.gemm_bw / EFF.w4a16_hopper_bw, rel=0.01) if pays else 1.0)


def test_the_int4_fidelity_line_quotes_the_held_out_h100_marlin_rows() -> None:
    """humming#2's H100 Marlin rows (check rows: another GPU and table than the fit's) as the int4 line quotes them."""
    from llumverify.settings.config import EngineConfig, HardwareConfig, SimConfig
    from llumverify.sim.fidelity import measured_error

    script = benchmark_script("w4_kernels_published")
    rows = [r for r in script.read_rows(script.ROWS) if r["gpu"] == "H100" and r["weights"] == "int4"]
    signed = float(np.median([script.priced_us(r, EFF) / float(r["kernel_us"]) - 1 for r in rows]))
    text = measured_error(SimConfig(engine=EngineConfig(generation="vllm-v1"),
                                    hardware=HardwareConfig(gpu="H100", model="Llama-3.1-8B-AWQ")))
    assert len(rows) == 3 and f"an H100 Marlin table, held out: {100 * signed:+.1f} %" in text


def test_the_w4a16_fit_weights_each_source_once_clamps_its_fixed_time_and_refuses_an_edge_share(tmp_path: Path,
                                                                                                 capsys) -> None:
    """Three exact rows from one source and one 30 % slow from another: the fit is the one that weights the two
    sources equally (not the one that weights the rows so); rows 3 us faster than a share's bytes get 0 ns, not less; rows
    all at the bytes' time of the full bandwidth put the share at the end of its range, a one-line refusal."""
    script = benchmark_script("w4_kernels_published")
    made = dataclasses.replace(EFF, w4a16_hopper_bw=0.4, w4a16_hopper_ns=5000)
    shapes = ((4096, 4096), (8192, 8192), (7168, 20480), (8192, 28672))
    lines = [_row(script, "H200", "int4", 1, "fit", eff=made, n=n, k=k, source="https://a") for n, k in shapes[:3]]
    lines.append(_row(script, "H200", "int4", 1, "fit", eff=made, n=8192, k=28672, source="https://b", scale=1.3))
    path = tmp_path / "rows.csv"
    path.write_text(HEADER + "".join(lines))
    weighted = script.fit_w4a16_terms(script.read_rows(path))
    path.write_text(HEADER + "".join(lines[:3] + [lines[3].replace("https://b", "https://a")]))
    assert weighted != script.fit_w4a16_terms(script.read_rows(path))
    fast = dataclasses.replace(EFF, w4a16_hopper_bw=0.4, w4a16_hopper_ns=0)
    path.write_text(HEADER + "".join(_row(script, "H200", "int4", 1, "fit", eff=fast, n=n, k=k, plus_us=-3.0)
                                     for n, k in shapes))
    assert script.fit_w4a16_terms(script.read_rows(path))["w4a16_hopper_ns"] == 0
    full = dataclasses.replace(EFF, w4a16_hopper_bw=1.0, w4a16_hopper_ns=0)
    path.write_text(HEADER + "".join(_row(script, "H200", "int4", 1, "fit", eff=full, n=n, k=k, scale=0.5)
                                     for n, k in shapes))
    with pytest.raises(UserError, match="the W4A16 fit rows put the bandwidth share at the end of its range"):
        script.fit_w4a16_terms(script.read_rows(path))
    assert script.main([str(path)]) == 2 and capsys.readouterr().err.count("\n") == 1


def test_the_table_prices_its_without_column_with_no_4_bit_term() -> None:
    """The README's "without the 4-bit terms" column: humming#2's H100 Marlin rows at gemm_bw, as before session 32."""
    script = benchmark_script("w4_kernels_published")
    rows = script.read_rows(script.ROWS)
    (line,) = [t for t in script.series_table(rows) if t[0] == "H100" and t[1] == "int4"]
    bare = dataclasses.replace(EFF, **script.WITHOUT_4BIT_TERMS)
    humming = [r for r in rows if r["gpu"] == "H100" and r["weights"] == "int4"]
    assert line[9] == f"{100 * float(np.median([script.priced_us(r, bare) / float(r['kernel_us']) - 1 for r in humming])):+.1f} %"
    assert line[9] != line[8]


def test_kernel_fitted_shares_are_of_the_datasheet_bandwidth_not_scaled_by_hbm_bw_scale() -> None:
    """hbm_bw_scale transfers GDDR-fitted efficiencies to HBM GPUs; the W4A16 and W4A4 shares, and the dense GEMM
    kernels' of a measured generation (gemm_kernels: Hopper), were measured on the GPUs themselves, so halving it
    doubles a bf16 GEMM's memory time on B200 (no measured dense kernels) and leaves bf16's and int4's on H100 and
    NVFP4's on B200 alone."""
    half = dataclasses.replace(EFF, hbm_bw_scale=0.5)
    for gpu, fmt, scaled in (("B200", "bf16", True), ("H100", "bf16", False), ("H100", "int4", False),
                             ("B200", "nvfp4", False), ("B200", "int4", True)):
        g = get_gpu(gpu)
        ratio = (gemm_ns(1e9, 1, 0.5, g, half, fmt=fmt, k=1) - gemm_ns(0, 1, 0.5, g, half, fmt=fmt, k=1)) / (
            gemm_ns(1e9, 1, 0.5, g, EFF, fmt=fmt, k=1) - gemm_ns(0, 1, 0.5, g, EFF, fmt=fmt, k=1))
        assert ratio == pytest.approx(2.0 if scaled else 1.0, rel=0.01), (gpu, fmt)
