"""llumverify/validation/transfer_fit.py: the engine terms are recovered from latencies they generated, and
leave-one-GPU-out never fits on the GPU it reports."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from llumverify.validation import transfer_fit as tf
from llumverify.sim.roofline import load_efficiency
from llumverify.validation.static_batch import Row


def rows_with_truth(eff, gpu: str, tp: int = 1, models: tuple[str, ...] = ("Llama-3-8B",)) -> list[tuple[Row, str, str]]:
    """Small static batches whose 'measured' latency is the simulator's under `eff`."""
    shapes = [(64, 1), (64, 8), (128, 4), (128, 16), (96, 2)]
    rows = [(Row(i, gpu, tp, m, length, length, batch, 1.0), gpu, m)
            for m in models for i, (length, batch) in enumerate(shapes)]
    sims = tf.simulate(rows, eff)
    return [(dataclasses.replace(r, latency_s=float(s)), g, m) for (r, g, m), s in zip(rows, sims)]


@pytest.mark.slow
def test_engine_terms_are_recovered_from_their_own_latencies() -> None:
    truth = dataclasses.replace(load_efficiency(), fixed_ns=1_500_000, seq_ns=40_000, hbm_bw_scale=0.9)
    rows = rows_with_truth(truth, "H100")
    eff, err = tf.fit_engine_terms(rows, load_efficiency())
    assert (eff.hbm_bw_scale, eff.fixed_ns, eff.seq_ns) == (0.9, 1_500_000, 40_000)
    assert err < 1e-6
    tp_rows = rows_with_truth(dataclasses.replace(truth, tp_step_ns=300_000), "H100", tp=2)
    fitted, err = tf.fit_tp_step(tp_rows, eff)
    assert fitted.tp_step_ns == 300_000 and err < 1e-6


def test_leave_one_gpu_out_fits_on_the_others_only(monkeypatch) -> None:
    seen: list[set[str]] = []

    def fake_fit(rows, base):
        seen.append({g for _, g, _ in rows})
        return base, 0.0

    monkeypatch.setattr(tf, "fit_engine_terms", fake_fit)
    monkeypatch.setattr(tf, "ape", lambda rows, eff: np.zeros(len(rows)))
    rows = [(Row(i, g, 1, "Llama-3-8B", 64, 64, 1, 1.0), g, "Llama-3-8B") for i, g in enumerate(["A", "B", "C", "A"])]
    out = tf.leave_one_gpu_out(rows + [(Row(9, "A", 2, "Llama-3-8B", 64, 64, 1, 1.0), "A", "Llama-3-8B")],
                               load_efficiency())
    assert seen == [{"B", "C"}, {"A", "C"}, {"A", "B"}]
    assert out["A"]["rows"] == 2 and out["A"]["fitted_on"] == ["B", "C"]  # the TP2 row is not a one-GPU row


def test_engine_terms_round_trip_and_bad_files_are_user_errors(tmp_path) -> None:
    from llumverify.errors import UserError

    eff = dataclasses.replace(load_efficiency(), fixed_ns=2_000_000, seq_ns=50_000, hbm_bw_scale=0.95,
                              tp_step_ns=100_000)
    path = tmp_path / "terms.toml"
    path.write_text(tf.engine_terms_toml(eff, "a test"))
    assert tf.load_engine_terms(path, load_efficiency()) == eff
    for text, message in (("fixed_ns = 1\nseq = 2\n", "unknown key 'seq'"),
                          ("seq_ns = -5\n", r"seq_ns must be a whole ns in \[0, 60,000,000,000\]"),
                          ("layer_ns = 1.5\n", r"layer_ns must be a whole ns in \[0, 60,000,000,000\] \(a minute\), got 1\.5"),
                          ("fixed_ns = 9223372036854775807\n", "fixed_ns must be a whole ns in"),  # a hang before
                          ("hbm_bw_scale = 0\n", "hbm_bw_scale must be a number in"),
                          ("kv_bw = 3.0\n", "kv_bw must be a number in"),
                          ("kv_per_query_head = 1\n", "kv_per_query_head must be true or false"),
                          ("kv_bw_v1 = -0.1\n", r"kv_bw_v1 must be 0 or a number in \(0, 2\]")):
        path.write_text(text)
        with pytest.raises(UserError, match=message):
            tf.load_engine_terms(path, load_efficiency())


