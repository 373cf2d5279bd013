"""Fast guards on the numbers reports/validation/index.md and the static-batch scores are made of
(llumverify/validation/report.py, static_batch.errors), written by a slip hunt: each one fails on a
one-line slip that every other test let through, and asserts a value worked out by hand."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from llumverify.validation import report
from llumverify.validation.static_batch import Row, errors

RUNS = Path(__file__).parent / "bad_inputs" / "runs"


def test_the_report_s_errors_are_signed_simulated_over_real_each_against_its_own_statistic() -> None:
    """Mean 2.0 s real, 2.5 s simulated: +25 %; P90 4.0 s real, 3.0 s simulated: -25 % (not against the mean)."""
    doc = {"e2e": {"real_mean_s": 2.0, "sim_mean_s": 2.5, "real_p90_s": 4.0, "sim_p90_s": 3.0, "median_ape": 0.123}}
    assert report._err(doc, "e2e") == pytest.approx(0.25)
    assert report._row(doc, "e2e") == "| E2E | 2 | 2.5 | +25.0 % | 4 | 3 | -25.0 % | 12.3 % |"


def test_the_report_scores_its_validation_part_on_the_held_out_requests(tmp_path, monkeypatch) -> None:
    """Six requests 0.1 s apart: the first third of the 0.5 s window (up to 0.167 s) holds two, calibration;
    the other four are the validation part, in the report's numbers and in its validation.json."""
    from llumverify.settings.config import HardwareConfig
    from llumverify.sim import engine_profile
    from llumverify.validation import plots
    from llumverify.validation import replay as validation

    monkeypatch.setattr(plots, "plot_run", lambda *a: None)
    run = validation.load_run(RUNS / "ok", RUNS / "workload.jsonl")
    calib, held = validation.split_ids(run)
    assert (list(calib), list(held)) == ([0, 1], [2, 3, 4, 5])
    doc = report._run_case(tmp_path, run, engine_profile.step_cost(HardwareConfig(gpu="H100", model="Llama-3.1-8B")),
                           calib, held)
    assert (doc["calibration_part"]["n_requests"], doc["validation_part"]["n_requests"], doc["n_requests"]) == (2, 4, 6)
    assert json.loads((tmp_path / "validation.json").read_text())["validation_part"] == doc["validation_part"]


def test_the_report_fits_the_static_engine_terms_on_the_a100_rows_alone(tmp_path, monkeypatch) -> None:
    """Section 3: the terms are fitted on the calibration GPU's rows; the H100 row is only scored."""
    from llumverify.sim.roofline import load_efficiency
    from llumverify.validation import transfer_fit

    fitted_on = []

    def fit(rows, base):
        fitted_on.append(sorted(g for _, g, _ in rows))
        return load_efficiency(), 0.0

    monkeypatch.setattr(transfer_fit, "fit_engine_terms", fit)
    csv = tmp_path / "static.csv"
    csv.write_text("Hardware,Num of Hardware,Model,Input Output Length,Batch Size,Latency\n"
                   "Nvidia A100 GPU,1,meta-llama/Llama-2-7b-hf,64,2,1.0\nNvidia H100 GPU,1,meta-llama/Llama-2-7b-hf,64,2,1.0\n")
    summary = report._static(csv, tmp_path / "out")
    assert fitted_on == [["A100-40GB"]]
    assert summary["n_calib"] == 1 and summary["rows_by_gpu"] == {"A100-40GB": 1, "H100": 1}


def test_static_batch_errors_are_against_the_measured_latency_and_their_median() -> None:
    """Measured 2.0, 1.0, 1.0 s, simulated 3.0, 1.1, 0.2 s: APEs 0.5, 0.1, 0.8 (over the measured time), median 0.5."""
    rows = [Row(2 + i, "H100", 1, "Llama-3-8B", 64, 64, 1, real) for i, real in enumerate((2.0, 1.0, 1.0))]
    doc = errors(rows, [3.0, 1.1, 0.2])
    assert [r["ape"] for r in doc["rows"]] == pytest.approx([0.5, 0.1, 0.8])
    assert doc["median_ape"] == pytest.approx(0.5) and doc["n_rows"] == 3
    assert np.isclose(doc["rows"][0]["sim_s"], 3.0) and doc["rows"][0]["real_s"] == 2.0
