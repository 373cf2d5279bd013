"""benchmarks/w4_kernels_published.py and fp4_gemm_ns: a row published at twice the simulator's GEMM
time reads -50.0 %; fp4_gemm_ns is the median gap of the `fit` rows only; it is paid by W4A4 NVFP4
GEMMs on FP4 tensor cores alone; bad input is one line and exit 2."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from conftest import benchmark_script

from llumverify.sim.catalog import get_gpu
from llumverify.sim.roofline import gemm_ns, load_efficiency

HEADER = "gpu,weights,kernel,n,k,tokens,kernel_us,role,source\n"
EFF = load_efficiency()
BARE = dataclasses.replace(EFF, fp4_gemm_ns=0)


def _row(script, gpu: str, weights: str, tokens: int, role: str, scale: float = 1.0, plus_us: float = 0.0,
         eff=EFF) -> str:
    r = {"gpu": gpu, "weights": weights, "n": "8192", "k": "8192", "tokens": str(tokens)}
    return f"{gpu},{weights},kern {weights},8192,8192,{tokens},{scale * script.priced_us(r, eff) + plus_us},{role},https://x (y)\n"


def test_twice_the_simulated_time_reads_minus_fifty_percent(tmp_path: Path, capsys) -> None:
    script = benchmark_script("w4_kernels_published")
    path = tmp_path / "rows.csv"
    path.write_text(HEADER + "".join(_row(script, "A10", "int4", t, "check", scale=2) for t in (1, 64)))
    assert script.main([str(path)]) == 0
    line = next(line for line in capsys.readouterr().out.splitlines() if "kern int4" in line)
    cells = [c.strip() for c in line.strip("|").split("|")]
    assert cells[8:11] == ["-50.0 %", "-50.0 %", "https://x"], cells


def test_fp4_gemm_ns_is_the_median_gap_of_the_fit_rows_alone(tmp_path: Path) -> None:
    script = benchmark_script("w4_kernels_published")
    lines = [_row(script, "B200", "nvfp4", t, "fit", plus_us=gap, eff=BARE) for t, gap in ((1, 5.0), (16, 7.0), (64, 30.0))]
    lines += [_row(script, "B200", "nvfp4", 1, "newer", plus_us=900.0, eff=BARE),
              _row(script, "H100", "int4", 1, "check", plus_us=900.0, eff=BARE)]
    path = tmp_path / "rows.csv"
    path.write_text(HEADER + "".join(lines))
    assert script.fit_fp4_gemm_ns(script.read_rows(path)) == 7000


def test_the_shipped_fp4_gemm_ns_is_what_the_published_rows_fit() -> None:
    script = benchmark_script("w4_kernels_published")
    assert EFF.fp4_gemm_ns == script.fit_fp4_gemm_ns(script.read_rows(script.ROWS)) > 0


@pytest.mark.parametrize(("gpu", "fmt", "pays"), [
    ("B200", "nvfp4", True), ("RTX PRO 6000", "nvfp4", True), ("H100", "nvfp4", False),
    ("B200", "int4", False), ("B200", "fp8", False), ("B200", "bf16", False),
])
def test_only_w4a4_gemms_on_fp4_tensor_cores_pay_the_fixed_time(gpu: str, fmt: str, pays: bool) -> None:
    g = get_gpu(gpu)
    extra = gemm_ns(1e6, 4, 0.5625, g, EFF, fmt=fmt) - gemm_ns(1e6, 4, 0.5625, g, BARE, fmt=fmt)
    assert extra == (EFF.fp4_gemm_ns if pays else 0)


@pytest.mark.parametrize(("text", "why"), [
    ("gpu,weights\n", "missing columns"),
    (HEADER + "B200,int3,k,1,1,1,1.0,fit,s\n", "weights must be one of"),
    (HEADER + "B200,nvfp4,k,1,1,1,1.0,guess,s\n", "role must be one of"),
    (HEADER + "B200,nvfp4,k,1,1,0,1.0,fit,s\n", "tokens must be >= 1"),
    (HEADER + "Z9,nvfp4,k,1,1,1,1.0,fit,s\n", "unknown GPU"),
])
def test_bad_rows_are_one_line_and_exit_2(tmp_path: Path, capsys, text: str, why: str) -> None:
    path = tmp_path / "rows.csv"
    path.write_text(text)
    assert benchmark_script("w4_kernels_published").main([str(path)]) == 2
    err = capsys.readouterr().err
    assert why in err and err.count("\n") == 1
    assert benchmark_script("w4_kernels_published").main([str(tmp_path / "none.csv")]) == 2


def test_an_sm_100a_gpu_file_is_blackwell_and_moe_experts_do_not_pay_the_dense_term() -> None:
    import dataclasses as dc

    from llumverify.sim.catalog import get_model
    from llumverify.sim.roofline import moe_gemm_ns

    b200a = dc.replace(get_gpu("B200"), arch="sm_100a")
    assert gemm_ns(1e6, 4, 0.5625, b200a, EFF, fmt="nvfp4") - gemm_ns(1e6, 4, 0.5625, b200a, BARE, fmt="nvfp4") == EFF.fp4_gemm_ns
    moe = dc.replace(get_model("Mixtral-8x7B"), weight_format="nvfp4")
    assert moe_gemm_ns(1e7, 4, moe, get_gpu("B200"), EFF) == moe_gemm_ns(1e7, 4, moe, get_gpu("B200"), BARE)
