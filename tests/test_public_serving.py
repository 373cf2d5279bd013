"""Published serving runs as a validation set (issue #28): their aggregates read from the
sim-to-real error-records files, their workloads regenerated from the published shapes
(llumverify/validation/public_serving.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from llumverify.errors import UserError
from llumverify.validation import public_serving as ps
from llumverify.validation.client_time import ClientTime

HEADER = "simulator,experiment_folder,model,workload,stage_index,metric_name,predicted,actual,hardware,tp,max_num_batched_tokens,gpu_mem_util,cpu_offload"
VALUES = {"e2e_mean": 2000.0, "e2e_p90": 2100.0, "ttft_mean": 30.0, "ttft_p90": 35.0, "itl_mean": 8.0}


def _csv(tmp_path: Path, runs: list[tuple[str, str, str, str]], extra: str = "") -> Path:
    """runs: (folder, model, workload column, hardware); every summary metric of each."""
    lines = [HEADER]
    for folder, model, column, hw in runs:
        for metric, value in VALUES.items():
            lines.append(f"sim,/x/ground_truth/{folder},{model},{column},-1,{metric},1,{value},{hw},1.0,2048.0,,False")
            lines.append(f"sim,/x/ground_truth/{folder},{model},{column},0,{metric},1,{value * 9},{hw},1.0,2048.0,,False")
    path = tmp_path / "records.csv"
    path.write_text("\n".join(lines) + extra + "\n")
    return path


def test_a_run_is_lite_when_either_label_says_so(tmp_path):
    path = _csv(tmp_path, [("17-llama-3-1-8b-tp1-general-lite-2-1", "meta-llama/Llama-3.1-8B-Instruct", "general", "H100"),
                           ("27-llama-3-1-8b-tp1-general-2", "meta-llama/Llama-3.1-8B-Instruct", "general-lite", "H100"),
                           ("9-llama-3-1-8b-tp1-general", "meta-llama/Llama-3.1-8B-Instruct", "general", "H100"),
                           ("53-llama-3-1-8b-tp1-reasoning-8", "meta-llama/Llama-3.1-8B-Instruct", "reasoning-lite", "H100")])
    runs, skipped = ps.read_experiments([path])
    assert not skipped
    assert {r.name.split("-")[0]: r.workload for r in runs} == {
        "17": "general-lite", "27": "general-lite", "9": "general", "53": "reasoning-lite"}
    # the summary (stage -1), not a stage's values; ITL per generated token (general-lite: 248 out)
    assert runs[0].actual == {**VALUES, "itl_mean": (2000.0 - 30.0) / 247} and runs[0].itl_published == 8.0


def test_runs_that_cannot_be_simulated_are_listed_with_the_reason(tmp_path):
    path = _csv(tmp_path, [("1-x-tp1-codegen", "acme/Unknown-9B", "codegen", "H100"),
                           ("2-llama-3-1-8b-tp1-codegen", "meta-llama/Llama-3.1-8B-Instruct", "codegen", "XPU-9000"),
                           ("3-llama-3-1-8b-tp1-mystery", "meta-llama/Llama-3.1-8B-Instruct", "mystery", "H100")])
    runs, skipped = ps.read_experiments([path])
    assert runs == []
    assert [s.split(":")[0] for s in skipped] == ["1-x-tp1-codegen", "2-llama-3-1-8b-tp1-codegen",
                                                   "3-llama-3-1-8b-tp1-mystery"]
    assert "not in the catalog" in skipped[0] and "GPU XPU-9000 not in the catalog" in skipped[1]
    assert "workload kind" in skipped[2]


def test_a_run_on_another_catalog_gpu_is_simulated_on_that_gpu(tmp_path):
    path = _csv(tmp_path, [("38-llama-3-1-8b-tp1-general-lite-1-1", "meta-llama/Llama-3.1-8B-Instruct", "general-lite",
                            "L40S"),
                           ("39-llama-3-1-8b-tp1-general-lite-1-1", "meta-llama/Llama-3.1-8B-Instruct", "general-lite",
                            "H100")])
    (l40s, h100), skipped = ps.read_experiments([path])
    assert not skipped and (l40s.gpu, h100.gpu) == ("L40S", "H100")
    # the same run on the slower GPU (864 vs 3,350 GB/s) decodes slower
    assert ps.predict(l40s)["itl_mean"] > 2 * ps.predict(h100)["itl_mean"]


@pytest.mark.parametrize("extra, message", [
    ("\nsim,/x/4-llama-3-1-8b-tp1-codegen,m,codegen,-1,e2e_mean,1,abc,H100,1,2048,,", "must be numbers"),
    ("\nsim,/x/4-llama-3-1-8b-tp1-codegen,m,codegen,-1,e2e_mean,1,-5,H100,1,2048,,", "must be > 0"),
    ("\nsim,/x/ground_truth/5-llama-3-1-8b-tp1-codegen,m,codegen,-1,e2e_mean,1,7,H100,1,2048,,", "earlier 2000.0"),
])
def test_a_malformed_or_contradicting_row_is_one_error_naming_its_line(tmp_path, extra, message):
    path = _csv(tmp_path, [("5-llama-3-1-8b-tp1-codegen", "meta-llama/Llama-3.1-8B-Instruct", "codegen", "H100")], extra)
    with pytest.raises(UserError, match=f"records.csv:.*{message}"):
        ps.read_experiments([path])


def test_a_file_without_the_columns_is_refused(tmp_path):
    path = tmp_path / "records.csv"
    path.write_text("a,b\n1,2\n")
    with pytest.raises(UserError, match="missing columns"):
        ps.read_experiments([path])


def test_the_regenerated_workload_is_sent_open_loop_from_a_pool_of_recurring_prompts():
    w = ps.WORKLOADS["codegen"]
    specs = ps.workload_specs("codegen")
    (rate0, seconds0), (rate1, _) = w.stages
    arrivals = [s.arrival_s for s in specs]
    n0 = round(rate0 * seconds0)
    assert arrivals == sorted(arrivals) and arrivals[1] - arrivals[0] == pytest.approx(1 / rate0)
    assert arrivals[n0] == pytest.approx(seconds0) and arrivals[n0 + 1] - arrivals[n0] == pytest.approx(1 / rate1)
    assert {s.prompt_tokens for s in specs} == {w.system + w.question} and {s.output_tokens for s in specs} == {w.output}
    groups, per_group = ps.PROMPT_POOL
    prompts = [s.hash_ids for s in specs]
    assert len(set(prompts)) == groups * per_group  # 100 prompts, each recurring (prefix-cached whole)
    assert all(prompts[i] == prompts[i + groups * per_group] for i in range(len(prompts) - groups * per_group))
    shared = w.system // ps.BLOCK
    systems = {p[:shared] for p in prompts}
    assert len(systems) == groups and all(len(p) == (w.system + w.question) // ps.BLOCK for p in prompts)
    assert len({b for p in prompts for b in p[shared:]}) == groups * per_group * (len(prompts[0]) - shared)


def test_each_kind_sends_the_requests_the_published_runs_completed():
    """Open loop at the published rates: every stage sends rate x duration requests, as the training folders'
    stage files count them (20260217-231439, general: 4,800 + 12,000), which the profiles' closed-loop users
    could not have sent."""
    counts = {k: len(ps.workload_specs(k)) for k in ps.WORKLOADS}
    assert counts == {"general": 16800, "general-lite": 5100, "codegen": 9000, "roleplay": 7200,
                      "reasoning-lite": 1200, "reasoning": 4800}


def test_a_light_run_is_simulated_end_to_end():
    exp = ps.Experiment("66-qwen2-5-7b-instruct-tp1-reasoning-lite-1-1", "Qwen/Qwen2.5-7B-Instruct", "H100", 1, 1024,
                        0.9, False, "reasoning-lite", VALUES)
    sim = ps.predict(exp)
    w = ps.WORKLOADS["reasoning-lite"]
    # (no order of the mean and P90: the first 100 requests prefill their whole prompt, the rest hit the cache)
    assert 0 < sim["ttft_mean"] < sim["e2e_mean"] and 0 < sim["ttft_p90"] < sim["e2e_p90"]
    # one request at a time in flight per arrival gap: E2E is TTFT plus the output's inter-token gaps
    assert sim["e2e_mean"] == pytest.approx(sim["ttft_mean"] + (w.output - 1) * sim["itl_mean"], rel=0.02)


def test_the_client_time_is_added_to_ttft_and_e2e_only_and_fitted_inside_its_grid():
    sim = {"e2e_mean": 1990.0, "e2e_p90": 2090.0, "ttft_mean": 20.0, "ttft_p90": 25.0, "itl_mean": 8.0}
    assert ps.at_client(sim, ClientTime(0.010), 1000) == {**VALUES, "itl_mean": 8.0}
    assert ps.at_client(sim, ClientTime(0.004, 6e-6), 1000) == pytest.approx({**VALUES, "itl_mean": 8.0})
    exp = ps.Experiment("1-x-tp1-codegen", "meta-llama/Llama-3.1-8B-Instruct", "H100", 1, 2048, 0.9, False, "codegen",
                        VALUES)
    assert ps.fit_client_ms([exp, exp], [sim, sim], 0.0) == 10.0  # the time that makes the runs exact
    per_token = 4e-3 / ps.prompt_tokens(exp)  # 4 ms of the 10 per prompt token: the constant fitted beside it is 6 ms
    assert ps.fit_client_ms([exp, exp], [sim, sim], per_token) == 6.0
    slow = {**sim, "ttft_mean": 900.0, "ttft_p90": 900.0, "e2e_mean": 9e4, "e2e_p90": 9e4}
    assert ps.fit_client_ms([exp], [slow], 0.0) == 0.0  # already too slow: no client time (a bound, not an error)
    with pytest.raises(UserError, match="grid's edge"):  # too fast for any client time on the grid
        ps.fit_client_ms([exp], [{**sim, "ttft_mean": 0.1, "ttft_p90": 0.1, "e2e_mean": 10.0, "e2e_p90": 10.0}], 0.0)


def test_the_step_time_fit_finds_the_time_per_step_the_runs_were_made_with(monkeypatch):
    """Runs "measured" as the simulator gives them with 0.5 ms of engine time per step: the fit walks the grid
    up to two points past the best and returns 0.5 ms; on a grid that stops below it, the fit is an error."""
    import dataclasses

    from llumverify.sim.roofline import load_efficiency

    eff = load_efficiency()
    exp = ps.Experiment("66-qwen2-5-7b-instruct-tp1-reasoning-lite-1-1", "Qwen/Qwen2.5-7B-Instruct", "H100", 1, 1024,
                        0.9, False, "reasoning-lite", VALUES)
    made = ps.predict(exp, dataclasses.replace(eff, fixed_ns=500_000))
    run = dataclasses.replace(exp, actual={m: made[m] for m in ps.METRICS})
    step, scores, sims = ps.fit_step_ns([run], eff, ClientTime())
    assert step == 500_000 and list(scores) == [0, 250_000, 500_000, 750_000, 1_000_000]
    assert scores[500_000] == 0 < scores[250_000] < scores[0] and scores[500_000] < scores[750_000] < scores[1_000_000]
    assert sims == [made]
    monkeypatch.setattr(ps, "STEP_NS_GRID", (0, 250_000))
    with pytest.raises(UserError, match="grid's edge"):
        ps.fit_step_ns([run], eff, ClientTime())


def test_the_sort_fit_finds_the_sort_the_runs_were_made_with_and_replays_only_the_top_p_runs(monkeypatch):
    """A top-p run "measured" as the simulator gives it with a 20 us sort, beside a greedy run: the fit tries
    every grid point, returns 20 us, replays the greedy run once; a grid that stops below it, or runs without
    a top-p one, are errors."""
    import dataclasses

    from llumverify.sim.roofline import load_efficiency

    eff = load_efficiency()
    topp = ps.Experiment("66-qwen2-5-7b-instruct-tp1-reasoning-lite-1-1", "Qwen/Qwen2.5-7B-Instruct", "H100", 1, 1024,
                         0.9, False, "reasoning-lite", VALUES, sampling="top-p")
    greedy = dataclasses.replace(topp, name="67-mistral-nemo-12b-tp1-reasoning-lite-1-1",
                                 model="mistralai/Mistral-Nemo-Instruct-2407", sampling="greedy")
    made = ps.predict(topp, dataclasses.replace(eff, topp_sort_ns=20_000))
    assert made["itl_mean"] > ps.predict(topp, dataclasses.replace(eff, topp_sort_ns=0))["itl_mean"]
    runs = [dataclasses.replace(topp, actual={m: made[m] for m in ps.METRICS}),
            dataclasses.replace(greedy, actual={m: v for m, v in ps.predict(greedy, eff).items() if m in ps.METRICS})]
    calls = []
    real_predict = ps.predict
    monkeypatch.setattr(ps, "predict", lambda r, e=None: calls.append(r.sampling) or real_predict(r, e))
    monkeypatch.setattr(ps, "SORT_NS_GRID", (0, 10_000, 20_000, 30_000))
    best, scores = ps.fit_sort_ns(runs, eff, ClientTime())
    assert best == 20_000 and list(scores) == [0, 10_000, 20_000, 30_000] and scores[20_000] == 0
    assert calls.count("greedy") == 1 and calls.count("top-p") == 4
    monkeypatch.setattr(ps, "SORT_NS_GRID", (0, 10_000))
    with pytest.raises(UserError, match="grid's edge"):
        ps.fit_sort_ns(runs, eff, ClientTime())
    with pytest.raises(UserError, match="no calibration run samples with top-p"):
        ps.fit_sort_ns(runs[1:], eff, ClientTime())


def test_each_run_samples_as_its_checkpoints_generation_config_says_and_an_unknown_one_is_skipped(tmp_path):
    path = _csv(tmp_path, [("1-llama-3-1-8b-tp1-codegen", "meta-llama/Llama-3.1-8B-Instruct", "codegen", "H100"),
                           ("2-mixtral-8x7b-tp2-codegen", "mistralai/Mixtral-8x7B-v0.1", "codegen", "H100"),
                           ("3-llama-3-1-8b-tp1-codegen", "meta-llama/Llama-3.1-8B", "codegen", "H100")])
    runs, skipped = ps.read_experiments([path])
    assert [(r.name[0], r.sampling) for r in runs] == [("1", "top-p"), ("2", "greedy")]
    assert skipped == ["3-llama-3-1-8b-tp1-codegen: how meta-llama/Llama-3.1-8B samples is not known "
                       "(public_serving.GENERATION_DEFAULTS)"]


def test_each_stage_itl_is_read_where_the_file_has_every_stage(tmp_path):
    """A stage's time per output token comes from that stage's own E2E and TTFT means (not its file ITL,
    which divides by the client's count); a stage lacking them leaves the run without a stage table."""
    stage1 = "\n".join(f"sim,/x/ground_truth/{name},m,codegen,1,{metric},1,{value},H100,4,2048,,"
                       for name in ("61-llama-3-1-70b-tp4-codegen-4-1", "62-llama-3-1-70b-tp4-codegen-4-1")
                       for metric, value in (("e2e_mean", 5000.0), ("itl_mean", 30.0), ("ttft_mean", 60.0))
                       if not (name.startswith("62") and metric == "ttft_mean"))
    path = _csv(tmp_path, [("61-llama-3-1-70b-tp4-codegen-4-1", "meta-llama/Llama-3.1-70B-Instruct", "codegen", "H100"),
                           ("62-llama-3-1-70b-tp4-codegen-4-1", "meta-llama/Llama-3.1-70B-Instruct", "codegen", "H100"),
                           ("64-qwen2-5-7b-instruct-tp1-roleplay-1-1", "Qwen/Qwen2.5-7B-Instruct", "roleplay", "H100")],
                "\n" + stage1)
    runs = {r.name.split("-")[0]: r for r in ps.read_experiments([path])[0]}
    # codegen: 247 tokens out, two stages; stage 0's rows are 9x the summary's
    assert runs["61"].stage_itl == ((9 * 2000.0 - 9 * 30.0) / 246, (5000.0 - 60.0) / 246)
    assert runs["62"].stage_itl == ()  # stage 1 has no TTFT mean
    assert runs["64"].stage_itl == ()  # roleplay has one stage: nothing beyond the summary


def test_itl_is_compared_per_generated_token_not_per_token_the_client_counted():
    """The files divide E2E - TTFT by the client's count of the streamed text's tokens (sim-to-real's
    ground_truth.py): 195 counted of 248 generated makes that ITL 27 % longer than the time per token."""
    actual = {"e2e_mean": 1810.0, "ttft_mean": 25.0}
    published = (1810.0 - 25.0) / (195 - 1)
    assert ps.per_token_itl(actual, 248, "r") == pytest.approx(published * 194 / 247)
    with pytest.raises(UserError, match="r: E2E mean 20.0 must exceed TTFT mean 25.0"):
        ps.per_token_itl({"e2e_mean": 20.0, "ttft_mean": 25.0}, 248, "r")


def test_a_run_whose_e2e_is_not_above_its_ttft_is_refused(tmp_path):
    path = _csv(tmp_path, [("5-llama-3-1-8b-tp1-codegen", "meta-llama/Llama-3.1-8B-Instruct", "codegen", "H100")])
    path.write_text(path.read_text().replace(",e2e_mean,1,2000.0,", ",e2e_mean,1,30.0,"))
    with pytest.raises(UserError, match="5-llama-3-1-8b-tp1-codegen: E2E mean 30.0 must exceed TTFT mean 30.0"):
        ps.read_experiments([path])


def test_the_benchmark_scores_the_engine_view_bare_and_the_client_view_with_the_client_time(tmp_path, monkeypatch):
    """One light run measured exactly 10 ms above its own simulation on TTFT and E2E: the "client" view adds the
    shipped time (7.5 ms and 2.25 µs a prompt token), the "engine" view nothing, and the calibration fit finds
    the constant that closes the rest."""
    from conftest import benchmark_script

    from llumverify.validation.client_time import client_time

    script = benchmark_script("public_serving")
    folder = "66-qwen2-5-7b-instruct-tp1-reasoning-lite-1-1"
    exp = ps.Experiment(folder, "Qwen/Qwen2.5-7B-Instruct", "H100", 1, 1024, 0.9, False, "reasoning-lite", VALUES,
                        sampling="top-p")  # as its generation_config.json makes vLLM sample (GENERATION_DEFAULTS)
    sim = ps.predict(exp)
    real = {m: v + (10.0 if m.startswith(("ttft", "e2e")) else 0.0) for m, v in sim.items() if m in ps.METRICS}
    paths = []
    for name in (folder, folder.replace("66-", "67-")):
        lines = [HEADER] + [f"sim,/x/ground_truth/{run},{exp.model},reasoning-lite,{k},{m},1,{v},H100,1.0,1024.0,,False"
                            for run in (folder, name) for m, v in real.items() for k in (-1, 0)]
        paths.append(tmp_path / f"{name}.csv")
        paths[-1].write_text("\n".join(lines) + "\n")
    from llumverify.sim.roofline import load_efficiency

    shipped = load_efficiency().topp_sort_ns
    monkeypatch.setattr(ps, "SORT_NS_GRID", (0, shipped, 2 * shipped))  # the sort fit's grid, short: one run is enough
    with pytest.raises(UserError, match=r"no validation run left: 1 skipped \(66-qwen2-5-7b-instruct-tp1-reasoning-lite-1-1: also in the calibration file\)"):
        script.main([str(paths[0]), str(paths[0])])
    assert script.main([str(paths[0]), str(paths[1]), "--out", str(tmp_path / "out")]) == 0
    import json

    doc = json.loads((tmp_path / "out" / "results.json").read_text())
    assert [r["run"] for r in doc["runs"] if r["role"] == "validation"] == [folder.replace("66-", "67-")]
    assert doc["summary"][-1]["skipped"] == [f"{folder}: also in the calibration file"]
    views = {s["view"]: s for s in doc["summary"] if s["role"] == "calibration"}
    added = 1e3 * client_time().seconds(ps.prompt_tokens(exp))
    for m in ("ttft_mean", "e2e_mean"):
        shift = (views["client"][m]["median_signed"] - views["engine"][m]["median_signed"]) * real[m]
        assert shift == pytest.approx(added) and views["engine"][m]["median_signed"] == pytest.approx(sim[m] / real[m] - 1)
    assert abs(doc["client_ms_fit_on_calibration"] - (10.0 - (added - 7.5))) <= 0.25
    # the run's ITL is its simulation's with the shipped sort: the fit finds it, and says what it tried
    assert doc["topp_sort_ns"] == doc["topp_sort_ns_fit_on_calibration"] == shipped
    assert [int(k) for k in doc["topp_sort_ns_scores_on_calibration"]] == [0, shipped, 2 * shipped]
    assert [r["sampling"] for r in doc["runs"]] == ["top-p", "top-p"]


def test_a_top_p_run_pays_the_sort_of_its_own_gpu(monkeypatch):
    """simulate_served prices the sort on the run's GPU (an A100-80GB run: A100's SMs and clock), not H100's."""
    import llumverify.sim.sampling as sampling

    seen = []
    real = sampling.with_sampling
    monkeypatch.setattr(sampling, "with_sampling", lambda c, s, ns, gpu, vocab: seen.append((s, gpu.name, vocab))
                        or real(c, s, ns, gpu, vocab))
    exp = ps.Experiment("66-qwen2-5-7b-instruct-tp1-reasoning-lite-1-1", "Qwen/Qwen2.5-7B-Instruct", "A100-80GB", 1,
                        1024, 0.9, False, "reasoning-lite", VALUES, sampling="top-p")
    ps.predict(exp)
    from llumverify.sim.catalog import get_model

    assert seen == [("top-p", "A100-80GB", get_model("Qwen/Qwen2.5-7B-Instruct").vocab)]


def test_the_checkpoints_whose_generation_config_sets_top_p_below_one_sample_with_top_p():
    """GENERATION_DEFAULTS as its evidence says: Llama-3.1-Instruct (0.9), Qwen3 (0.95), Qwen2.5-Instruct (0.8),
    Llama-2 (0.6 / 0.9), Llama-4-Scout (taken as Meta's 0.9) sort; the checkpoints without sampling keys do not."""
    topp = {"meta-llama/llama-3.1-8b-instruct", "meta-llama/llama-3.1-70b-instruct", "qwen/qwen3-14b",
            "qwen/qwen2.5-7b-instruct", "meta-llama/llama-2-7b-hf", "meta-llama/llama-2-70b-hf",
            "redhatai/llama-4-scout-17b-16e-instruct-fp8-dynamic"}
    assert {m for m, s in ps.GENERATION_DEFAULTS.items() if s == "top-p"} == topp
    assert set(ps.GENERATION_DEFAULTS.values()) == {"top-p", "greedy"}
    assert all(m == m.lower() for m in ps.GENERATION_DEFAULTS)  # looked up lower-cased


def test_the_benchmark_fits_the_sort_on_the_calibration_runs_alone(tmp_path, monkeypatch):
    """The held-out file's runs never reach fit_sort_ns (the shipped topp_sort_ns is the calibration file's fit)."""
    from conftest import benchmark_script

    script = benchmark_script("public_serving")
    exps = {"calibration": ps.Experiment("66-qwen2-5-7b-instruct-tp1-reasoning-lite-1-1", "Qwen/Qwen2.5-7B-Instruct",
                                         "H100", 1, 1024, 0.9, False, "reasoning-lite", VALUES, sampling="top-p")}
    exps["validation"] = ps.Experiment("67-llama-2-7b-hf-tp1-reasoning-lite-1-1", "meta-llama/Llama-2-7b-hf", "H100", 1,
                                       1024, 0.9, False, "reasoning-lite", VALUES, sampling="top-p")
    paths = []
    for role, e in exps.items():
        lines = [HEADER] + [f"sim,/x/ground_truth/{e.name},{e.model},reasoning-lite,{k},{m},1,{v},H100,1.0,1024.0,,False"
                            for m, v in ps.predict(e).items() if m in ps.METRICS for k in (-1, 0)]
        paths.append(tmp_path / f"{role}.csv")
        paths[-1].write_text("\n".join(lines) + "\n")
    fitted_on = []

    class Stop(Exception):
        pass

    def fit(runs, eff, client):
        fitted_on.extend(r.name for r in runs)
        raise Stop

    monkeypatch.setattr(ps, "fit_sort_ns", fit)
    with pytest.raises(Stop):
        script.main([str(paths[0]), str(paths[1])])
    assert fitted_on == [exps["calibration"].name]


def test_predict_aggregates_what_the_simulation_served(monkeypatch):
    """Ten requests (ms): E2E 100..1000, TTFT 1..10; the last generated one token (no ITL), the others ITL 1..9, the
    first five sent in stage 0. Means 550 and 5.5; P90 at rank 0.9 x 9 = 8.1: 900 + 0.1 x 100 = 910 and 9.1; ITL
    over the nine multi-token requests 5, by stage (1..5) 3 and (6..9) 7.5."""
    served = ps.Served(np.arange(100.0, 1001.0, 100.0), np.arange(1.0, 11.0), np.array([*range(1, 10), 999.0]),
                       np.array([20.0] * 9 + [1.0]), np.array([0] * 5 + [1] * 5))
    monkeypatch.setattr(ps, "simulate_served", lambda *a, **k: served)
    exp = ps.Experiment("1-x-tp1-codegen", "meta-llama/Llama-3.1-8B-Instruct", "H100", 1, 2048, 0.9, False, "codegen",
                        VALUES)
    assert ps.predict(exp) == pytest.approx({"e2e_mean": 550.0, "e2e_p90": 910.0, "ttft_mean": 5.5, "ttft_p90": 9.1,
                                             "itl_mean": 5.0, "itl_stage0": 3.0, "itl_stage1": 7.5})


def test_a_served_run_is_sized_at_its_tp_and_scored_per_output_token_and_stage():
    """A 70B model at TP 4 on H100 (its KV cache sized for four GPUs: on one the weights alone overflow it); sends at
    0, 0.5, 1.0 and 1.5 s in two 1 s stages (one sent exactly at the second's start belongs to it); ITL is the decode
    time over output - 1, as the measured time per output token (per_token_itl)."""
    from llumverify.requests import RequestSpec

    specs = [RequestSpec(i, t, 100, 5) for i, t in enumerate((0.0, 0.5, 1.0, 1.5))]
    served = ps.simulate_served("r", "meta-llama/Llama-3.1-70B-Instruct", "H100", 4, 2048, 0.9, specs, [1.0, 1.0])
    assert list(served.stage) == [0, 0, 1, 1] and list(served.output) == [5] * 4
    assert np.allclose(served.itl * (served.output - 1), served.e2e - served.ttft, rtol=1e-9, atol=0)