def test_every_term_a_fit_can_set_is_written_and_read_back_to_the_same_step_costs(tmp_path) -> None:
    """What `calibrate --static-batch` writes carries every term that is neither a kernel efficiency
    fitted on profiles nor provenance (a new term is caught here), and reading it back gives the same
    step costs as the fitted efficiencies, on a TP group of MI300X where every term matters."""
    from dataclasses import fields

    from llumverify.sim.roofline import FITTED, step_cost_first_principles

    kernel_only = set(FITTED) - {"kv_bw"}
    # flops_scale is fitted on prefill rows (llumverify/validation/prefill.py), not on static batches;
    # gemm_kernels are fitted on Vidur's measured GEMM kernels (benchmarks/vidur_check.py), inline_ecc_kernels names one of
    # them; moe_layer_ns and the fp4 terms
    # and int4 Hopper terms are fitted on published kernel times (benchmarks/moe_kernels_published.py, w4_kernels_published.py),
    # the top-p sort on published serving runs (llumverify/validation/public_serving.py fit_sort_ns)
    assert {f.name for f in fields(tf.Efficiency)} - kernel_only - {"fitted_on", "fit_error", "flops_scale",
                                                                    "gemm_kernels", "inline_ecc_kernels", "moe_layer_ns", "fp4_gemm_ns", "fp4_gemm_ps_per_k",
                                                                    "fp4_gemm_bw", "fp4_gemm_flops", "fp4_grouped_bw",
                                                                    "w4a16_hopper_bw", "w4a16_hopper_ns", "topp_sort_ns"} == set(tf.TERMS)
    base = load_efficiency()
    fitted = dataclasses.replace(base, fixed_ns=1_000, seq_ns=97_000, hbm_bw_scale=0.825, tp_step_ns=1_950_000,
                                 layer_ns=152_500, seq_gparam_ns=40_000, kv_bw=round(base.kv_bw * 0.3, 4),
                                 kv_per_query_head=True, kv_bw_v1=round(base.kv_bw * 0.15, 4))
    assert all(getattr(fitted, k) != getattr(base, k) for k in tf.TERMS)  # each term is exercised
    path = tmp_path / "terms.toml"
    path.write_text(tf.engine_terms_toml(fitted, "a test"))
    read = tf.load_engine_terms(path, base)
    assert read == fitted
    assert step_cost_first_principles("Llama-3-8B", "MI300X", tp=2, eff=read) == \
        step_cost_first_principles("Llama-3-8B", "MI300X", tp=2, eff=fitted)


def test_a_vendor_term_stuck_at_its_grid_end_is_a_failed_fit(monkeypatch) -> None:
    from llumverify.errors import UserError

    end = int(tf.VENDOR_GRIDS["layer_ns"][-1])
    monkeypatch.setattr(tf, "vendor_fit", lambda rows, base: (dataclasses.replace(base, layer_ns=end), 0.5))
    rows = [(Row(b, "MI300X", 1, "Llama-3-8B", 64, 64, b, 1.0), "MI300X", "Llama-3-8B") for b in range(1, 8)]
    with pytest.raises(UserError, match="fit failed: layer_ns at the search grid's upper end"):
        tf.calibrate_static(rows, load_efficiency(), vendor=True)


