"""benchmarks/public_runs.py on an LLMServingSim-shaped folder built from the shared RTX 4090 run:
it finds the run, prices it from first principles and from its own profile, and writes its table."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import benchmark_script, validation_dir

ROOT = Path(__file__).resolve().parent.parent
LSS = validation_dir() / "llmservingsim"
RUN, PROFILE = LSS / "runs" / "RTX4090-Llama-3.1-8B", LSS / "profiles" / "RTX4090" / "Llama-3.1-8B"


def _script():
    return benchmark_script("public_runs")


@pytest.mark.slow  # over 1.5 s (validate writes its plots)
@pytest.mark.skipif(not RUN.is_dir(), reason=f"no shared validation data at {LSS} (set LLUMVERIFY_VALIDATION)")
def test_public_runs_prices_each_run_from_both_sources_and_writes_its_table(tmp_path, capsys):
    run = tmp_path / "lss" / "bench" / "examples" / "RTX4090" / "Llama-3.1-8B" / "vllm"
    run.mkdir(parents=True)
    for name in ("meta.json", "requests.jsonl"):
        shutil.copy2(RUN / name, run / name)
    shutil.copytree(PROFILE, tmp_path / "lss" / "profiler" / "perf" / "RTX4090" / "meta-llama" / "Llama-3.1-8B" / "bf16")
    assert _script().main([str(tmp_path / "lss"), "--out", str(tmp_path / "out")]) == 0
    rows = json.loads((tmp_path / "out" / "results.json").read_text())
    assert [r["source"] for r in rows] == ["first principles", "profile"]
    assert all(r["run"] == "RTX4090/Llama-3.1-8B" and r["tp"] == 1 for r in rows)
    assert "LSS_DIR/profiler/perf/RTX4090" in rows[1]["step_cost"] and str(tmp_path) not in json.dumps(rows)
    for r in rows:  # the shared run's known errors (reports/validation section 1-2): well inside the bars
        assert all(r["within_bars"].values()) and abs(r["errors"]["e2e_mean"]) < 0.10, r
    assert "Within every bar (E2E and TPOT 10 %, TTFT 20 %, mean and P90): 2 of 2." in capsys.readouterr().out
    assert _script().main([str(tmp_path / "nothing")]) == 2
    assert "no bench/examples" in capsys.readouterr().err


def test_the_peer_table_reads_llmservingsims_own_summary(tmp_path):
    """LLMServingSim's summary.txt beside a run gives its simulator's signed errors (its Diff% column);
    a summary without the rows is one line naming the file; no summary, no peer row."""
    script = _script()
    run = tmp_path / "RTX4090" / "Llama-3.1-8B" / "vllm"
    run.mkdir(parents=True)
    assert script.peer(run) is None and script.peer_table([run]) == ""
    (run.parent / "validation").mkdir()
    lines = [f"{name} {q}   100.0   101.0   {d}" for name, d in (("TTFT", "+0.6%"), ("TPOT", "-1.0%"), ("Latency", "+2.5%"))
             for q in ("Mean", "Median", "P90")]
    (run.parent / "validation" / "summary.txt").write_text("Metric vLLM Sim Diff%\n" + "\n".join(lines) + "\n")
    assert script.peer(run) == pytest.approx({"ttft_mean": 0.006, "ttft_p90": 0.006, "tpot_mean": -0.01,
                                              "tpot_p90": -0.01, "e2e_mean": 0.025, "e2e_p90": 0.025})
    row = next(line for line in script.peer_table([run]).splitlines() if "RTX4090/Llama-3.1-8B" in line)
    assert [c.strip() for c in row.split("|")[2:-1]] == ["+0.6 %", "+0.6 %", "-1.0 %", "-1.0 %", "+2.5 %", "+2.5 %"]
    (run.parent / "validation" / "summary.txt").write_text("Metric vLLM Sim Diff%\nTTFT Mean 1 2 +3%\n")
    with pytest.raises(script.UserError, match="summary.txt: no Diff% column"):
        script.peer(run)
