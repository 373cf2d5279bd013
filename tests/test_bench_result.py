"""`llumverify validate RESULT.json`: a `vllm bench serve --save-result --save-detailed` file as a real run
(llumverify/validation/bench_result.py)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from conftest import validation_dir

from llumverify.cli import main
from llumverify.errors import UserError
from llumverify.settings.config import HardwareConfig
from llumverify.validation import replay
from llumverify.sim.stepcost import load_step_cost
from llumverify.validation.bench_result import load_bench
from llumverify.validation.client_time import CLIENT_MS, CLIENT_US_PER_TOKEN, ClientTime, client_time

# 24 requests of one harness run: (send s, prompt, output, queued s, first token s, last token s)
ROWS = [(0.2 * k, 100 + 37 * k, 2 + (k % 5) * 7, 100.0 + 0.2 * k + 0.001, 100.0 + 0.2 * k + 0.03 + 0.002 * k,
         100.0 + 0.2 * k + 0.03 + 0.002 * k + 0.011 * (1 + (k % 5) * 7)) for k in range(24)]


def cli(*args: str) -> int:
    with pytest.raises(SystemExit) as exc:
        main(list(args))
    return exc.value.code


def _folder(root: Path) -> Path:
    """The run as a run folder: engine timestamps, the client's send times, vLLM's settings recorded."""
    root.mkdir()
    (root / "meta.json").write_text(json.dumps({
        "model": "meta-llama/Llama-3.1-8B", "hardware": {"device_name": "NVIDIA H100 80GB HBM3"},
        "engine_kwargs": {"max_num_seqs": 1024, "max_num_batched_tokens": 8192}, "kv_cache": {"num_gpu_blocks": 5000}}))
    (root / "requests.jsonl").write_text("".join(json.dumps(
        {"arrival_time": 1e9 + s, "input_toks": p, "output_toks": o, "queued_ts": q, "first_token_ts": f,
         "last_token_ts": last}) + "\n" for s, p, o, q, f, last in ROWS))
    return root


def _bench(path: Path, **changes: object) -> Path:
    """The same run as vllm bench serve writes it: client send times on its own clock, TTFT, chunk gaps."""
    doc: dict[str, object] = {
        "model_id": "meta-llama/Llama-3.1-8B", "input_lens": [p for _, p, *_ in ROWS],
        "output_lens": [o for _, _, o, *_ in ROWS], "start_times": [5000.0 + s for s, *_ in ROWS],
        "ttfts": [f - q for *_, q, f, _ in ROWS],
        "itls": [[(last - f) / (o - 1)] * (o - 1) for _, _, o, _, f, last in ROWS], "errors": [""] * len(ROWS)}
    doc.update(changes)
    path.write_text(json.dumps(doc))
    return path


def test_a_bench_result_replays_exactly_as_the_same_run_s_folder(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """Same requests, lengths, send times and engine: the same simulation and the same scores, once the
    client time is 0 (a run folder's timestamps are the engine's), to 10 ppm: the two files' send times are
    epoch seconds in doubles, so the replays' arrivals differ by up to ~50 ns and a step boundary can fall between."""
    folder, bench = _folder(tmp_path / "run"), _bench(tmp_path / "bench.json")
    assert cli("validate", str(folder), "--out", str(tmp_path / "a")) == 0
    assert cli("validate", str(bench), "--gpu", "H100", "--num-gpu-blocks", "5000", "--client-ms", "0",
               "--client-us-per-token", "0", "--out", str(tmp_path / "b")) == 0
    out = " ".join(capsys.readouterr().out.split())  # printed lines wrap at 100 columns
    assert ("client: 0 ms per request + 0 µs per prompt token added to the simulated TTFT and E2E (--client-ms, "
            "--client-us-per-token)") in out
    assert "max_num_batched_tokens 8192 and max_num_seqs 1024: not recorded, vLLM V1 `vllm serve` defaults" in out
    a, b = (json.loads((tmp_path / d / "validation.json").read_text()) for d in "ab")
    assert a["client_ms_added"] == b["client_ms_added"] == 0
    assert a["client_us_per_prompt_token_added"] == b["client_us_per_prompt_token_added"] == 0
    for part in (a, a["validation_part"]):
        assert part["e2e"]["real_mean_s"] > 0
    for key in ("ttft", "tpot", "e2e", "validation_part", "calibration_part", "simulated_preemptions"):
        assert _numbers(a[key]) == pytest.approx(_numbers(b[key]), rel=1e-5), key