def test_a_vendor_fit_runs_on_tp_rows_alone_and_the_nvidia_fit_needs_one_gpu_rows(monkeypatch) -> None:
    """MI250 rows are all TP >= 2 (two GCDs a board): `calibrate --vendor-fit` fits them; without one-GPU rows
    the NVIDIA fit (fixed_ns, seq_ns, hbm_bw_scale) is refused in one line."""
    from llumverify.errors import UserError

    fitted: list[list[int]] = []
    monkeypatch.setattr(tf, "vendor_fit", lambda rows, base: (fitted.append([r.gpus for r, _, _ in rows]), (base, 0.1))[1])
    rows = [(Row(i, "MI250", tp, m, 64, 64, b, 1.0), "MI250", m)
            for i, (m, tp, b) in enumerate((m, tp, b) for m, tp in [("Llama-3-8B", 2), ("Mixtral-8x7B", 2),
                                                                     ("Llama-2-70B", 4)] for b in (1, 2, 4, 8))]
    _, how = tf.calibrate_static(rows, load_efficiency(), vendor=True)
    assert fitted == [[2] * 4 + [4] * 4] and "on 0 one-GPU and 8 dense TP rows" in how  # MoE rows never enter a fit
    with pytest.raises(UserError, match="fit failed: no one-GPU rows to fit the engine terms on"):
        tf.calibrate_static(rows, load_efficiency())
    with pytest.raises(UserError, match="fit failed: no one-GPU or dense TP rows"):
        tf.calibrate_static([r for r in rows if r[2] == "Mixtral-8x7B"], load_efficiency(), vendor=True)
    with pytest.raises(UserError, match="fit failed: 4 one-GPU and dense TP rows, fewer rows than the 7 terms"):
        tf.calibrate_static(rows[:4], load_efficiency(), vendor=True)


def test_mi300x_report_never_fits_on_a_row_it_holds_out(monkeypatch) -> None:
    fitted: list[list[tuple[str, int]]] = []

    def fake_fit(rows, base):
        fitted.append([(m, r.gpus) for r, _, m in rows])
        return base, 0.0

    monkeypatch.setattr(tf, "vendor_fit", fake_fit)
    monkeypatch.setattr(tf, "simulate", lambda rows, eff: np.ones(len(rows)))
    shapes = [(m, tp) for m in ("Llama-3-8B", "Llama-2-7B", "Llama-2-70B", "Llama-3-70B") for tp in (1, 2, 8)]
    rows = [(Row(i, "MI300X", tp, m, 64, 64, 1, 1.0), "MI300X", m) for i, (m, tp) in enumerate(shapes)]
    doc, _, lines = tf._vendor_report("MI300X", rows, load_efficiency(), load_efficiency())
    assert fitted == [[("Llama-3-8B", 1), ("Llama-2-7B", 1), ("Llama-2-70B", 1), ("Llama-3-8B", 8)]]
    held = doc["held_out"]
    assert held["all held-out"]["after"]["rows"] == 8 and "Llama-3-8B TP1" not in held and "Llama-3-8B TP8" not in held
    assert held["Llama-3-8B TP2"]["after"]["rows"] == 1 and held["MI300X TP1"]["after"]["rows"] == 1
    assert {f"Llama-3-70B TP{tp}" for tp in (1, 2, 8)} <= set(held)


def test_mi250_rows_count_boards_of_two_gpus_and_calibrate_at_each_models_smallest_tp(tmp_path) -> None:
    """argonne's `Num of Hardware` counts MI250 boards (two GCDs, two GPUs to vLLM): 1, 2 and 4 boards are TP2, 4
    and 8 on the catalog's per-GCD MI250; Llama-2-70B has no single-board row (it does not fit on 128 GB) and its
    calibration rows are its smallest TP (4), the 7-8B models' TP2."""
    from llumverify.settings.config import HardwareConfig
    from llumverify.validation.static_batch import static_rows

    csv = tmp_path / "mi250.csv"
    csv.write_text("Hardware,Num of Hardware,Framework,Model,Input Output Length,Batch Size,Latency\n" + "".join(
        f"AMD MI250 GPU,{n},vLLM,{m},128,1,1.0\n" for m, n in (("meta-llama/Meta-Llama-3-8B", 1),
                                                              ("meta-llama/Meta-Llama-3-8B", 4),
                                                              ("meta-llama/Llama-2-70b-hf", 2),
                                                              ("meta-llama/Llama-2-70b-hf", 4),
                                                              ("meta-llama/Llama-2-7b-hf", 2))) +
        "Nvidia H100 GPU,2,vLLM,meta-llama/Meta-Llama-3-8B,128,1,1.0\n")
    rows, skipped = static_rows(csv, HardwareConfig(), tp=None)
    assert not skipped
    assert [(g, m, r.gpus) for r, g, m in rows] == [
        ("MI250", "Llama-3-8B", 2), ("MI250", "Llama-3-8B", 8), ("MI250", "Llama-2-70B", 4), ("MI250", "Llama-2-70B", 8),
        ("MI250", "Llama-2-7B", 4), ("H100", "Llama-3-8B", 2)]
    calib = tf.vendor_calibration_rows([r for r in rows if r[1] == "MI250"])
    assert [(m, r.gpus) for r, _, m in calib] == [("Llama-3-8B", 2), ("Llama-2-70B", 4), ("Llama-2-7B", 4),
                                                  ("Llama-3-8B", 8)]


