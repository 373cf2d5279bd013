"""The Azure 2023 conversation trace, replayed on 16 instances under every policy."""

from __future__ import annotations

import pytest
from conftest import traces_dir

from llumverify.scheduler.policies import POLICIES
from llumverify.sim.run import simulate
from llumverify.sim.traces import read_trace

CONV = traces_dir() / "azure_llm_2023" / "AzureLLMInferenceTrace_conv.csv"


@pytest.mark.traces
@pytest.mark.slow
@pytest.mark.skipif(not CONV.is_file(), reason=f"trace not found at {CONV} (set LLUMVERIFY_TRACES)")
def test_azure_conv_every_request_accounted_for_and_least_loaded_beats_static_at_p99():
    specs = read_trace(CONV)
    assert len(specs) == 19_366
    summaries = {}
    for name in POLICIES:
        res = simulate(specs, name, keep_records=True)
        assert len(res.records) == 19_366
        assert all(r.status == "finished" or r.status.startswith("rejected:") for r in res.records)
        assert res.summary["finished"] + res.summary["rejected"] == 19_366
        summaries[name] = res.summary
    assert summaries["least-loaded"]["ttft_p99_s"] < summaries["round-robin"]["ttft_p99_s"]
