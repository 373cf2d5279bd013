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


def rows_with_truth(eff, gpu: str, tp: int = 1) -> list[tuple[Row, str, str]]:
    """Small static batches whose 'measured' latency is the simulator's under `eff`."""
    shapes = [(64, 1), (64, 8), (128, 4), (128, 16), (96, 2)]
    rows = [(Row(i, gpu, tp, "Llama-3-8B", length, batch, 1.0), gpu, "Llama-3-8B")
            for i, (length, batch) in enumerate(shapes)]
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
    rows = [(Row(i, g, 1, "Llama-3-8B", 64, 1, 1.0), g, "Llama-3-8B") for i, g in enumerate(["A", "B", "C", "A"])]
    out = tf.leave_one_gpu_out(rows + [(Row(9, "A", 2, "Llama-3-8B", 64, 1, 1.0), "A", "Llama-3-8B")],
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
    path.write_text("fixed_ns = 1\nseq = 2\n")
    with pytest.raises(UserError, match="unknown key 'seq'"):
        tf.load_engine_terms(path, load_efficiency())
    path.write_text("seq_ns = -5\n")
    with pytest.raises(UserError, match="seq_ns must be a whole ns >= 0"):
        tf.load_engine_terms(path, load_efficiency())
    path.write_text("hbm_bw_scale = 0\n")
    with pytest.raises(UserError, match="hbm_bw_scale must be a number in"):
        tf.load_engine_terms(path, load_efficiency())


def test_mi300x_report_never_fits_on_a_row_it_holds_out(monkeypatch) -> None:
    fitted: list[list[tuple[str, int]]] = []

    def fake_fit(rows, base):
        fitted.append([(m, r.gpus) for r, _, m in rows])
        return base, 0.0

    monkeypatch.setattr(tf, "vendor_fit", fake_fit)
    monkeypatch.setattr(tf, "fit_tp_step", fake_fit)
    monkeypatch.setattr(tf, "simulate", lambda rows, eff: np.ones(len(rows)))
    shapes = [(m, tp) for m in ("Llama-3-8B", "Llama-2-7B", "Qwen2-7B") for tp in (1, 2, 4)]
    rows = [(Row(i, "MI300X", tp, m, 64, 1, 1.0), "MI300X", m) for i, (m, tp) in enumerate(shapes)]
    doc, lines = tf._vendor_report(rows, load_efficiency(), load_efficiency())
    assert fitted == [[("Llama-3-8B", 1), ("Llama-2-7B", 1)], [("Llama-3-8B", 2)]]
    held = doc["held_out"]
    assert held["all held-out"]["after"]["rows"] == 6 and "Llama-3-8B TP1" not in held and "Llama-3-8B TP2" not in held
    assert held["Llama-3-8B TP4"]["after"]["rows"] == 1 and held["MI300X TP1"]["after"]["rows"] == 1


# the bar the MI300X-calibrated terms reach on the held-out MI300X rows (measured 13.7 % all, 12.7-15.2 % per TP)
MI300X_BAR = {"all held-out": 0.15, "per TP": 0.16}
REPORT_JSON = Path(__file__).resolve().parents[1] / "reports" / "validation" / "public-static-batch" / "validation.json"


def test_mi300x_held_out_error_is_pinned_in_the_committed_report() -> None:
    """The MI300X rows no fit saw (reports/validation/index.md section 4): the NVIDIA-transferred terms
    are 40-80 % off, the MI300X-calibrated ones below the bar pinned here. Regenerate the report with
    `llumverify validation-report --public-csv ...` after changing the model; this test then checks it."""
    doc = json.loads(REPORT_JSON.read_text())["MI300X"]
    assert doc["calibration"]["one_gpu"] == "Llama-3-8B, Llama-2-7B TP1"
    assert doc["calibration"]["tp"] == "Llama-3-8B TP2"
    held = doc["held_out"]
    assert held["all held-out"]["before"]["median_ape"] > 0.4
    assert held["all held-out"]["after"]["median_ape"] < MI300X_BAR["all held-out"]
    for tp in (1, 2, 4, 8):
        assert held[f"MI300X TP{tp}"]["after"]["median_ape"] < MI300X_BAR["per TP"], tp


@pytest.mark.slow
def test_vendor_terms_are_recovered_from_their_own_latencies() -> None:
    base = load_efficiency()
    truth = dataclasses.replace(base, kv_per_query_head=True, kv_bw=round(base.kv_bw * 0.3, 4), layer_ns=150_000,
                                seq_ns=40_000, hbm_bw_scale=0.85)
    eff, err = tf.vendor_fit(rows_with_truth(truth, "MI300X"), base)
    got = (eff.kv_bw, eff.layer_ns, eff.seq_ns, eff.hbm_bw_scale, eff.fixed_ns)
    assert got == (truth.kv_bw, 150_000, 40_000, 0.85, 0)
    assert err < 1e-6