def _numbers(doc: object) -> list[float]:
    """The numbers of a validation.json part, in key order (the ids' description is a string)."""
    if isinstance(doc, dict):
        return [x for k in sorted(doc) for x in _numbers(doc[k])]
    return [float(doc)] if isinstance(doc, (int, float)) else []


def test_the_client_time_is_added_to_ttft_and_e2e_only(tmp_path: Path) -> None:
    """Per request, the constant plus the time per prompt token of that request's own prompt (the
    prompts here are 100-951 tokens); TPOT unchanged."""
    bench = _bench(tmp_path / "bench.json")
    source = HardwareConfig(gpu="H100")
    times = (ClientTime(), client_time(), client_time(25.0, 10.0))
    runs = [load_bench(bench, source, False, 5000, c)[0] for c in times]
    assert [(r.client.fixed_s, r.client.per_token_s) for r in runs] == [
        (0.0, 0.0), (CLIENT_MS / 1e3, CLIENT_US_PER_TOKEN / 1e6), (0.025, 1e-5)]
    from llumverify.sim import engine_profile

    step = engine_profile.step_cost(load_bench(bench, source, False, 5000, ClientTime())[1], None)
    base, default, late = (replay.replay(r, step) for r in runs)
    prompts = np.array([p for _, p, *_ in ROWS])  # send order is file order here
    assert np.allclose(late["ttft"] - base["ttft"], 0.025 + 1e-5 * prompts)
    assert np.allclose(late["e2e"] - base["e2e"], 0.025 + 1e-5 * prompts)
    assert np.allclose(default["ttft"] - base["ttft"], CLIENT_MS / 1e3 + CLIENT_US_PER_TOKEN / 1e6 * prompts)
    assert np.array_equal(late["tpot"], base["tpot"], equal_nan=True)


def test_measurements_come_from_ttfts_and_chunk_gaps_in_send_order(tmp_path: Path) -> None:
    """A harness may list requests in any order: they are replayed in send order, each keeping its own times;
    E2E is TTFT plus the chunk gaps (a chunk may carry several tokens), TPOT their sum over output - 1."""
    bench = _bench(tmp_path / "b.json", start_times=[2.0, 1.0] + [3.0 + k for k in range(22)],
                   itls=[[0.5, 0.5]] + [[0.02] * (o - 1) for _, _, o, *_ in ROWS[1:]])
    run, _, how, arrivals = load_bench(bench, HardwareConfig(gpu="H100"), False, None, ClientTime())
    assert arrivals == "arrivals: start_times"
    assert [s.prompt_tokens for s in run.specs[:2]] == [ROWS[1][1], ROWS[0][1]] and run.specs[0].arrival_s == 0
    first = ROWS[0]
    assert run.real["e2e"][1] == pytest.approx(first[4] - first[3] + 1.0)
    assert run.real["tpot"][1] == pytest.approx(1.0 / (first[2] - 1))
    assert "derived (not recorded in the result file): 1 × H100 memory × 0.9" in how