def test_amd_leave_one_gpu_out_scores_each_gpu_with_the_other_gpus_terms_only(monkeypatch) -> None:
    """Every row of the GPU left out (MoE too) is simulated with the terms fitted on the other AMD GPU."""
    import dataclasses as dc

    effs = {"MI250": dc.replace(load_efficiency(), layer_ns=1), "MI300X": dc.replace(load_efficiency(), layer_ns=2)}
    used: dict[str, set[int]] = {}

    def fake_simulate(rows, eff):
        used.setdefault(rows[0][1], set()).add(eff.layer_ns)
        return np.array([1.5 if eff.layer_ns == 1 else 0.9] * len(rows))

    monkeypatch.setattr(tf, "simulate", fake_simulate)
    rows = {g: [(Row(i, g, tp, m, 64, 64, 1, 1.0), g, m) for i, (m, tp) in
                enumerate([("Llama-3-8B", 2), ("Mixtral-8x7B", 2), ("Llama-2-70B", 8)])] for g in effs}
    doc, lines = tf.vendor_leave_one_gpu_out(rows, effs)
    assert used == {"MI250": {2}, "MI300X": {1}}
    assert doc["MI250"]["fitted_on"] == "MI300X" and doc["MI250"]["all"]["rows"] == 3
    assert doc["MI250"]["TP2"]["rows"] == 2 and doc["MI250"]["TP8"]["median_signed"] == pytest.approx(-0.1)
    assert doc["MI300X"]["all"]["median_ape"] == pytest.approx(0.5)
    assert "| MI250 TP2 | 2 | 10.0 % | 10.0 % | -10.0 % | MI300X own calibration |" in lines


def test_vendor_transfer_keeps_the_per_sequence_gemm_cost_in_absolute_time() -> None:
    """VENDOR_TRANSFER: seq_gparam_ns + the roofline's compute time of one token row through a billion weights is
    the same on both GPUs (MI300X's datasheet peak is 7.2x an MI250 GCD's); hbm_bw_scale follows the measured
    streaming-read shares (MI300X 0.792, an MI250 GCD's HBM2e 0.853); every other term is reused unchanged."""
    eff = dataclasses.replace(load_efficiency(), seq_gparam_ns=0, layer_ns=270_000, hbm_bw_scale=0.9)
    row = {g: tf.gemm_row_ns(g, eff) for g in ("MI250", "MI300X")}
    assert row["MI250"] / row["MI300X"] == pytest.approx(1307.4 / 181.05)
    to_mi300x = tf.vendor_transfer(eff, "MI250", "MI300X")
    assert to_mi300x.seq_gparam_ns == round(row["MI250"] - row["MI300X"]) == 12_534
    assert to_mi300x.hbm_bw_scale == 0.8362  # MI300X's own calibration: 0.825
    assert dataclasses.replace(to_mi300x, seq_gparam_ns=0, hbm_bw_scale=0.9) == eff
    back_from = dataclasses.replace(eff, hbm_bw_scale=0.825)
    assert tf.vendor_transfer(back_from, "MI300X", "MI250").hbm_bw_scale == 0.8879  # MI250's own: 0.9
    back = tf.vendor_transfer(dataclasses.replace(eff, seq_gparam_ns=30_000), "MI300X", "MI250")
    assert back.seq_gparam_ns == round(30_000 + row["MI300X"] - row["MI250"]) == 17_466
    assert tf.vendor_transfer(eff, "MI300X", "MI250").seq_gparam_ns == 0  # never below zero
    assert tf.vendor_transfer(eff, "MI250", "MI250") == eff


