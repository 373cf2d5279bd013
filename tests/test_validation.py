"""`llumverify validate` / `calibrate` against the shared real vLLM run and static batches.

The per-step constant is fitted on the requests arriving in the first third of the run; the
error bounds are asserted on the other two thirds (the issue's targets: mean and P90 of E2E and
TPOT within 10 %, TTFT within 20 %)."""

from __future__ import annotations

import json

import numpy as np

import pytest
from conftest import validation_dir

from llumverify.cli import main
from llumverify.errors import UserError
from llumverify.settings.config import HardwareConfig
from llumverify.sim import engine_profile
from llumverify.validation import replay as validation

SHARED = validation_dir()
LSS = SHARED / "llmservingsim"
RUN = LSS / "runs" / "RTX4090-Llama-3.1-8B"
WORKLOAD = LSS / "workloads" / "sharegpt-llama-3.1-8b-300-sps10.jsonl"
PROFILE = LSS / "profiles" / "RTX4090" / "Llama-3.1-8B"
STATIC = SHARED / "argonne" / "vllm_static_batch_a100_h100.csv"
needs_shared = pytest.mark.skipif(not RUN.is_dir(), reason=f"no shared validation data at {SHARED} "
                                  "(set LLUMVERIFY_VALIDATION to the folder)")


def cli(*args: str) -> int:
    with pytest.raises(SystemExit) as exc:
        main(list(args))
    return exc.value.code


@pytest.mark.slow  # over 1.5 s: the fast tier stays within its CPU budget
@needs_shared
def test_profile_replay_with_a_constant_fitted_on_the_first_third_matches_the_rest(tmp_path):
    run = validation.load_run(RUN, WORKLOAD)
    step = engine_profile.step_cost(HardwareConfig(profile=str(PROFILE)))
    calib, held = validation.split_ids(run)
    assert len(calib) > 50 and len(held) > 150 and not set(calib) & set(held)
    fixed, _ = validation.fit_fixed_ns(run, step, calib)
    assert 0 < fixed < 5_000_000
    sim = validation.replay(run, engine_profile.step_cost(HardwareConfig(profile=str(PROFILE)), fixed))
    doc = validation.compare(run.real, sim, held)
    for m, bound in (("e2e", 0.10), ("tpot", 0.10), ("ttft", 0.20)):
        for q in ("mean", "p90"):
            real, simulated = doc[m][f"real_{q}_s"], doc[m][f"sim_{q}_s"]
            assert abs(simulated / real - 1) < bound, (m, q, real, simulated)
    assert doc["e2e"]["median_ape"] < 0.05


@needs_shared
def test_validate_writes_the_documented_json_and_plots(tmp_path, capsys):
    out = tmp_path / "v"
    assert cli("validate", str(RUN), "--workload", str(WORKLOAD), "--profile", str(PROFILE), "--out", str(out)) == 0
    doc = json.loads((out / "validation.json").read_text())
    assert doc["schema_version"] == 2 and doc["n_requests"] == 300
    assert doc["kv_cache"] == {"num_gpu_blocks": 2588, "how": "2588 KV blocks (recorded in meta.json)"}
    assert 0.1 < doc["simulated_prefix_hit_rate"] < 0.3  # the workload's shared prompt blocks
    for m in ("ttft", "tpot", "e2e"):
        assert set(doc[m]) == {"real_mean_s", "sim_mean_s", "real_p90_s", "sim_p90_s", "real_p99_s", "sim_p99_s",
                               "median_ape"}
    assert {p.name for p in out.glob("*.png")} == {"cdf.png", "scatter.png", "occupancy.png"}
    printed = capsys.readouterr().out
    # a terminal's width, long sources wrapped (a path longer than the width stays whole: this test's own out path)
    assert max(len(line) for line in printed.splitlines() if str(tmp_path) not in line) <= 100
    part = printed.split("validation part (not used by calibrate)", 1)[1].splitlines()
    assert part[1].split() == ["real", "mean", "sim", "mean", "mean", "err", "real", "P90", "sim", "P90", "P90", "err",
                               "median", "APE"]
    held = doc["validation_part"]["tpot"]  # the TPOT row in ms, each error signed against its own pair of numbers
    assert part[4].split() == ["TPOT", "(ms)", f"{1e3 * held['real_mean_s']:,.1f}", f"{1e3 * held['sim_mean_s']:,.1f}",
                               f"{100 * (held['sim_mean_s'] / held['real_mean_s'] - 1):+.1f}", "%",
                               f"{1e3 * held['real_p90_s']:,.1f}", f"{1e3 * held['sim_p90_s']:,.1f}",
                               f"{100 * (held['sim_p90_s'] / held['real_p90_s'] - 1):+.1f}", "%",
                               f"{100 * held['median_ape']:.1f}", "%"]
    assert cli("validate", str(RUN), "--workload", str(WORKLOAD), "--profile", str(PROFILE), "--out", str(out)) == 2


