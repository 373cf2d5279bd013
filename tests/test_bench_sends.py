"""A `vllm bench serve` result without start_times: its sends redrawn as vLLM drew them, and checked
against the run's recorded duration (llumverify/validation/bench_sends.py)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from test_bench_result import ROWS, _bench, _numbers, cli

from llumverify.validation.bench_sends import RULES, schedules


def _e2e() -> np.ndarray:
    return np.array([f - q + (last - f) for *_, q, f, last in ROWS])


def test_each_rule_is_the_one_vllm_ran() -> None:
    """vLLM < 0.10 yields request i, then sleeps one np.random.gamma draw of the global generator seeded
    with --seed; vLLM >= 0.10 draws every gap first, cumulates and rescales to n / rate. Drawing all
    gaps at once takes the same numbers from numpy's legacy stream as drawing one per request, and
    gamma with shape 1 is the exponential older versions drew."""
    n, rate, b = 24, 5.0, 1.0
    np.random.seed(3)
    gaps = [np.random.gamma(shape=b, scale=1.0 / (rate * b)) for _ in range(n)]
    np.random.seed(3)
    assert [np.random.exponential(1.0 / rate) for _ in range(n)] == gaps
    found = schedules(n, rate, b, 3)
    legacy = [0.0] + list(np.cumsum(gaps)[:-1])
    assert found[RULES[0]] == pytest.approx(legacy, rel=1e-12)
    assert found[RULES[1]][-1] == pytest.approx(n / rate) and found[RULES[1]][0] == pytest.approx(
        gaps[0] * (n / rate) / sum(gaps))
    assert list(schedules(n, float("inf"), b, 3).values())[0].tolist() == [0.0] * n


@pytest.mark.parametrize("rule", [0, 1])
def test_a_result_without_start_times_replays_as_with_the_sends_it_ran_with(rule: int, tmp_path: Path,
                                                                             capsys: pytest.CaptureFixture) -> None:
    """The redrawn sends, and which rule ran, follow from the recorded duration: the same scores as the
    file with those sends written in."""
    sends = schedules(len(ROWS), 5.0, 0.5, 7)[RULES[rule]]
    duration = float(np.max(sends + _e2e())) + 0.05
    traffic = {"request_rate": 5.0, "burstiness": 0.5, "duration": duration, "max_concurrency": None}
    bare = _bench(tmp_path / "bare.json", **traffic)
    data = json.loads(bare.read_text())
    del data["start_times"]
    bare.write_text(json.dumps(data))
    given = _bench(tmp_path / "given.json", start_times=[float(t) for t in sends])
    common = ("--gpu", "H100", "--num-gpu-blocks", "5000", "--client-ms", "0")
    assert cli("validate", str(bare), *common, "--bench-seed", "7", "--out", str(tmp_path / "a")) == 0
    out = capsys.readouterr().out
    assert f"redrawn as vLLM's benchmark drew them, seed 7 (--bench-seed), {RULES[rule]}: they end the run 0.05 s" in out
    assert cli("validate", str(given), *common, "--out", str(tmp_path / "b")) == 0
    a, b = (json.loads((tmp_path / d / "validation.json").read_text()) for d in "ab")
    assert _numbers(a) == pytest.approx(_numbers(b), rel=1e-12)


def test_a_burst_is_split_by_send_order(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """request_rate inf sends everything at once: no window to split, so the first third of the requests
    calibrate."""
    bare = _bench(tmp_path / "b.json", request_rate="inf", duration=float(np.max(_e2e())) + 0.01)
    data = json.loads(bare.read_text())
    del data["start_times"]
    bare.write_text(json.dumps(data))
    assert cli("validate", str(bare), "--gpu", "H100", "--out", str(tmp_path / "o")) == 0
    assert "request_rate inf (all at once)" in capsys.readouterr().out
    doc = json.loads((tmp_path / "o" / "validation.json").read_text())
    assert doc["calibration_part"]["ids"] == "the first 0.333 of the requests in send order (all sent at once)"
    assert doc["calibration_part"]["n_requests"] == 8 and doc["validation_part"]["n_requests"] == 16


@pytest.mark.parametrize("traffic, args, message", [
    ({"request_rate": 5.0, "duration": 1.0}, [], "do not end the run at its recorded duration 1.00 s (vLLM < 0.10"),
    ({"request_rate": 5.0}, [], "no start_times and no duration: redrawn sends could not be checked"),
    ({"request_rate": 5.0, "duration": 9.0, "max_concurrency": 4}, [], "and max_concurrency 4: the client held"),
    ({"request_rate": 5.0, "duration": 9.0, "ramp_up_strategy": "linear"}, [], "and ramp_up_strategy 'linear'"),
    ({"request_rate": -1, "duration": 9.0}, [], "request_rate must be > 0, got -1"),
    ({"request_rate": 5.0, "duration": 9.0}, ["--bench-seed", "-1"], "--bench-seed must be in [0, 4294967295]"),
])
def test_sends_that_cannot_be_redrawn_are_refused(traffic: dict, args: list[str], message: str, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture) -> None:
    bare = _bench(tmp_path / "b.json", **traffic)
    data = json.loads(bare.read_text())
    del data["start_times"]
    bare.write_text(json.dumps(data))
    assert cli("validate", str(bare), "--gpu", "H100", *args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err, err


def test_bench_seed_only_where_sends_are_redrawn(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert cli("validate", str(_bench(tmp_path / "b.json")), "--gpu", "H100", "--bench-seed", "1") == 2
    assert "has start_times: --bench-seed (which redraws missing ones) does not apply" in capsys.readouterr().err