@pytest.mark.parametrize("change, message", [
    ({"itls": None}, "not a detailed vllm bench serve result: no itls (write it with `vllm bench serve"),
    ({"start_times": None}, "no start_times and no request_rate: the sends cannot be known"),
    ({"ttfts": [0.1]}, "per-request lists of different lengths (input_lens 24, output_lens 24, ttfts 1, itls 24, start_times 24"),
    ({"errors": ["", "ReadTimeout"] + [""] * 22}, "1 of 24 requests failed (first: request 1: 'ReadTimeout')"),
    ({"ttfts": [float("nan")] * 24}, "ttfts[0] must be a finite number, got nan"),
    ({"ttfts": [0.0] * 24}, "ttfts[0] must be > 0, got 0.0"),
    ({"itls": [[0.0, 0.0]] * 24}, "itls[0] adds up to no time after the first of 2 output tokens"),
    ({"input_lens": [10**400] * 24}, "input_lens[0] must be an integer in [1, 2,147,483,647], got "
                                     "10000000000000000000... (401 characters)"),
    ({"input_lens": [100.0] * 24}, "input_lens[0] must be an integer, got 100.0"),
    ({"errors": [False] * 24}, "errors[0] must be a string (empty on success), got False"),
    ({"model_id": "llama3"}, "model_id 'llama3' is not a catalog model (a --served-model-name?): give --model"),
    ({"input_lens": [10**6] * 24}, "request 0 of the file (1000000 prompt + 2 output tokens) does not fit the simulated "
                                    "KV cache of"),
    ({"input_lens": ["HUGE"] * 24}, "not a vllm bench serve result (Exceeds the limit"),  # 5,000 digits, below
    ({"output_lens": [0] * 24}, "output_lens[0] must be an integer in [1, 2,147,483,647], got 0"),
    ({"output_lens": [5, 0] + [5] * 22, "itls": [[0.01] * 4, []] + [[0.01] * 4] * 22},
     "1 of 24 requests (first: request 1) streamed nothing (output_lens 0, no itls) yet record no error"),
    ({"itls": [[1e308, 1e308]] * 24}, "itls[0] (their sum) must be a finite number, got inf"),
    ({"start_times": [1e300] + [0.0] * 23}, "start_times spans 1e+300 s (request 1 and request 0): more than 1e+07 s"),
    ({"model_id": "TheBloke/Llama-2-7B-GPTQ-Int8"}, "model_id: model 'TheBloke/Llama-2-7B-GPTQ-Int8': GPTQ-Int8 weights are not modelled"),
    ({"itls": [3] * 24}, "itls[0] must be a list of seconds, got 3"),
    ({"model_id": 7}, "model_id must be a string, got 7"),
])
def test_a_bad_result_file_is_one_line_naming_the_field(change: dict, message: str, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture) -> None:
    doc = _bench(tmp_path / "b.json", **{k: v for k, v in change.items() if v is not None})
    if None in change.values():
        data = json.loads(doc.read_text())
        for k in change:
            del data[k]
        doc.write_text(json.dumps(data))
    doc.write_text(doc.read_text().replace('"HUGE"', "1" * 5000))  # json.dumps cannot write such an integer
    assert cli("validate", str(doc), "--gpu", "H100") == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err, err


@pytest.mark.parametrize("args, message", [
    ([], "a vllm bench serve result records no GPU: give --gpu"),
    (["--gpu", "H100", "--workload", "w.jsonl"], "--workload goes with a run folder"),
    (["--gpu", "H100", "--model", "Qwen3-32B"], "--model Qwen3-32B, but"),
])
def test_what_a_result_file_cannot_say_is_asked_for(args: list[str], message: str, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture) -> None:
    assert cli("validate", str(_bench(tmp_path / "b.json")), *args) == 2
    assert message in capsys.readouterr().err