@pytest.mark.slow
@needs_shared
def test_static_batches_with_engine_terms_fitted_on_a100_stay_within_10_percent_on_h100(tmp_path):
    out = tmp_path / "terms.toml"
    assert cli("calibrate", "--static-batch", str(STATIC), "--hardware", "Nvidia A100 GPU", "--out", str(out)) == 0
    assert "seq_ns = " in out.read_text()
    res = tmp_path / "sb"
    assert cli("validate", "--static-batch", str(STATIC), "--engine-terms", str(out), "--out", str(res)) == 0
    rows = json.loads((res / "validation.json").read_text())["rows"]
    h100 = sorted(r["ape"] for r in rows if "H100" in r["hardware"])
    assert len(h100) > 50 and h100[len(h100) // 2] < 0.10
    # that fit's one-GPU terms are what ships as NVIDIA's default for static batches (sim/engine_terms/), whose
    # tp_step_ns comes from the public file's A100 TP rows (this file has none)
    from llumverify.validation.transfer_fit import STATIC_DEFAULT_TERMS

    def terms(path):
        return [ln for ln in path.read_text().splitlines() if not ln.startswith(("#", "tp_step_ns"))]

    assert terms(out) == terms(STATIC_DEFAULT_TERMS["nvidia"]) and "tp_step_ns = 0" in out.read_text()


def test_static_batches_default_to_their_vendor_s_packaged_terms_and_none_means_zero(tmp_path, capsys):
    """No --engine-terms: each row gets its vendor's 2024 vLLM fit (sim/engine_terms/), whose terms are the
    calibrations reports/validation/public-static-batch/validation.json reports; `none`: sim/efficiency.toml's."""
    import dataclasses
    from pathlib import Path

    from llumverify.sim.roofline import load_efficiency
    from llumverify.validation.static_batch import static_rows
    from llumverify.validation.transfer_fit import STATIC_DEFAULT_TERMS, TERMS, load_engine_terms, simulate

    report = json.loads((Path(__file__).parents[1] / "reports" / "validation" / "public-static-batch"
                         / "validation.json").read_text())
    for vendor, calib in (("nvidia", report["calibration"]), ("amd", report["MI300X"]["calibration"])):
        eff = load_engine_terms(STATIC_DEFAULT_TERMS[vendor], load_efficiency())
        assert {k: getattr(eff, k) for k in TERMS if k in calib} == {k: calib[k] for k in TERMS if k in calib}
    csv = tmp_path / "two.csv"
    csv.write_text("Hardware,Num of Hardware,Model,Input Output Length,Batch Size,Latency\n"
                   "H100,1,Llama-3-8B,128,8,2.0\nMI300X,1,Llama-3-8B,128,8,2.0\n")
    got = {}
    for how in ([], ["--engine-terms", "none"]):
        assert cli("validate", "--static-batch", str(csv), *how, "--out", str(tmp_path / f"o{len(how)}")) == 0
        got[len(how)] = json.loads((tmp_path / f"o{len(how)}" / "validation.json").read_text())
    assert got[0]["engine_terms"] == sorted(f"sim/engine_terms/{STATIC_DEFAULT_TERMS[v].name}" for v in ("nvidia", "amd"))
    assert got[2]["engine_terms"] == ["none"]
    rows, _ = static_rows(csv, HardwareConfig())
    for i, vendor in enumerate(("nvidia", "amd")):
        eff = load_engine_terms(STATIC_DEFAULT_TERMS[vendor], load_efficiency())
        assert got[0]["rows"][i]["sim_s"] == float(simulate([rows[i]], eff)[0])
        assert got[2]["rows"][i]["sim_s"] == float(simulate([rows[i]], load_efficiency())[0]) < got[0]["rows"][i]["sim_s"]
    assert "engine terms: vllm-0.5.3-nvidia.toml, vllm-0.6.1-rocm.toml" in capsys.readouterr().out
    mixed = tmp_path / "mixed.csv"  # another framework's row is left out, and counted
    mixed.write_text("Hardware,Num of Hardware,Framework,Model,Input Output Length,Batch Size,Latency\n"
                     "H100,1,vLLM,Llama-3-8B,128,8,2.0\nH100,1,TensorRT-LLM,Llama-3-8B,128,8,2.0\n")
    assert cli("validate", "--static-batch", str(mixed), "--out", str(tmp_path / "m")) == 0
    doc = json.loads((tmp_path / "m" / "validation.json").read_text())
    assert (doc["n_rows"], doc["other_frameworks"]) == (1, 1)
    assert "left out 1 rows of other frameworks" in capsys.readouterr().out
    tp3 = tmp_path / "tp3.csv"  # a row whose TP the model cannot be split for: skipped, and the reason said
    tp3.write_text("Hardware,Num of Hardware,Model,Input Output Length,Batch Size,Latency\n"
                   "H100,1,Llama-3-8B,128,8,2.0\nH100,3,Llama-3-8B,128,8,2.0\n")
    assert cli("validate", "--static-batch", str(tp3)) == 0
    assert "; skipped 1 rows (1 x tp=3 must be an integer >= 1 dividing" in capsys.readouterr().out


def test_bad_inputs_are_one_line_errors(tmp_path, capsys):
    assert cli("validate", str(tmp_path / "nope"), "--workload", str(tmp_path / "w.jsonl"), "--gpu", "H100",
               "--model", "Llama-3.1-8B") == 2
    assert "not found (a run folder, a vllm bench serve result file or a multi-turn benchmark CSV)" in capsys.readouterr().err
    (tmp_path / "gpu-only").mkdir()
    (tmp_path / "gpu-only" / "meta.json").write_text("{}")  # --gpu alone, and the run names no model
    assert cli("validate", str(tmp_path / "gpu-only"), "--workload", "w", "--gpu", "H100") == 2
    assert "the run names no model: give --model" in capsys.readouterr().err
    assert cli("validate", str(tmp_path), "--workload", "w", "--gpu", "MI455X", "--model", "Llama-3.1-8B") == 2
    assert "MI455X" in capsys.readouterr().err
    (tmp_path / "meta.json").write_text('{"engine_kwargs": {"max_num_seqs": "many"}}')
    (tmp_path / "w.jsonl").write_text('{"arrival_time_ns": 0, "input_toks": 5, "output_toks": 2}\n')
    assert cli("validate", str(tmp_path), "--workload", str(tmp_path / "w.jsonl"), "--gpu", "H100",
               "--model", "Llama-3.1-8B") == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "meta.json: engine_kwargs.max_num_seqs must be an integer" in err
    (tmp_path / "meta.json").write_text("{}")  # nothing recorded: defaults, printed; the next missing file is named
    assert cli("validate", str(tmp_path), "--workload", str(tmp_path / "w.jsonl"), "--gpu", "H100",
               "--model", "Llama-3.1-8B") == 2
    assert "requests.jsonl: JSON-lines file not found" in capsys.readouterr().err


def test_static_batches_take_argonne_s_one_length_or_separate_input_and_output_lengths(tmp_path):
    """`Input Length`/`Output Length` (benchmark_latency.py's shape) run the same simulation as argonne's one
    column when they are equal, and a distinct output length changes it; both forms at once is refused."""
    from llumverify.errors import UserError
    from llumverify.validation.static_batch import engine_for, read_rows, simulate_row

    one = tmp_path / "one.csv"
    one.write_text("Hardware,Num of Hardware,Framework,Model,Input Output Length,Batch Size,Latency\n"
                   "H100,1,vLLM,Llama-3.1-8B,64,4,1.0\n")
    two = tmp_path / "two.csv"
    two.write_text("Hardware,Num of Hardware,Model,Input Length,Output Length,Batch Size,Latency\n"
                   "H100,1,Llama-3.1-8B,64,64,4,1.0\nH100,1,Llama-3.1-8B,64,8,4,1.0\n")
    (a,), (b, c) = read_rows(one), read_rows(two)
    assert (a.prompt, a.output, a.framework) == (64, 64, "vLLM")
    assert (b.prompt, b.output, c.output, b.framework) == (64, 64, 8, "")
    step = engine_profile.step_cost(HardwareConfig(gpu="H100", model="Llama-3.1-8B"))
    engine = engine_for(4096)
    assert simulate_row(a, step, engine) == simulate_row(b, step, engine) > simulate_row(c, step, engine)
    both = tmp_path / "both.csv"
    both.write_text("Hardware,Num of Hardware,Model,Input Output Length,Input Length,Output Length,Batch Size,Latency\n")
    with pytest.raises(UserError, match="not both"):
        read_rows(both)


@needs_shared
def test_a_run_without_its_workload_file_replays_the_workload_its_requests_imply(tmp_path, capsys):
    """No --workload: requests.jsonl's lengths, arriving at the client's send times (arrival_time, within
    40 ms of the shared workload's schedule on this run), no prompt hashes; the note says so."""
    real = validation.load_run(RUN, WORKLOAD)
    derived = validation.load_run(RUN, None)
    assert [(s.prompt_tokens, s.output_tokens) for s in derived.specs] == [
        (s.prompt_tokens, s.output_tokens) for s in real.specs]
    assert all(not s.hash_ids for s in derived.specs) and any(s.hash_ids for s in real.specs)
    first = real.specs[0].arrival_s  # the workload's clock starts before its first request; the derived one at it
    gaps = [d.arrival_s - (r.arrival_s - first) for d, r in zip(derived.specs, real.specs)]
    assert derived.specs[0].arrival_s == 0 and max(map(abs, gaps)) < 0.04
    assert cli("validate", str(RUN), "--profile", str(PROFILE), "--out", str(tmp_path / "v")) == 0
    assert ("workload: derived from requests.jsonl (arrivals: the client's arrival_time; no prompt hashes, so no "
            "prompt shares cached blocks with another)") in " ".join(capsys.readouterr().out.split())  # lines wrap
    doc = json.loads((tmp_path / "v" / "validation.json").read_text())
    assert doc["workload"] == validation.DERIVED and doc["arrivals"] == "arrivals: the client's arrival_time"
    assert 0 < doc["simulated_prefix_hit_rate"] < 0.2 and doc["simulated_preemptions"] > 0  # its own blocks again


def test_a_derived_workload_falls_back_to_queue_times_and_sorts_an_unordered_run(tmp_path, capsys):
    """A harness that logs requests as they finish writes them out of arrival order: they are replayed
    and scored in arrival order, each real measurement staying with its own request, and it is said."""
    rows = [{"input_toks": 8 + k, "output_toks": 3, "queued_ts": 100.0 + t, "first_token_ts": 101.0 + t,
             "last_token_ts": 102.0 + 2 * t} for k, t in enumerate((0.0, 0.5, 0.25))]
    path = tmp_path / "requests.jsonl"
    order, specs, key = validation.derived_workload(path, rows, [1, 2, 3])  # no arrival_time: the engine's queue times
    assert order == [0, 2, 1] and [s.arrival_s for s in specs] == [0.0, 0.25, 0.5] and [s.id for s in specs] == [0, 1, 2]
    assert key == "queued_ts"
    assert [s.prompt_tokens for s in specs] == [8, 10, 9]
    (tmp_path / "meta.json").write_text("{}")
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    run = validation.load_run(tmp_path, None, num_blocks=1000)
    assert run.reordered and list(run.real["e2e"]) == [2.0, 2.25, 2.5]  # last - queued of requests 1, 3, 2
    assert cli("validate", str(tmp_path), "--gpu", "H100", "--model", "Llama-3.1-8B") == 0
    out = " ".join(capsys.readouterr().out.split())  # printed lines wrap at 100 columns
    assert "requests.jsonl is not in arrival order: its requests are replayed and scored in arrival order" in out
    assert "arrivals: the engine's queued_ts (not every request has an arrival_time)" in out
    rows[1]["first_token_ts"] = None  # a problem is named by its line in the file, blank lines counted
    path.write_text(json.dumps(rows[0]) + "\n\n" + json.dumps(rows[1]) + "\n" + json.dumps(rows[2]) + "\n")
    assert cli("validate", str(tmp_path), "--gpu", "H100", "--model", "Llama-3.1-8B") == 2
    assert "requests.jsonl:3: first_token_ts is null (no token: a failed or aborted request?" in capsys.readouterr().err
    assert cli("calibrate", "--workload", str(path), "--gpu", "H100", "--model", "Llama-3.1-8B",
               "--out", str(tmp_path / "c.toml")) == 2
    assert "--workload goes with --run" in capsys.readouterr().err


@pytest.mark.parametrize("change, message", [
    (lambda rows: rows.append(dict(rows[0])), "requests.jsonl:4: request_id 'r0' again (first on line 1)"),
    (lambda rows: [r.update({k: r[k] * 1000 for k in ("queued_ts", "first_token_ts", "last_token_ts")}) for r in rows],
     "a mean of 500 s per output token: are queued_ts, first_token_ts and last_token_ts in seconds?"),
    (lambda rows: rows[1].update(finish_reason="abort"), "requests.jsonl:2: finish_reason 'abort'"),
    (lambda rows: rows[2].update(arrival_time=2e9), "arrival_time spans 2e+09 s (line 1 and line 3): more than 1e+07 s"),
    (lambda rows: rows[2].pop("output_toks"), "requests.jsonl:3: no output_toks"),
])
def test_a_run_that_cannot_be_what_it_says_is_refused_naming_the_line(change, message, tmp_path, capsys):
    """Runs that replayed with absurd numbers, silently: a request logged twice (its load doubled),
    timestamps in ms (TPOT in minutes), an aborted request (its short output scored as a finished
    one), one arrival on another clock."""
    rows = [{"request_id": f"r{k}", "arrival_time": 10.0 + k, "input_toks": 8, "output_toks": 3, "queued_ts": 100.0 + k,
             "first_token_ts": 100.1 + k, "last_token_ts": 101.1 + k} for k in range(3)]
    change(rows)
    (tmp_path / "meta.json").write_text("{}")
    (tmp_path / "requests.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert cli("validate", str(tmp_path), "--gpu", "H100", "--model", "Llama-3.1-8B") == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err, err


def test_an_old_vllm_run_says_it_is_replayed_as_v1(tmp_path, capsys):
    rows = [{"input_toks": 8, "output_toks": 3, "queued_ts": 100.0 + k, "first_token_ts": 100.1 + k,
             "last_token_ts": 100.2 + k} for k in range(3)]
    (tmp_path / "requests.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    for version, said in (("0.6.3.post1", True), ("0.19.0", False), ("v0.7.2", True), ("dev", False)):
        (tmp_path / "meta.json").write_text(json.dumps({"vllm_version": version}))
        assert cli("validate", str(tmp_path), "--gpu", "H100", "--model", "Llama-3.1-8B") == 0
        out = capsys.readouterr().out
        assert (f"engine: vLLM {version} ran its V0 engine by default (V1 became the default in 0.8)" in out) == said


def test_a_static_batch_row_keeps_its_checkpoint_s_fp8_and_its_kv_cache_dtype(tmp_path):
    """A row naming an fp8 checkpoint was priced as the 16-bit model (the name lost its suffix); the
    optional KV Cache Dtype column sets the row's KV format."""
    from llumverify.settings.config import HardwareConfig
    from llumverify.sim.catalog import get_model
    from llumverify.validation.static_batch import _row_model, read_rows, simulate_static, static_rows

    assert _row_model("amd/Llama-3.1-70B-Instruct-FP8-KV", None, "") == "Llama-3-70B-FP8"
    assert _row_model("meta-llama/Meta-Llama-3-70B", None, "") == "Llama-3-70B"
    fp8, bf16 = get_model("Llama-3-70B-FP8"), get_model("Llama-3-70B")
    assert _row_model("amd/Llama-3.1-70B-Instruct-FP8-KV", fp8, "Llama-3-70B-FP8") == "Llama-3-70B-FP8"
    assert _row_model("amd/Llama-3.1-70B-Instruct-FP8-KV", bf16, "Llama-3-70B") is None  # --model picks a format
    assert _row_model("meta-llama/Meta-Llama-3-70B", fp8, "Llama-3-70B-FP8") is None
    csv = tmp_path / "rows.csv"
    head = "Hardware,Num of Hardware,Model,Input Length,Output Length,Batch Size,Latency,KV Cache Dtype\n"
    csv.write_text(head + "".join(f"Nvidia H100 GPU,4,{m},128,128,8,1.0,{kv}\n" for m, kv in (
        ("Meta-Llama-3-70B", ""), ("Meta-Llama-3-70B-FP8", "auto"), ("Meta-Llama-3-70B-FP8", "fp8_e4m3"))))
    assert [r.kv_cache_dtype for r in read_rows(csv)] == ["auto", "auto", "fp8"]
    rows, _ = static_rows(csv, HardwareConfig(), tp=None)
    bf16, fp8, fp8_kv = simulate_static(rows, HardwareConfig(), None)
    assert fp8 < 0.8 * bf16 and fp8_kv < fp8  # half the weight bytes; then half the KV bytes too
    from llumverify.sim.roofline import load_efficiency
    from llumverify.validation.transfer_fit import simulate as vendor_simulate

    assert list(vendor_simulate(rows, load_efficiency())) == [bf16, fp8, fp8_kv]  # the fit's path prices rows alike
    csv.write_text(head + "Nvidia H100 GPU,4,Meta-Llama-3-70B,128,128,8,1.0,int8\n")
    with pytest.raises(UserError, match=r"rows.csv:2: KV Cache Dtype must be auto or an fp8 format"):
        read_rows(csv)


def test_options_of_a_real_run_are_refused_with_static_batches(tmp_path, capsys):
    csv = tmp_path / "rows.csv"
    csv.write_text("Hardware,Num of Hardware,Model,Input Output Length,Batch Size,Latency\n"
                   "Nvidia H100 GPU,1,Meta-Llama-3-8B,128,1,1.0\n")
    assert cli("validate", "--static-batch", str(csv), "--num-gpu-blocks", "9", "--bench-seed", "1") == 2
    assert "--num-gpu-blocks, --bench-seed: for a real run, not --static-batch" in capsys.readouterr().err
    assert cli("calibrate", "--static-batch", str(csv), "--calib-frac", "0.5", "--out", str(tmp_path / "t.toml")) == 2
    assert "--calib-frac: for a real run, not --static-batch" in capsys.readouterr().err


def test_a_request_over_the_run_s_max_model_len_is_refused(tmp_path, capsys):
    rows = [{"input_toks": 8 + 100 * k, "output_toks": 3, "queued_ts": 100.0 + k, "first_token_ts": 100.1 + k,
             "last_token_ts": 100.2 + k} for k in range(3)]
    (tmp_path / "requests.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "meta.json").write_text(json.dumps({"engine_kwargs": {"max_model_len": 200}}))
    assert cli("validate", str(tmp_path), "--gpu", "H100", "--model", "Llama-3.1-8B") == 2
    assert ("requests.jsonl:3: 208 prompt + 3 output tokens, over the run's engine_kwargs.max_model_len 200"
            in capsys.readouterr().err)


def test_a_run_whose_meta_json_counts_fewer_requests_than_its_log_is_refused(tmp_path) -> None:
    """num_requests must be what requests.jsonl holds, in both directions: a meta.json of another (smaller) run
    beside this log is refused as a log cut short is; the count itself is read."""
    from pathlib import Path

    src = Path(__file__).parent / "bad_inputs" / "runs" / "ok"
    meta = json.loads((src / "meta.json").read_text())
    (tmp_path / "requests.jsonl").write_text((src / "requests.jsonl").read_text())
    (tmp_path / "meta.json").write_text(json.dumps({**meta, "num_requests": 5}))
    with pytest.raises(UserError, match="num_requests 5, but .*requests.jsonl holds 6 requests"):
        validation.load_run(tmp_path, None)
    (tmp_path / "meta.json").write_text(json.dumps({**meta, "num_requests": 6}))
    validation.load_run(tmp_path, None)


@needs_shared
def test_a_profile_scores_only_the_static_batch_rows_of_its_own_gpu_and_model() -> None:
    """As a step-cost file does: an RTX 4090 / Llama-3.1-8B profile keeps no A100 / Llama-2-7B row."""
    from pathlib import Path

    from llumverify.validation.static_batch import static_rows

    csv = Path(__file__).parent / "bad_inputs" / "static" / "one_row_ok.csv"
    assert len(static_rows(csv, HardwareConfig())[0]) == 1
    assert static_rows(csv, HardwareConfig(profile=str(PROFILE)))[0] == []


def _run_at(arrivals: list[float]) -> validation.RealRun:
    from llumverify.requests import RequestSpec
    from llumverify.settings.config import EngineConfig

    specs = tuple(RequestSpec(i, t, 16, 4) for i, t in enumerate(arrivals))
    return validation.RealRun(EngineConfig(), specs, {}, {}, {})


def test_the_calibration_and_validation_parts_never_share_a_request() -> None:
    """A fixed-rate client sends at whole seconds 0..9: the cut of the first third falls on the request sent
    at 3 s, which belongs to one part, not both (a constant fitted on a request it is then scored on
    flatters the validation error); every request is in one of them."""
    calib, held = validation.split_ids(_run_at([float(t) for t in range(10)]), 1 / 3)
    assert not set(calib) & set(held)
    assert sorted([*calib, *held]) == list(range(10))


def test_compare_reports_the_90th_percentile_and_the_error_against_the_real_time() -> None:
    """Real times 1..100 s, simulated twice each: the P90 of 1..100 (linear interpolation between the order
    statistics at rank 0.9 x 99 = 89.1) is 90 + 0.1 = 90.1 s, not the P99 (99.01 s); each request's error
    |sim - real| / real is 1."""
    real = np.arange(1.0, 101.0)
    doc = validation.compare({m: real for m in validation.METRICS}, {m: 2 * real for m in validation.METRICS})
    for m in validation.METRICS:
        assert doc[m]["real_p90_s"] == pytest.approx(90.1) and doc[m]["sim_p90_s"] == pytest.approx(180.2)
        assert doc[m]["real_p99_s"] == pytest.approx(99.01) and doc[m]["real_mean_s"] == pytest.approx(50.5)
        assert doc[m]["median_ape"] == pytest.approx(1.0)


@needs_shared
def test_calibrate_with_top_p_fits_with_the_sort_and_writes_the_costs_without_it(tmp_path):
    """calibrate --sampling top-p: the fit prices the sampler's sort, so fixed_ns is the engine's own time; the file
    holds the greedy costs, so a replay with --sampling top-p adds the sort once (not twice) and meets the fit."""
    from llumverify.sim.stepcost import load_step_cost

    files = {}
    for sampling in ("greedy", "top-p"):
        files[sampling] = tmp_path / f"{sampling}.toml"
        assert cli("calibrate", "--run", str(RUN), "--workload", str(WORKLOAD), "--profile", str(PROFILE),
                   "--sampling", sampling, "--out", str(files[sampling])) == 0
    greedy, topp = (load_step_cost(files[s]) for s in ("greedy", "top-p"))
    assert topp.per_seq == greedy.per_seq and topp.linear == greedy.linear  # no sort in the file
    assert "sampled with top-p" in topp.source and "taken as greedy" in greedy.source
    assert "sim/sampling.py" not in topp.source  # nor does its source say the sort is in it (review of session 45)
    run = validation.load_run(RUN, WORKLOAD)
    calib, _ = validation.split_ids(run)
    target = float(np.nanmean(run.real["tpot"][calib]))
    sort_step = (engine_profile.step_cost(HardwareConfig(cost_file=str(files["greedy"]), sampling="top-p"))
                 .step_ns([], 32, 0) - greedy.step_ns([], 32, 0)) / 32  # the sort a sequence adds to a step
    # the sort moved out of fixed_ns: several sequences' worth (tens run at once here), under a full step's
    assert 5 * sort_step < greedy.fixed_ns - topp.fixed_ns < 100 * sort_step
    for path, sampling in ((files["greedy"], "greedy"), (files["top-p"], "top-p")):
        sim = validation.replay(run, engine_profile.step_cost(HardwareConfig(cost_file=str(path), sampling=sampling)))
        assert abs(float(np.nanmean(sim["tpot"][calib])) / target - 1) < 0.005, sampling


def test_the_split_s_window_starts_at_the_first_arrival_and_a_burst_splits_by_send_order() -> None:
    """A workload's clock need not start at 0: sends at 100-110 s cut the first third at 100 + 10 / 3 s (three
    requests calibrate). Ten requests sent at once: the first ceil(10 / 3) = 4 calibrate, the other six validate."""
    calib, held = validation.split_ids(_run_at([100.0, 101.0, 102.0, 104.0, 105.0, 106.0, 107.0, 108.0, 109.0, 110.0]))
    assert (list(calib), list(held)) == ([0, 1, 2], [3, 4, 5, 6, 7, 8, 9])
    calib, held = validation.split_ids(_run_at([5.0] * 10))
    assert (list(calib), list(held)) == ([0, 1, 2, 3], [4, 5, 6, 7, 8, 9])


def test_compare_averages_only_the_requests_it_is_given_and_means_are_means() -> None:
    """Real 1, 2, 3, 4, 100 s; scored over requests 0, 1 and 4: mean (1 + 2 + 100) / 3 = 34.33 s (the median would
    be 2 s, all five requests' mean 22 s); P90 of 1, 2, 100 at rank 0.9 x 2 = 1.8: 2 + 0.8 x 98 = 80.4 s."""
    real = np.array([1.0, 2.0, 3.0, 4.0, 100.0])
    doc = validation.compare({m: real for m in validation.METRICS}, {m: 1.5 * real for m in validation.METRICS},
                             np.array([0, 1, 4]))
    assert doc["n_requests"] == 3
    for m in validation.METRICS:
        assert doc[m]["real_mean_s"] == pytest.approx(103 / 3) and doc[m]["sim_mean_s"] == pytest.approx(1.5 * 103 / 3)
        assert doc[m]["real_p90_s"] == pytest.approx(80.4) and doc[m]["median_ape"] == pytest.approx(0.5)


def test_simulated_tpot_is_the_decode_time_over_output_minus_one() -> None:
    """As the real TPOT is measured: (E2E - TTFT) / (output - 1) for every request (8 tokens out here)."""
    from pathlib import Path

    corpus = Path(__file__).parent / "bad_inputs" / "runs"
    run = validation.load_run(corpus / "ok", corpus / "workload.jsonl")
    sim = validation.replay(run, engine_profile.step_cost(HardwareConfig(gpu="H100", model="Llama-3.1-8B")))
    out = np.array([s.output_tokens for s in run.specs])
    assert set(out) == {8}
    assert np.allclose(sim["tpot"] * (out - 1), sim["e2e"] - sim["ttft"], rtol=1e-9, atol=0)
    assert np.allclose(run.real["tpot"] * (out - 1), run.real["e2e"] - run.real["ttft"], rtol=1e-9, atol=0)


def test_calibrate_top_p_on_a_gpu_without_sm_numbers_is_refused_before_the_run_is_read(tmp_path, capsys):
    """Review of session 45: the run's requests hold a repeated id, but the option that cannot be priced is named
    first, as calibrate's comment says (the run is not read)."""
    from pathlib import Path

    runs = Path(__file__).parent / "bad_inputs" / "runs"
    assert cli("calibrate", "--run", str(runs / "duplicate_id"), "--gpu", "H20", "--model", "Llama-3.1-8B",
               "--sampling", "top-p", "--out", str(tmp_path / "c.toml")) == 2
    err = capsys.readouterr().err
    assert "top-p sampling is priced by the GPU's SM count and boost clock" in err and "again" not in err
