"""The goodput report: its one-sentence finding compares the best P/D and colocated deployments
from the numbers, tables every deployment x policy, and `llumverify report` picks it for a
goodput folder."""

from __future__ import annotations

import json

import pytest

from llumverify.cli import main
from llumverify.study.goodput_report import deployment, finding


def _row(workload: str, pd: str, policy: str, per_gpu: float) -> dict:
    return {"workload": workload, "settings": {"cluster.pd": pd} if pd else {}, "policy": policy, "gpus": 8,
            "goodput_rps": 8 * per_gpu, "goodput_per_gpu": per_gpu, "status": "ok",
            "ci95": {"low_per_gpu": per_gpu * 0.9, "high_per_gpu": per_gpu * 1.1}}


DOC = {"name": "t", "target": 0.9, "tol": 0.05, "results": [
    _row("chat", "", "least-loaded", 2.0), _row("chat", "", "llumnix", 2.5), _row("chat", "2:6", "least-loaded", 3.0),
    _row("long", "", "least-loaded", 1.0), _row("long", "4:4", "llumnix", 0.5)]}


def test_the_finding_compares_the_best_of_each_kind():
    text = finding(DOC)
    assert "on chat the best disaggregated deployment (P/D 2:6, least-loaded, 3 req/s per GPU) beats the best " \
           "colocated one (llumnix, 2.5) by 1.20x" in text
    assert "on long the best disaggregated deployment (P/D 4:4, llumnix, 0.5 req/s per GPU) trails" in text
    assert "by 0.50x" in text


def test_deployment_names():
    assert deployment({}) == "colocated" and deployment({"cluster.pd": "2:6"}) == "P/D 2:6"


def test_report_command_writes_the_goodput_page(tmp_path):
    folder = tmp_path / "g"
    folder.mkdir()
    (folder / "goodput.json").write_text(json.dumps(DOC))
    with pytest.raises(SystemExit) as exc:
        main(["report", str(folder), "--reports-dir", str(tmp_path / "r")])
    assert exc.value.code == 0
    text = (tmp_path / "r" / "t" / "index.md").read_text()
    assert text.count("| P/D") == 2 and "| colocated | llumnix | 8 | 20 | 2.5 | 2.25 - 2.75 | ok |" in text


def test_a_broken_goodput_json_is_one_line(tmp_path, capsys):
    (tmp_path / "goodput.json").write_text("{}")
    with pytest.raises(SystemExit) as exc:
        main(["report", str(tmp_path), "--reports-dir", str(tmp_path / "r")])
    assert exc.value.code == 2 and capsys.readouterr().err.count("\n") == 1


def test_an_unbounded_search_is_not_turned_into_a_ratio():
    doc = {**DOC, "results": [{**_row("chat", "", "least-loaded", 9.0), "status": "unbounded", "requests": 400},
                              _row("chat", "2:6", "least-loaded", 3.0)]}
    text = finding(doc)
    assert "on chat no comparison: colocated met the target at every rate tried" in text and " by " not in text


def _one_seed(row: dict) -> dict:
    """A row as `llumverify goodput` writes it for one seed: no interval, its ends null."""
    return {**row, "ci95": {"n": 1, "mean_rps": row["goodput_rps"], "half_width_rps": None, "low_rps": None,
                            "high_rps": None, "mean_per_gpu": row["goodput_per_gpu"], "low_per_gpu": None,
                            "high_per_gpu": None}}


def test_a_search_s_own_outcomes_are_reported_one_seed_unbounded_and_never_met_included(tmp_path):
    """What the search writes is read back: a single seed's null interval (an empty cell), an unbounded search
    and a never-met one (goodput 0); a target of 1 is not one `goodput` takes."""
    never = {**_row("chat", "2:6", "least-loaded", 0.0), "status": "never-met"}
    doc = {**DOC, "results": [_one_seed(_row("chat", "", "llumnix", 2.5)),
                              {**_row("chat", "", "least-loaded", 9.0), "status": "unbounded", "requests": 400}, never]}
    (tmp_path / "g").mkdir()
    (tmp_path / "g" / "goodput.json").write_text(json.dumps(doc))
    with pytest.raises(SystemExit) as exc:
        main(["report", str(tmp_path / "g"), "--reports-dir", str(tmp_path / "r")])
    assert exc.value.code == 0
    text = (tmp_path / "r" / "t" / "index.md").read_text()
    assert "| colocated | llumnix | 8 | 20 | 2.5 |  | ok |" in text
    assert "| unbounded |" in text and "| never-met |" in text
    (tmp_path / "g" / "goodput.json").write_text(json.dumps({**doc, "target": 1.0}))
    with pytest.raises(SystemExit) as exc:
        main(["report", str(tmp_path / "g"), "--reports-dir", str(tmp_path / "r2")])
    assert exc.value.code == 2