def test_transfer_decomposition_swaps_one_term_at_a_time_to_the_held_out_gpus_own_value(monkeypatch) -> None:
    effs = {"MI250": dataclasses.replace(load_efficiency(), layer_ns=270_000, seq_gparam_ns=0, seq_ns=60_000),
            "MI300X": dataclasses.replace(load_efficiency(), layer_ns=120_000, seq_gparam_ns=30_000, seq_ns=60_000)}
    seen: list[tuple[str, int, int]] = []

    def fake_simulate(rows, eff):
        seen.append((rows[0][1], eff.layer_ns, eff.seq_gparam_ns))
        return np.full(len(rows), 0.9 if eff.seq_gparam_ns else 1.2)

    monkeypatch.setattr(tf, "simulate", fake_simulate)
    rows = {g: [(Row(i, g, tp, "Llama-3-8B", 64, 64, 1, 1.0), g, "Llama-3-8B") for i, tp in enumerate((2, 8))]
            for g in effs}
    doc, lines = tf.transfer_decomposition(rows, effs)
    assert seen == [("MI250", 120_000, 30_000), ("MI250", 270_000, 30_000), ("MI250", 120_000, 0),
                    ("MI250", 270_000, 0), ("MI300X", 270_000, 0), ("MI300X", 120_000, 0),
                    ("MI300X", 270_000, 30_000), ("MI300X", 120_000, 30_000)]  # seq_ns is equal: never swapped
    swapped = doc["MI300X"]["swapped"]
    assert list(swapped) == ["none (reused unchanged)", "layer_ns 270,000 -> 120,000", "seq_gparam_ns 0 -> 30,000",
                             "all (its own calibration)"]
    assert swapped["seq_gparam_ns 0 -> 30,000"]["TP8"]["median_signed"] == pytest.approx(-0.1)
    assert "| MI300X (from MI250) | none (reused unchanged) | +20.0 % (20.0 %) | +20.0 % | +20.0 % |" in lines


# the bars the MI300X-calibrated terms reach on the held-out MI300X rows (measured: 8.2 % all; 8.4 / 10.8 / 6.1 /
# 8.0 % at TP1 / 2 / 4 / 8; 70B groups 7.2-18.6 %, they were 21-36 % with a per-sequence constant fitted on 7-8B rows;
# before kv_bw_v1: 10.0 %, TP2 13.6 %)
MI300X_BAR = {"all held-out": 0.09, "TP1": 0.09, "TP2": 0.12, "TP4": 0.07, "TP8": 0.09, "70B": 0.20}
REPORT_JSON = Path(__file__).resolve().parents[1] / "reports" / "validation" / "public-static-batch" / "validation.json"


def test_mi300x_held_out_error_is_pinned_in_the_committed_report() -> None:
    """The MI300X rows no fit saw (reports/validation/index.md section 4): the NVIDIA-transferred terms
    are 40-80 % off, the MI300X-calibrated ones below the bars pinned here. Regenerate the report with
    `llumverify validation-report --public-csv ...` after changing the model; this test then checks it."""
    doc = json.loads(REPORT_JSON.read_text())["MI300X"]
    assert doc["calibration"]["rows"] == "Llama-3-8B TP1, Llama-2-7B TP1, Llama-2-70B TP1, Llama-3-8B TP8"
    held = doc["held_out"]
    assert held["all held-out"]["before"]["median_ape"] > 0.4
    assert held["all held-out"]["after"]["median_ape"] < MI300X_BAR["all held-out"]
    for tp in (1, 2, 4, 8):
        assert held[f"MI300X TP{tp}"]["after"]["median_ape"] < MI300X_BAR[f"TP{tp}"], tp
    seventy = {k: v["after"]["median_ape"] for k, v in held.items() if "70B" in k}
    assert len(seventy) == 7 and "Llama-2-70B TP1" not in seventy  # calibration rows are never scored
    assert max(seventy.values()) < MI300X_BAR["70B"], seventy


