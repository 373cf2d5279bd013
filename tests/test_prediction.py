"""The output-length predictor and the `predicted` dispatch policy (llumverify/scheduler/prediction.py)."""

from __future__ import annotations

import math
import statistics
from dataclasses import replace
from pathlib import Path

import pytest

import llumverify.cli as cli
from llumverify.settings.config import SchedulerConfig, SimConfig
from llumverify.errors import UserError
from llumverify.requests import RequestSpec
from llumverify.scheduler.policies import POLICIES
from llumverify.scheduler.prediction import noise, predicted, predicted_output, projected_freeness
from llumverify.scheduler.snapshot import InstanceSnapshot
from llumverify.sim.run import simulate
from llumverify.sim.workload import generate
from conftest import streamed_csv

SPECS = [RequestSpec(i, 0.0, 100, 50 + 7 * i) for i in range(4000)]


def snap(i: int, free: int, running: int, predicted_blocks: float, waiting: int = 0, wall: float = 0.0,
         term: bool = False) -> InstanceSnapshot:
    return InstanceSnapshot(i, 851, 8, free, running, waiting, wall, 0, 0, False, term, 0, predicted_blocks, 16)


def mean_abs_log_error(sigma: float, seed: int = 0) -> float:
    return statistics.fmean(abs(math.log(predicted_output(s, sigma, seed) / s.output_tokens)) for s in SPECS)


def test_zero_error_predicts_the_true_length():
    assert all(predicted_output(s, 0.0, 7) == s.output_tokens for s in SPECS)


def test_noise_is_standard_normal_and_a_pure_function_of_seed_and_id():
    z = [noise(3, i) for i in range(4000)]
    assert abs(statistics.fmean(z)) < 0.05 and abs(statistics.stdev(z) - 1) < 0.05
    assert z == [noise(3, i) for i in range(4000)]
    assert z != [noise(4, i) for i in range(4000)]


def test_larger_sigma_gives_larger_log_errors():
    errors = [mean_abs_log_error(sigma) for sigma in (0.25, 0.5, 1.0, 2.0)]
    assert errors == sorted(errors) and errors[0] > 0
    # E|σz| = σ·sqrt(2/π) for the log-normal error (rounding to whole tokens aside)
    assert errors[2] == pytest.approx(math.sqrt(2 / math.pi), rel=0.05)


def test_dispatches_to_the_instance_with_more_projected_room():
    # both hold the prompt now; instance 0 has more free blocks now (least-loaded's choice), but its
    # requests will grow to 800 blocks, instance 1's only to 400
    snaps = [snap(0, free=600, running=4, predicted_blocks=800.0), snap(1, free=400, running=4, predicted_blocks=400.0)]
    req = RequestSpec(0, 0.0, 160, 100)
    assert projected_freeness(snaps[0]) == pytest.approx((851 - 8 - 800) / 4)
    assert projected_freeness(snaps[1]) == pytest.approx((851 - 8 - 451) / 4)  # never below what is held now
    assert predicted(snaps, req) == 1
    assert POLICIES["predicted"].dispatch(snaps, req) == 1 and not POLICIES["predicted"].migrates


def test_an_instance_that_cannot_admit_the_prompt_now_is_passed_over():
    snaps = [snap(0, free=20, running=1, predicted_blocks=100.0), snap(1, free=400, running=8, predicted_blocks=800.0)]
    assert predicted(snaps, RequestSpec(0, 0.0, 320, 100)) == 1  # 20 blocks: the prompt needs 20 + watermark
    # none fits: the higher F_d (26 vs 12 blocks per request), not the higher F_p (1.5 vs 12)
    crowded = [snap(0, free=20, running=1, predicted_blocks=100.0), snap(1, free=60, running=2, predicted_blocks=840.0)]
    assert projected_freeness(crowded[0]) > projected_freeness(crowded[1])
    assert predicted(crowded, RequestSpec(0, 0.0, 3200, 100)) == 1
    assert predicted([snap(0, 800, 0, 0.0, term=True), snap(1, 10, 5, 900.0)], RequestSpec(0, 0.0, 16, 1)) == 1


@pytest.mark.parametrize("sigma", [0.0, 1.0])
def test_runs_are_audited_and_bit_for_bit_reproducible(sigma, tmp_path: Path):
    specs = generate(400, 3.0, lengths="L-L", seed=1)
    cfg = SimConfig(scheduler=SchedulerConfig(prediction_error=sigma, prediction_seed=5))
    cfg = replace(cfg, cluster=replace(cfg.cluster, num_instances=4))
    (first, a), (second, b) = (streamed_csv(specs, "predicted", cfg, tmp_path / d, keep_records=True) for d in "ab")
    assert first.summary == second.summary
    assert a == b
    assert all(r.status == "finished" for r in first.records)


def test_prediction_error_changes_where_requests_go():
    specs = generate(400, 3.0, lengths="L-L", seed=1)
    cfg = SimConfig(cluster=replace(SimConfig().cluster, num_instances=4))
    where = [[r.instance for r in simulate(specs, "predicted", replace(cfg, scheduler=SchedulerConfig(
        prediction_error=sigma)), keep_records=True).records] for sigma in (0.0, 2.0)]
    assert where[0] != where[1]


@pytest.mark.parametrize("value", [-0.5, float("nan"), float("inf"), True])
def test_bad_prediction_error_is_a_user_error(value):
    with pytest.raises(UserError, match="prediction_error"):
        SchedulerConfig(prediction_error=value).validate()


def test_bad_prediction_error_in_an_experiment_is_one_line_exit_2(tmp_path: Path, capsys):
    exp = tmp_path / "bad.toml"
    exp.write_text('policies = ["predicted"]\n[[workload]]\nlengths = "S"\nrate = 1.0\n'
                   "[scheduler]\nprediction_error = -1.0\n")
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["simulate", str(exp)])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2
    assert err.count("\n") == 1 and "prediction_error" in err and "Traceback" not in err
