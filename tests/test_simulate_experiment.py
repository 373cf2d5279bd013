"""`llumverify simulate EXPERIMENT.toml` runs the experiment file through the sweep machinery."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llumverify.cli import main

QUICK = Path(__file__).resolve().parents[1] / "experiments" / "quick.toml"


def test_simulate_runs_an_experiment_file(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["simulate", str(QUICK), "--out", str(tmp_path)])
    assert exit_.value.code == 0
    doc = json.loads((tmp_path / "results.json").read_text())
    rows = (tmp_path / "results.csv").read_text().splitlines()
    assert len(rows) - 1 == len(doc["rows"]) > 0
    assert "results.csv" in capsys.readouterr().out


def test_simulate_experiment_file_rejects_other_options(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["simulate", str(QUICK), "--rate", "3", "--out", str(tmp_path)])
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "drop --rate" in err
    assert not (tmp_path / "results.csv").exists()