# the held-out NVIDIA TP rows with the NCCL-fitted NVLink terms and Hopper at compute scale 1 (measured: H100 TP2
# 4.7 %, TP4 9.2 %, Llama-2-70B / Llama-3-70B / Qwen2-72B on H100 TP4 6.9 / 7.1 / 9.6 %, Mixtral-8x7B on A100-40GB
# TP4 8.4 %; issue bar 15 %)
TP_BAR = {"H100 TP2": 0.07, "H100 TP4": 0.10, "Llama-2-70B on H100 TP4": 0.07, "Llama-3-70B on H100 TP4": 0.08,
          "Qwen2-72B on H100 TP4": 0.10, "MoE Mixtral-8x7B on A100-40GB TP4": 0.10}


def test_section_4_scores_only_rows_outside_the_a100_calibration(monkeypatch) -> None:
    """held_out_table: tp_step_ns fitted on the dense A100-40GB TP rows (or kept as given), those and the
    one-GPU rows never scored, MoE rows on their own too."""
    base = load_efficiency()
    monkeypatch.setattr(tf, "fit_engine_terms", lambda rows, b: (b, 0.0))
    truth = dataclasses.replace(base, tp_step_ns=200_000)
    rows = (rows_with_truth(base, "A100-40GB") + rows_with_truth(truth, "A100-40GB", tp=2)
            + rows_with_truth(truth, "H100", tp=2) + rows_with_truth(truth, "A100-40GB", tp=4, models=("Mixtral-8x7B",)))
    one, tp_calib, eff, _, calib_tp, table = tf.held_out_table(rows, base)
    assert (len(one), len(tp_calib), eff.tp_step_ns) == (5, 5, 200_000) and calib_tp < 1e-6
    assert set(table) == {"H100 TP2", "A100-40GB TP4", "MoE Mixtral-8x7B on A100-40GB TP4"}
    assert table["H100 TP2"]["rows"] == 5 and table["H100 TP2"]["median_ape"] < 1e-6
    _, _, kept, _, _, table = tf.held_out_table(rows, base, tp_step_ns=0)
    assert kept.tp_step_ns == 0 and table["H100 TP2"]["median_signed"] < 0  # without the TP overhead: too fast


def test_nvidia_tp_held_out_error_is_pinned_with_the_catalog_interconnects() -> None:
    """Section 4's TP rows were simulated with the NVLink terms the catalog ships now (a change to
    sim/catalog/gpus.toml's interconnects fails here until the report is regenerated) and stay below the bars."""
    from llumverify.sim.catalog import get_interconnect

    doc = json.loads(REPORT_JSON.read_text())
    links = doc["calibration"]["interconnects"]
    assert set(links) == {"NVLink3", "NVLink4"}
    for name, terms in links.items():
        assert terms == {k: getattr(get_interconnect(name), k) for k in tf.LINK_TERMS}, name
    for key, bar in TP_BAR.items():
        assert doc["held_out"][key]["median_ape"] < bar, (key, doc["held_out"][key])


@pytest.mark.slow
@pytest.mark.usefixtures("small_vendor_grid")
def test_vendor_terms_are_recovered_from_their_own_latencies() -> None:
    """Two model sizes tell the per-sequence terms apart (seq_ns is per sequence, seq_gparam_ns grows with
    the weights a token meets: Llama-2-70B's are 9.8x Llama-3-8B's), TP2 rows give tp_step_ns."""
    base = load_efficiency()
    truth = dataclasses.replace(base, kv_per_query_head=True, kv_bw=round(base.kv_bw * 0.3, 4), layer_ns=150_000,
                                seq_ns=40_000, seq_gparam_ns=30_000, hbm_bw_scale=0.825, tp_step_ns=500_000)
    rows = (rows_with_truth(truth, "MI300X", models=("Llama-3-8B", "Llama-2-70B"))
            + rows_with_truth(truth, "MI300X", tp=2))
    eff, err = tf.vendor_fit(rows, base)
    got = (eff.kv_bw, eff.layer_ns, eff.seq_ns, eff.seq_gparam_ns, eff.hbm_bw_scale, eff.tp_step_ns, eff.fixed_ns)
    assert got == (truth.kv_bw, 150_000, 40_000, 30_000, 0.825, 500_000, 0)
    assert err < 1e-6