def test_the_result_without_errors_and_a_gpu_file_s_own_name(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """`errors` may be absent (every request succeeded). vLLM's batch defaults read the device's name, so a
    GPU file is known by the name it gives, not by its path (an A100 in a folder named h100)."""
    data = json.loads(_bench(tmp_path / "b.json").read_text())
    del data["errors"]
    (tmp_path / "b.json").write_text(json.dumps(data))
    gpu = tmp_path / "h100" / "gpu.toml"
    gpu.parent.mkdir()
    gpu.write_text('[[gpu]]\nname = "My A100"\nflops = 312e12\narch = "sm_80"\nmem_bw = 2039e9\n'
                   'memory_bytes = 85899345920\nmemory_type = "HBM2e"\ninterconnect = "NVLink3"\n')
    assert cli("validate", str(tmp_path / "b.json"), "--gpu", str(gpu), "--client-ms", "0", "--client-us-per-token", "0") == 0
    out = " ".join(capsys.readouterr().out.split())  # printed lines wrap at 100 columns
    assert "max_num_batched_tokens 2048 and max_num_seqs 256: not recorded, vLLM V1 `vllm serve` defaults for My A100" in out
    assert "derived (not recorded in the result file): 1 × My A100 memory" in out
    assert cli("validate", str(tmp_path / "b.json"), "--gpu", "H100", "--client-ms", "nan") == 2
    assert "--client-ms must be a finite number, got nan" in capsys.readouterr().err
    assert cli("validate", str(tmp_path / "b.json"), "--gpu", "H100", "--client-us-per-token", "nan") == 2
    assert "--client-us-per-token must be a finite number, got nan" in capsys.readouterr().err
    assert cli("validate", str(tmp_path / "b.json"), "--gpu", "H100", "--client-us-per-token", "-1") == 2
    assert "--client-us-per-token" in capsys.readouterr().err


def test_a_run_folder_keeps_engine_time_and_its_files_are_not_results(tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture) -> None:
    folder = _folder(tmp_path / "run")
    assert cli("validate", str(folder), "--client-ms", "5") == 2
    assert "--client-ms goes with a vllm bench serve result" in capsys.readouterr().err
    assert cli("validate", str(folder), "--client-us-per-token", "1") == 2
    assert "--client-us-per-token goes with a vllm bench serve result" in capsys.readouterr().err
    assert cli("validate", str(folder / "requests.jsonl"), "--gpu", "H100") == 2
    assert f"a run folder's file: give the folder, {folder}" in capsys.readouterr().err



def test_calibrate_fits_the_step_constant_on_a_result_file_as_on_its_folder(tmp_path: Path) -> None:
    """TPOT carries no client time, so both forms of one run fit the same fixed_ns."""
    folder, bench = _folder(tmp_path / "run"), _bench(tmp_path / "b.json")
    assert cli("calibrate", "--run", str(folder), "--out", str(tmp_path / "a.toml")) == 0
    assert cli("calibrate", "--run", str(bench), "--gpu", "H100", "--num-gpu-blocks", "5000",
               "--out", str(tmp_path / "b.toml")) == 0
    fitted = [load_step_cost(tmp_path / f"{x}.toml").fixed_ns for x in "ab"]
    assert fitted[0] == fitted[1] > 0


def test_async_scheduling_is_on_unless_the_record_s_server_did_not_run_it(tmp_path: Path,
                                                                         capsys: pytest.CaptureFixture) -> None:
    """A result file records no engine settings: async scheduling (vLLM >= 0.14's default) unless
    --no-async-scheduling says the server ran without it (arrivals into a busy engine join a step sooner)."""
    bench = _bench(tmp_path / "bench.json", start_times=[5000.0 + 0.003 * k for k in range(len(ROWS))])  # overlapping
    for flag, out in ((), "on"), (("--no-async-scheduling",), "off"):
        assert cli("validate", str(bench), "--gpu", "H100", "--num-gpu-blocks", "5000", *flag, "--out",
                   str(tmp_path / out)) == 0
    said = capsys.readouterr().out
    assert "async_scheduling: not recorded, on (an unrecorded vLLM's default)" in said
    on, off = (json.loads((tmp_path / d / "validation.json").read_text()) for d in ("on", "off"))
    assert on["ttft"]["sim_mean_s"] != off["ttft"]["sim_mean_s"]
    # the shipped client time, recorded as validate added it
    assert (on["client_ms_added"], on["client_us_per_prompt_token_added"]) == pytest.approx((CLIENT_MS, CLIENT_US_PER_TOKEN))


@pytest.mark.parametrize("report", ["public-serving", "inference-perf-h100", "inferencex-b200", "public-bench-results"])
def test_the_default_client_time_is_the_one_the_serving_reports_used(report: str) -> None:
    """The client-measured reports add the shipped client time: they must be regenerated when it changes."""
    doc = json.loads((Path(__file__).resolve().parents[1] / "reports" / "validation" / report / "results.json").read_text())
    if "client_ms" in doc:  # one client time for the report
        assert (doc["client_ms"], doc["client_us_per_prompt_token"]) == (CLIENT_MS, CLIENT_US_PER_TOKEN)
    else:  # the one validate added to each run
        runs = doc["runs"] if isinstance(doc, dict) else doc
        assert {(r["client_ms_added"], r["client_us_per_prompt_token_added"]) for r in runs} == {(CLIENT_MS, CLIENT_US_PER_TOKEN)}


@pytest.mark.skipif(not (validation_dir() / "llmservingsim" / "runs" / "RTX4090-Llama-3.1-8B").is_dir(),
                    reason=f"no shared validation data at {validation_dir()} (set LLUMVERIFY_VALIDATION)")
def test_the_shared_rtx4090_run_scores_the_same_as_a_result_file(tmp_path: Path) -> None:
    """The real run written as vllm bench serve would (its client sends, engine TTFT, even gaps)."""
    run = validation_dir() / "llmservingsim" / "runs" / "RTX4090-Llama-3.1-8B"
    rows = [json.loads(line) for line in (run / "requests.jsonl").read_text().splitlines() if line.strip()]
    doc = {"model_id": "meta-llama/Llama-3.1-8B", "input_lens": [r["input_toks"] for r in rows],
           "output_lens": [r["output_toks"] for r in rows], "start_times": [r["arrival_time"] for r in rows],
           "ttfts": [r["first_token_ts"] - r["queued_ts"] for r in rows],
           "itls": [[(r["last_token_ts"] - r["first_token_ts"]) / (r["output_toks"] - 1)] * (r["output_toks"] - 1)
                    for r in rows]}
    (tmp_path / "r.json").write_text(json.dumps(doc))
    assert cli("validate", str(run), "--out", str(tmp_path / "a")) == 0
    assert cli("validate", str(tmp_path / "r.json"), "--gpu", "RTX4090", "--client-ms", "0", "--client-us-per-token", "0", "--num-gpu-blocks", "2588",
               "--out", str(tmp_path / "b")) == 0
    a, b = (json.loads((tmp_path / d / "validation.json").read_text()) for d in "ab")
    assert _numbers(a["e2e"]) == pytest.approx(_numbers(b["e2e"]), rel=1e-9)
    assert _numbers(a["validation_part"]) == pytest.approx(_numbers(b["validation_part"]), rel=1e-9)


def test_the_recorded_duration_bounds_the_last_end_from_the_first_send_with_the_client_s_slack(tmp_path: Path) -> None:
    """Requests listed out of send order: the run's end is measured from its earliest send, not the first listed,
    and may pass the recorded duration by the client's sleep overshoot (lag_allowed: 1 s here), no more."""
    sent = [2.0, 1.0] + [3.0 + k for k in range(len(ROWS) - 2)]
    e2e = [f - q + (last - f) for *_, q, f, last in ROWS]
    end = max(s + e for s, e in zip(sent, e2e)) - min(sent)
    ok = _bench(tmp_path / "ok.json", start_times=sent, duration=end - 0.5)
    load_bench(ok, HardwareConfig(gpu="H100"), False, None, ClientTime())
    late = _bench(tmp_path / "late.json", start_times=sent, duration=end - 1.5)
    with pytest.raises(UserError, match="past the run's recorded duration"):
        load_bench(late, HardwareConfig(gpu="H100"), False, None, ClientTime())


def test_a_result_file_is_replayed_at_the_tp_it_is_given(tmp_path: Path) -> None:
    """The file records no TP: --tp 2 is the run's, its engine sized for two GPUs (a run folder says its own)."""
    bench = _bench(tmp_path / "bench.json")
    one = load_bench(bench, HardwareConfig(gpu="H100"), False, None, ClientTime())
    two = load_bench(bench, HardwareConfig(gpu="H100", tp=2), True, None, ClientTime())
    assert (one[1].tp, two[1].tp) == (1, 2)
    assert two[0].engine.num_blocks > 2 * one[0].engine.num_blocks  # twice the memory, the weights split in two
