"""fp8 against 16-bit weights on H100, from first principles: static-batch throughput ratios.

    python benchmarks/fp8_speedup.py      # ~10 s

A plausibility check of sim/quantization.py, not a validation: vLLM's documentation (docs.vllm.ai,
features/quantization/fp8) states "up to a 1.6x improvement in throughput" for FP8 W8A8. Prints,
for Llama-3.1-8B (TP1) and Llama-3-70B (TP4) on H100, the time of B requests of L prompt and L
output tokens started together, 16-bit and fp8 weights (16-bit KV cache), and the ratio.
"""

from __future__ import annotations

from llumverify.sim.catalog import get_model
from llumverify.sim.quantization import with_formats
from llumverify.sim.roofline import kv_capacity_blocks, step_cost_first_principles
from llumverify.validation.static_batch import engine_for, simulate_batch

CASES = (("Llama-3.1-8B", 1), ("Llama-3-70B", 4))
BATCHES = ((16, 1024), (64, 1024), (256, 512))


def main() -> None:
    for name, tp in CASES:
        base = get_model(name)
        for batch, length in BATCHES:
            secs = [simulate_batch(0, batch, length, length, step_cost_first_principles(m, "H100", tp=tp),
                                   engine_for(kv_capacity_blocks(m, "H100", tp=tp)))
                    for m in (base, with_formats(base, "fp8", "auto"))]
            print(f"{name} TP{tp} B={batch} L={length}: 16-bit {secs[0]:.2f} s, fp8 {secs[1]:.2f} s, "
                  f"throughput x{secs[0] / secs[1]:.2f}")


if __name__ == "__main__":
    main()
