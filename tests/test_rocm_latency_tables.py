"""benchmarks/rocm_latency_tables.py's reading of AMD's latency tables: seconds or milliseconds, the 405B
label over a 70B checkpoint, and the latency command's engine, KV cache and switches."""

from __future__ import annotations

import pytest
from conftest import benchmark_script

from llumverify.sim.catalog import get_model
from llumverify.sim.checkpoint_names import split_format

DOC = """## Latency Measurements

| Model | Precision | TP Size | Batch Size | Input | Output | MI300X Latency (ms) |
|-------|-----------|----------|------------|--------|---------|-------------------|
| Llama 3.1 70B (amd/Llama-3.1-70B-Instruct-FP8-KV) | FP8 | 8 | 1 | 128 | 2048 | 19088.59 |
| | | | 2 | 128 | 2048 | 19610.46 |
| Llama 3.1 405B (amd/Llama-3.1-70B-Instruct-FP8-KV) | FP8 | 8 | 1 | 128 | 2048 | 45294 |

*TP stands for Tensor Parallelism.*

### Latency Benchmark

```bash
export VLLM_USE_TRITON_FLASH_ATTN=0
export VLLM_V1_USE_PREFILL_DECODE_ATTENTION=1
python3 /app/vllm/benchmarks/benchmark_latency.py --batch-size $BS
```
"""


def _script():
    return benchmark_script("rocm_latency_tables")


def test_a_latency_table_is_read_as_amd_meant_it() -> None:
    script = _script()
    rows = script.table_rows(DOC)
    assert [r[:4] for r in rows] == [("amd/Llama-3.1-70B-Instruct-FP8-KV", 1, 128, 2048),
                                     ("amd/Llama-3.1-70B-Instruct-FP8-KV", 2, 128, 2048),
                                     ("amd/Llama-3.1-405B-Instruct-FP8-KV", 1, 128, 2048)]  # the label's 405B
    assert [r[4] for r in rows] == pytest.approx([19.08859, 19.61046, 45.294])  # ms to s
    assert script.latency_command(DOC) == script.Command("V0", "auto", "VLLM_V1_USE_PREFILL_DECODE_ATTENTION=1")
    v1 = DOC.replace("python3", "python3 --kv-cache-dtype fp8 ") + "\n- V1 on by default (use VLLM_USE_V1=0 to override)\n"
    assert script.latency_command(v1) == script.Command("V1", "fp8", "VLLM_V1_USE_PREFILL_DECODE_ATTENTION=1")
    assert script.latency_command(v1.replace("export VLLM_V1_USE", "export VLLM_USE_V1=0\nexport VLLM_V1_USE")).engine == "V0"
    assert script.table_rows("no table here") == []


def test_amd_s_fp8_kv_checkpoints_are_fp8_catalog_models() -> None:
    assert split_format("amd/Llama-3.1-405B-Instruct-FP8-KV") == ("amd/Llama-3.1-405B-Instruct", "fp8")
    assert get_model("amd/Llama-3.1-405B-Instruct-FP8-KV").name.startswith("Llama-3.1-405B")
