"""benchmarks/inferencex_multiturn.py: runs that overlapped another experiment are found in sweep.log,
the settings are read from the sweep's commands and logs, and the a + b/TP split of TPOT is a
least-squares fit (the CSV itself is validate's: tests/test_multiturn.py)."""

from __future__ import annotations

import pytest
from conftest import benchmark_script

from llumverify.errors import UserError


def _script():
    return benchmark_script("inferencex_multiturn")


def test_settings_come_from_the_command_the_config_and_the_log() -> None:
    script = _script()
    command = "vllm serve m --max-num-seqs 16 --gpu-memory-utilization 0.9 --tensor-parallel-size 8"
    assert script.flag(command, "gpu-memory-utilization", "c") == "0.9"
    assert script.flag("kv-cache-dtype: fp8\nmax-num-batched-tokens: 8192\n", "max-num-batched-tokens", "y") == "8192"
    with pytest.raises(UserError, match="^run/vllm_command.txt: no kv-cache-dtype$"):
        script.flag(command, "kv-cache-dtype", "run/vllm_command.txt")
    log = "x Initializing a V1 LLM engine (v0.15.0) with config\ny GPU KV cache size: 8,066,320 tokens\n"
    assert script.server_facts(log) == ("0.15.0", 8_066_320) and script.server_facts("") == ("unknown", None)


def test_the_graph_mode_comes_from_the_configs_compilation_config() -> None:
    """The sweep's line (JSON in single quotes, no spaces), JSON with spaces, none at all, and NONE refused."""
    mode = _script().graph_mode
    sweep = """compilation-config: '{"pass_config":{"fuse_allreduce_rms":true},"cudagraph_mode":"FULL_DECODE_ONLY","splitting_ops":[]}'"""
    assert mode("kv-cache-dtype: fp8\n" + sweep + "\nasync-scheduling: true\n", "c") == "full_decode_only"
    assert mode('compilation-config: {"cudagraph_mode": "FULL_AND_PIECEWISE", "splitting_ops": []}\n', "c") == \
        "full_and_piecewise"
    assert mode("kv-cache-dtype: fp8\n", "c") == "full_and_piecewise"
    with pytest.raises(UserError, match="^run/config.yaml: .*cudagraph_mode NONE: no CUDA graph for any step"):
        mode("""compilation-config: '{"cudagraph_mode": "NONE"}'\n""", "run/config.yaml")


def test_the_attention_backend_comes_from_the_log_and_the_command() -> None:
    """The sweep's servers: FLASHINFER (log) without TRT-LLM kernels (command); on B200 FLASHINFER alone decodes with
    them, and another backend reads fp8 as fp8."""
    backend = _script().attention_backend
    log = ("x Initializing a V1 LLM engine (v0.15.0) with config\n"
           "(Worker_TP0) INFO [selector.py:112] Using HND KV cache layout for FLASHINFER backend.\n")
    off = "vllm serve m --tensor-parallel-size 8 --attention-config.use_trtllm_attention=0"
    assert backend(off, log, "fp8", "r") == "flashinfer-fa2"
    assert backend(off, log, "auto", "r") == "auto"  # a 16-bit cache is priced alike
    assert backend("vllm serve m", log, "fp8", "r") == "auto"
    assert backend(off, log.replace("FLASHINFER", "FLASH_ATTN"), "fp8", "r") == "auto"
    with pytest.raises(UserError, match="^r: --attention-config.use_trtllm_attention maybe: not 0, 1, false or true$"):
        backend("vllm serve m --attention-config.use_trtllm_attention=maybe", log, "fp8", "r")


def test_the_servers_steps_split_into_decode_and_admission_time() -> None:
    """Seconds of 16 running requests with decode steps of 10 ms and 0-3 admissions each costing 40 ms more, the
    step counts jittered by up to 2 %: the split recovers both within 6 %. A warm-up (the first seconds, slow steps,
    trimmed), a stalled second (20 steps in it, where a per-second ratio would count 50 ms a step) and a second with
    requests waiting (its relation broken, left out) do not move it past that (without the waiting filter the
    admission reads 159 ms, without the trimming 65, as a per-second ratio 24); too few seconds, or none admitting
    a request, give none."""
    import numpy as np

    head = ("relative_time_sec,num_requests_running,num_requests_waiting,generation_tokens_total,"
            "request_success_total\n")
    jitter = np.random.default_rng(0).uniform(-0.02, 0.02, 200)
    lines, tokens, done = [], 0.0, 0
    for i in range(200):
        admitted = i % 4
        steps = (1000 - 40 * admitted) / 10 * (1 + jitter[i])
        if i < 10:  # warm-up: slow steps
            steps /= 3
        if i == 100:  # a stall
            steps, admitted = 20, 0
        lines.append(f"{i},16,{5 if i == 150 else 0},{tokens:.3f},{done}\n")
        tokens += 16 * (steps * 6 if i == 149 else steps)  # the second ending in the waiting sample: broken
        done += admitted
    split = _script().step_split(head + "".join(lines))
    assert split["decode_ms"] == pytest.approx(10, rel=0.06) and split["admit_ms"] == pytest.approx(50, rel=0.06)
    assert _script().step_split(head + "".join(lines[:15])) is None
    idle = head + "".join(f"{i},16,0,{1600 * i},0\n" for i in range(60))
    assert _script().step_split(idle) is None