@pytest.fixture
def small_vendor_grid(monkeypatch) -> None:
    """vendor_fit's outer search cut to 18 of its 120 (KV, V1, HBM) points, the truths of these tests
    inside (KV 0.3, V1 1.0, HBM 0.825) with a wrong point either side where there is one: the search is
    a plain product loop, the linear terms are still fitted on their full grids (CI time: 30 -> 5 s)."""
    monkeypatch.setattr(tf, "KV_SCALES", (0.2, 0.3, 0.5))
    monkeypatch.setattr(tf, "V1_SHARES", (1.0, 0.5))
    monkeypatch.setattr(tf, "VENDOR_HBM_SCALES", (0.75, 0.825, 0.9))


@pytest.mark.slow
@pytest.mark.usefixtures("small_vendor_grid")
def test_calibrate_vendor_fit_writes_terms_that_validate_reads_back_to_the_fitted_latencies(tmp_path, capsys) -> None:
    """calibrate --static-batch --vendor-fit on batches generated by known MI300X terms writes those
    terms (layer_ns, kv_bw, kv_per_query_head among them); validate --engine-terms then simulates the
    same latencies (median APE 0)."""
    from llumverify.cli import main

    base = load_efficiency()
    truth = dataclasses.replace(base, kv_per_query_head=True, kv_bw=round(base.kv_bw * 0.3, 4), layer_ns=150_000,
                                seq_ns=40_000, seq_gparam_ns=30_000, hbm_bw_scale=0.825)
    csv = tmp_path / "mi300x.csv"
    csv.write_text("Hardware,Num of Hardware,Framework,Model,Input Output Length,Batch Size,Latency,Throughput\n" + "".join(
        f"AMD MI300X GPU,1,vLLM,{m},{r.prompt},{r.batch},{r.latency_s!r},1\n"
        for r, _, m in rows_with_truth(truth, "MI300X", models=("Llama-3-8B", "Llama-2-70B"))))
    out = tmp_path / "terms.toml"

    def cli(*args: str) -> int:
        with pytest.raises(SystemExit) as exc:
            main(list(args))
        return exc.value.code

    assert cli("calibrate", "--static-batch", str(csv), "--hardware", "AMD MI300X GPU", "--vendor-fit",
               "--out", str(out)) == 0
    read = tf.load_engine_terms(out, base)
    assert (read.layer_ns, read.kv_bw, read.kv_per_query_head, read.seq_ns, read.seq_gparam_ns, read.hbm_bw_scale,
            read.fixed_ns) == (150_000, truth.kv_bw, True, 40_000, 30_000, 0.825, 0)
    res = tmp_path / "v"
    assert cli("validate", "--static-batch", str(csv), "--engine-terms", str(out), "--out", str(res)) == 0
    assert json.loads((res / "validation.json").read_text())["median_ape"] < 1e-6
    for source in (["--gpu", "MI300X", "--model", "Llama-3-8B"], ["--step-cost", str(out)]):  # would be ignored
        assert cli("calibrate", "--static-batch", str(csv), "--vendor-fit", *source, "--out", str(tmp_path / "x.toml")) == 2
        assert "--vendor-fit fits first-principles engine terms" in capsys.readouterr().err


# MI250 (2024 ROCm vLLM, per GCD) calibrated on its own rows (measured: 6.3 % on the 318 held-out rows; TP2 / 4 / 8
# 7.7 / 7.4 / 5.0 %; Qwen2-72B, which no fit saw, 4.5 %), and the AMD leave-one-GPU-out by VENDOR_TRANSFER (measured:
# MI250 from MI300X's terms 9.4 %, MI300X from MI250's 19.6 %, over the 12 % bar, pinned so a change shows; with every
# term reused unchanged they were 10.5 and 27.3 %, the decomposition's first row)
MI250_BAR = {"all held-out": 0.07, "TP2": 0.085, "TP4": 0.085, "TP8": 0.06, "Qwen2-72B TP8": 0.06}
AMD_LOGO_BAR = {"MI250": 0.10, "MI300X": 0.21}


