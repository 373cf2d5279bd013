"""llumverify/validation/transfer_fit.py: the engine terms are recovered from latencies they generated, and
leave-one-GPU-out never fits on the GPU it reports."""

from __future__ import annotations

import dataclasses

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
