"""A `vllm bench serve` result without start_times: its sends redrawn as vLLM drew them, and checked
against the run's recorded duration (llumverify/validation/bench_sends.py)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from test_bench_result import ROWS, _bench, _numbers, cli

from llumverify.validation.bench_sends import BURST, FROM_010, PRE_010, RULES, schedules

N = len(ROWS)
E2E = np.array([last - q for *_, q, _, last in ROWS])


def vllm_pre_010(n: int, rate: float, burstiness: float, seed: int) -> tuple[list[float], float]:
    """What vLLM 0.8's get_request does, step by step: yield a request, draw a gap from the global
    generator, sleep it; the loop ends only after the last sleep. (sends, when the sleeping ends)."""
    np.random.seed(seed)
    now, sends = 0.0, []
    for _ in range(n):
        sends.append(now)
        now += np.random.gamma(shape=burstiness, scale=1.0 / (rate * burstiness))
    return sends, now


def test_each_rule_is_the_one_vllm_ran() -> None:
    """Drawing all gaps at once takes the same numbers from numpy's legacy stream as drawing one per
    request; gamma with shape 1 is the exponential older versions drew; vLLM 0.10 cumulates the gaps
    and rescales them to n / rate; burstiness inf is its constant gap."""
    sends, idle = vllm_pre_010(N, 5.0, 0.5, 3)
    found = schedules(N, 5.0, 0.5, 3)
    assert found[PRE_010].sends == pytest.approx(sends, rel=1e-12) and found[PRE_010].idle_until == pytest.approx(idle)
    np.random.seed(3)
    gaps = np.random.gamma(0.5, 1 / 2.5, N)
    assert found[FROM_010].sends == pytest.approx(np.cumsum(gaps) * (N / 5.0) / gaps.sum(), rel=1e-12)
    np.random.seed(3)
    exponential = [np.random.exponential(0.2) for _ in range(N)]
    assert schedules(N, 5.0, 1.0, 3)[PRE_010].sends[1:] == pytest.approx(np.cumsum(exponential)[:-1], rel=1e-12)
    assert list(schedules(N, 5.0, math.inf, 3)) == [FROM_010]
    assert schedules(N, 5.0, math.inf, 3)[FROM_010].sends == pytest.approx(np.arange(1, N + 1) / 5.0)
    assert schedules(N, math.inf, 1.0, 3)[BURST].sends.tolist() == [0.0] * N


def _bare(path: Path, **traffic: object) -> Path:
    """The test run as a result file without start_times, with these traffic fields."""
    doc = json.loads(_bench(path, **traffic).read_text())
    del doc["start_times"]
    path.write_text(json.dumps(doc))
    return path


COMMON = ("--gpu", "H100", "--num-gpu-blocks", "5000", "--client-ms", "0", "--client-us-per-token", "0")


def test_a_pre_010_run_is_redrawn_even_when_its_last_sleep_outlasts_every_request(tmp_path: Path,
                                                                                   capsys: pytest.CaptureFixture) -> None:
    """Built as vLLM 0.8 runs it at 1 req/s: the client's final sleep, not the last request, ends the
    recorded duration. The redrawn run scores as the same file with those sends written in."""
    sends, idle = vllm_pre_010(N, 1.0, 1.0, 0)
    duration = max(float(np.max(np.array(sends) + E2E)), idle) + 0.05
    assert idle > float(np.max(np.array(sends) + E2E))  # the case a check on requests alone refused
    bare = _bare(tmp_path / "bare.json", request_rate=1.0, burstiness=1.0, duration=duration, max_concurrency=0)
    assert cli("validate", str(bare), *COMMON, "--out", str(tmp_path / "a")) == 0
    out = " ".join(capsys.readouterr().out.split())  # printed lines wrap at 100 columns
    assert f"redrawn as vLLM's benchmark drew them, seed 0 (--bench-seed), {RULES[PRE_010]}: they end the run 0.05 s" in out
    given = _bench(tmp_path / "given.json", start_times=sends)
    assert cli("validate", str(given), *COMMON, "--out", str(tmp_path / "b")) == 0
    a, b = (json.loads((tmp_path / d / "validation.json").read_text()) for d in "ab")
    assert _numbers(a) == pytest.approx(_numbers(b), rel=1e-12)
    assert a["arrivals"].startswith("arrivals: not in the file (no start_times); redrawn") and b["arrivals"] == (
        "arrivals: start_times")
    assert cli("calibrate", "--run", str(bare), "--gpu", "H100", "--num-gpu-blocks", "5000",
               "--out", str(tmp_path / "c.toml")) == 0  # calibrate reads the same redrawn sends


def test_where_both_rules_fit_the_user_names_the_vllm(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """Seed 7 at 1 req/s: both rules end the run within 0.1 s of each other. The file cannot say which
    vLLM wrote it, so the choice is asked for, not guessed; named, the run replays as with its sends."""
    found = schedules(N, 1.0, 1.0, 7)
    ends = {r: max(float(np.max(s.sends + E2E)), s.idle_until) for r, s in found.items()}
    assert abs(ends[PRE_010] - ends[FROM_010]) < 0.2
    bare = _bare(tmp_path / "bare.json", request_rate=1.0, burstiness=1.0, duration=max(ends.values()) + 0.05)
    assert cli("validate", str(bare), *COMMON, "--bench-seed", "7") == 2
    err = capsys.readouterr().err
    assert "both of vLLM's send rules end the run within its recorded duration" in err and "--bench-rule" in err
    assert cli("validate", str(bare), *COMMON, "--bench-seed", "7", "--bench-rule", FROM_010,
               "--out", str(tmp_path / "a")) == 0
    assert RULES[FROM_010] in capsys.readouterr().out
    given = _bench(tmp_path / "given.json", start_times=[float(t) for t in found[FROM_010].sends])
    assert cli("validate", str(given), *COMMON, "--out", str(tmp_path / "b")) == 0
    a, b = (json.loads((tmp_path / d / "validation.json").read_text()) for d in "ab")
    assert _numbers(a) == pytest.approx(_numbers(b), rel=1e-12)


def test_a_file_without_burstiness_predates_the_later_rule(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    found = schedules(N, 1.0, 1.0, 7)
    ends = {r: max(float(np.max(s.sends + E2E)), s.idle_until) for r, s in found.items()}
    bare = _bare(tmp_path / "bare.json", request_rate=1.0, duration=max(ends.values()) + 0.05)
    assert cli("validate", str(bare), *COMMON, "--bench-seed", "7") == 0  # vLLM < 0.6.4: one rule
    assert RULES[PRE_010] in capsys.readouterr().out
    assert cli("validate", str(bare), *COMMON, "--bench-seed", "7", "--bench-rule", FROM_010) == 2
    assert "--bench-rule 0.10 does not apply to this file (request_rate 1, no burstiness: vLLM < 0.6.4)" in (
        capsys.readouterr().err)


def test_a_burst_is_split_by_send_order(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """request_rate inf (vLLM's "inf", or a JSON Infinity) sends everything at once: no window to split,
    so the first third of the requests calibrate; no seed is drawn."""
    bare = _bare(tmp_path / "b.json", request_rate=math.inf, duration=float(np.max(E2E)) + 0.01)
    assert cli("validate", str(bare), "--gpu", "H100", "--out", str(tmp_path / "o")) == 0
    out = capsys.readouterr().out
    assert "request_rate inf (all at once)" in out and "seed" not in out
    doc = json.loads((tmp_path / "o" / "validation.json").read_text())
    assert doc["calibration_part"]["ids"] == "the first 0.333 of the requests in send order (all sent at once)"
    assert doc["calibration_part"]["n_requests"] == 8 and doc["validation_part"]["n_requests"] == 16
    assert cli("validate", str(bare), "--gpu", "H100", "--bench-seed", "3") == 2
    assert "there are no gaps for --bench-seed to draw" in capsys.readouterr().err


@pytest.mark.parametrize("traffic, args, message", [
    ({"request_rate": 5.0, "duration": 1.0}, [], "do not end the run at its recorded duration 1 s (vLLM < 0.10"),
    ({"request_rate": 5.0}, [], "no start_times and no duration: redrawn sends could not be checked"),
    ({"request_rate": 5.0, "duration": 9.0, "max_concurrency": 4}, [], "and max_concurrency 4: the client held"),
    ({"request_rate": 5.0, "duration": 9.0, "ramp_up_strategy": "linear"}, [], "and ramp_up_strategy 'linear'"),
    ({"request_rate": -1, "duration": 9.0}, [], "request_rate must be > 0, got -1"),
    ({"request_rate": 5.0, "duration": 9.0}, ["--bench-seed", "-1"], "--bench-seed must be in [0, 4294967295]"),
    ({"request_rate": 5.0, "duration": 1e300}, [], "its recorded duration 1e+300 s"),
])
def test_sends_that_cannot_be_redrawn_are_refused(traffic: dict, args: list[str], message: str, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture) -> None:
    assert cli("validate", str(_bare(tmp_path / "b.json", **traffic)), "--gpu", "H100", *args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err, err


def test_the_redraw_options_only_where_sends_are_redrawn(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert cli("validate", str(_bench(tmp_path / "b.json")), "--gpu", "H100", "--bench-seed", "1") == 2
    assert "has start_times: --bench-seed (for redrawing missing sends) does not apply" in capsys.readouterr().err
    assert cli("validate", str(_bench(tmp_path / "b.json")), "--gpu", "H100", "--bench-rule", "0.10") == 2
    assert "has start_times: --bench-rule (for redrawing missing sends) does not apply" in capsys.readouterr().err
    assert cli("validate", str(tmp_path / "missing.json"), "--gpu", "H100", "--bench-seed", "1") == 2
    assert "missing.json: not found (a run folder, a vllm bench serve result file or a multi-turn benchmark CSV)" in capsys.readouterr().err