def test_real_ttft_splits_into_uncached_and_prompt_token_costs() -> None:
    """TTFT = 80 ms + 30 ms per thousand uncached + 3 ms per thousand prompt tokens, recovered from the
    client CSV's columns; too few requests without a prefill give None."""
    lines = ["ttft_ms,input_num_tokens,approx_cached_percent"]
    for k in range(60):
        n, cached = 500 + 97 * k, (100.0 if k % 2 else 50.0 - k % 7)
        lines.append(f"{80 + 30 * n * (1 - cached / 100) / 1e3 + 3 * n / 1e3},{n},{cached}")
    f = _script().ttft_slopes("\n".join(lines))
    assert (f["a_ms"], f["per_1k_uncached_ms"], f["per_1k_prompt_ms"]) == (80.0, 30.0, 3.0)
    assert (f["no_prefill_requests"], f["no_prefill_a_ms"], f["no_prefill_per_1k_prompt_ms"]) == (30, 80.0, 3.0)
    assert _script().ttft_slopes("\n".join(lines[:25])) is None
    assert _script().ttft_slopes("\n".join(lines + ["nan,100,0", "x,1,2"])) == f  # unreadable rows left out


def test_tpot_splits_into_a_part_that_shrinks_with_tp_and_one_that_does_not() -> None:
    script = _script()
    rows = [{"clients": 16, "complete": True, "tp": tp, "real_mean_s": {"tpot": (8 + 10 / tp) / 1e3},
             "sim_mean_s": {"tpot": (4 + 10 / tp) / 1e3}} for tp in (1, 2, 4, 8)]
    rows.append({"clients": 16, "complete": False, "tp": 2, "real_mean_s": {"tpot": 1.0}, "sim_mean_s": {"tpot": 1.0}})
    assert script.tp_fit(rows) == {"real": [8.0, 10.0], "sim": [4.0, 10.0]}
    assert script.tp_fit(rows[:1]) is None


def test_kv_in_use_averages_the_samples_with_requests_running() -> None:
    """The idle samples (nothing running) and malformed ones do not count; none at all is None."""
    metrics = ("num_requests_running,kv_cache_usage_pct\n0,0.00\n16,10.00\n16,30.00\nx,5\n16,250\n")
    assert _script().kv_in_use(metrics, 1_000_000) == pytest.approx(200_000)
    assert _script().kv_in_use("num_requests_running,kv_cache_usage_pct\n0,0\n", 10) is None


def test_tpot_against_kv_in_use_fits_runs_whose_caches_agree() -> None:
    """a + b·k per TP over complete runs whose simulated and server hit rates are within 5 points."""
    def run(tp: int, k: float, complete: bool = True, sim_hit: float = 0.9) -> dict:
        return {"tp": tp, "complete": complete, "server_kv_tokens": k * 1e3, "sim_hit": sim_hit, "measured_hit": 0.88,
                "real_mean_s": {"tpot": (15 + 0.09 * k) / 1e3}, "sim_mean_s": {"tpot": (12 + 0.015 * k) / 1e3}}
    rows = [run(1, k) for k in (50, 100, 200, 400)] + [run(1, 700, sim_hit=0.6), run(1, 800, complete=False)]
    rows += [run(8, k) for k in (60, 110)]  # two runs: no fit
    assert _script().kv_fit(rows) == {1: {"real": [15.0, 0.09], "sim": [12.0, 0.015]}}


def _started(name: str, at: str, attempt: str = " (attempt 1/3)") -> str:
    """sweep.log's lines for an experiment's start, as the sweep script writes them."""
    return f"Running experiment: {name}{attempt}\n  TP=2, BS=16, Offload=off\n  Started at Wed Feb  4 {at} UTC 2026\n"


def _finished(name: str, at: str) -> str:
    return f"Experiment {name} finished at Wed Feb  4 {at} UTC 2026\n"


SWEEP_LOG = "".join([
    "Starting sweep experiment at Wed Feb  4 15:00:00 UTC 2026\n", _started("tp2_bs16_offloadoff", "16:00:01", ""),
    "Starting sweep experiment at Wed Feb  4 16:08:32 UTC 2026\n", _started("tp2_bs16_offloadon", "17:00:00"),
    _finished("tp2_bs16_offloadon", "17:22:16"), _started("tp2_bs16_offloadoff", "17:22:16"),
    _finished("tp2_bs16_offloadoff", "17:54:37"),
    _started("tp2_bs32_offloadoff", "18:17:53"), _started("tp2_bs32_offloadoff", "18:18:04"),  # two sweeps at once
    _finished("tp2_bs32_offloadoff", "18:25:55"), _finished("tp2_bs32_offloadoff", "18:26:10"),
    _started("tp2_bs64_offloadoff", "18:26:10"), _finished("tp2_bs64_offloadoff", "18:40:00")])


def test_a_run_that_overlapped_another_experiment_is_found_and_a_restart_is_not() -> None:
    """tp2_bs16 was started by a sweep that was stopped, then run again alone (from the moment the
    last experiment finished); tp2_bs32 ran twice at once; tp2_bs64 began as tp2_bs32 ended."""
    assert _script().concurrent_runs(SWEEP_LOG) == {"tp2_bs32_offloadoff"}
    assert _script().concurrent_runs(SWEEP_LOG.replace("18:40:00", "18:26:10").replace(
        "Started at Wed Feb  4 18:26:10", "Started at Wed Feb  4 18:20:00")) == {"tp2_bs32_offloadoff", "tp2_bs64_offloadoff"}
