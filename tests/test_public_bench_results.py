"""benchmarks/public_bench_results.py: it finds the four result files in the order the benchmark ran
them, marks only the first as met by a cold prefix cache, and scores a validation.json's errors."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import benchmark_script

from llumverify.errors import UserError


def _script():
    return benchmark_script("public_bench_results")


def test_the_runs_are_taken_in_the_order_they_ran_and_scored_signed(tmp_path: Path) -> None:
    script = _script()
    folder = tmp_path / script.FOLDER
    folder.mkdir(parents=True)
    with pytest.raises(UserError, match="expected the results at 01, 04, 16, inf req/s, found none"):
        script.files(tmp_path)
    for q in ("inf", "16", "01", "04"):
        (folder / f"serving_x_tp8_pp1_sharegpt_qps_{q}.json").write_text("{}")
    assert [q for q, _ in script.files(tmp_path)] == ["01", "04", "16", "inf"]
    doc = {m: {"real_mean_s": 2.0, "sim_mean_s": 1.5, "real_p90_s": 4.0, "sim_p90_s": 4.2} for m in ("ttft", "tpot", "e2e")}
    doc.update(step_cost={"source": "first principles"}, client_ms_added=7.5, client_us_per_prompt_token_added=2.25)
    first, later = script.row("01", doc), script.row("04", doc)
    assert (first["client_ms_added"], first["client_us_per_prompt_token_added"]) == (7.5, 2.25)
    assert first["cold_prefix_cache"] and not later["cold_prefix_cache"]
    assert first["errors"]["tpot_mean"] == pytest.approx(-0.25) and first["errors"]["e2e_p90"] == pytest.approx(0.05)
    assert not first["within_bars"]["tpot_mean"] and first["within_bars"]["e2e_p90"]
    assert "warm (not comparable)" in script.table([first, later])