def test_mi250_and_amd_leave_one_gpu_out_are_pinned_in_the_committed_report() -> None:
    doc = json.loads(REPORT_JSON.read_text())
    mi250 = doc["MI250"]
    assert mi250["calibration"]["rows"] == "Llama-3-8B TP2, Llama-2-7B TP2, Llama-2-70B TP4, Llama-3-8B TP8"
    held = mi250["held_out"]
    assert held["all held-out"]["before"]["median_ape"] > 0.35  # NVIDIA terms: far off
    assert held["all held-out"]["after"]["median_ape"] < MI250_BAR["all held-out"]
    for tp in (2, 4, 8):
        assert held[f"MI250 TP{tp}"]["after"]["median_ape"] < MI250_BAR[f"TP{tp}"], tp
    assert held["Qwen2-72B TP8"]["after"]["median_ape"] < MI250_BAR["Qwen2-72B TP8"]
    logo = doc["amd_leave_one_gpu_out"]
    assert {g: v["fitted_on"] for g, v in logo.items()} == {"MI250": "MI300X", "MI300X": "MI250"}
    for gpu, bar in AMD_LOGO_BAR.items():
        assert logo[gpu]["all"]["median_ape"] < bar, gpu
    assert logo["MI250"]["all"]["rows"] == 393 and logo["MI300X"]["all"]["rows"] == 719  # every row, MoE too
    # the decomposition: reused unchanged, MI300X is simulated >20 % too fast; its own seq_gparam_ns alone removes
    # nearly all of the bias (measured -22.3 % -> -0.9 %), its own layer_ns alone doubles it (-39.8 %)
    swapped = doc["amd_transfer_decomposition"]["MI300X"]["swapped"]
    assert swapped["none (reused unchanged)"]["all"]["median_signed"] < -0.2
    assert abs(swapped["seq_gparam_ns 0 -> 30,000"]["all"]["median_signed"]) < 0.02
    assert swapped["layer_ns 270,000 -> 120,000"]["all"]["median_signed"] < -0.35
    assert logo["MI300X"]["all"]["median_signed"] > swapped["none (reused unchanged)"]["all"]["median_signed"] + 0.08


def test_paged_attention_v1_rule_and_llama3_sibling_ratios_in_the_committed_report() -> None:
    """vLLM's rule (num_seqs x query heads per GPU > 512, contexts over one 512-token partition) and what the
    committed report measured with it: on ROCm Llama-3 is >= 1.2x its Llama-2 sibling where V1 runs, ~1x elsewhere."""
    from llumverify.validation.rocm_attention import runs_v1

    assert runs_v1("Llama-3-70B", 1, 16, 1024) and not runs_v1("Llama-3-70B", 1, 8, 1024)  # 16 x 64 > 512 = 8 x 64
    assert runs_v1("Llama-3-70B", 4, 64, 1024) and not runs_v1("Llama-3-70B", 8, 64, 1024)  # 64 x 16 vs 64 x 8
    assert not runs_v1("Llama-3-70B", 1, 64, 512)  # contexts up to 512: one partition
    rows = {(t["gpu"], t["pair"]): t for t in json.loads(REPORT_JSON.read_text())["llama3_over_llama2"]}
    for gpu in ("MI300X", "MI250"):
        for pair in ("Llama-3-70B / Llama-2-70B", "Llama-3-8B / Llama-2-7B"):
            t = rows[(gpu, pair)]
            assert t["v1"]["median"] > 1.2 and 0.97 < t["v2"]["median"] < 1.05, (gpu, pair)
    assert rows[("H100", "Llama-3-70B / Llama-2-70B")]["v1"]["median"] < 1.05


def test_leave_one_gpu_out_reports_the_90th_percentile_of_the_held_out_errors(monkeypatch) -> None:
    """Held-out APEs 0.1 and 0.3: the median is 0.2, the P90 (linear, rank 0.9 x 1) 0.1 + 0.9 x 0.2 = 0.28."""
    monkeypatch.setattr(tf, "fit_engine_terms", lambda rows, base: (base, 0.0))
    monkeypatch.setattr(tf, "ape", lambda rows, eff: np.array([0.1, 0.3][:len(rows)]))
    rows = [(Row(i, g, 1, "Llama-3-8B", 64, 64, 1, 1.0), g, "Llama-3-8B") for i, g in enumerate(["A", "B", "A", "B"])]
    out = tf.leave_one_gpu_out(rows, load_efficiency())
    assert out["A"]["median_ape"] == pytest.approx(0.2) and out["A"]["p90_ape"] == pytest.approx(0.28)
