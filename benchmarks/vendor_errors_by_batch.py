"""Signed error (simulated / real - 1) of an AMD GPU's static batches by model, TP degree and batch size,
with the terms of its own calibration in the committed report (reports/validation/public-static-batch).

Shows where the vendor fit's errors sit (docs/engines.md: MI300X TP2 and Llama-3-70B):
`python benchmarks/vendor_errors_by_batch.py argonne_vllm.csv [GPU]` (GPU: MI300X by default, or MI250).
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import numpy as np

from llumverify.settings.config import HardwareConfig
from llumverify.sim.roofline import load_efficiency
from llumverify.validation import transfer_fit as tf
from llumverify.validation.rocm_attention import runs_v1
from llumverify.validation.static_batch import static_rows

REPORT = Path(__file__).resolve().parent.parent / "reports" / "validation" / "public-static-batch" / "validation.json"


def main(csv: str, gpu: str = "MI300X") -> None:
    calib = json.loads(REPORT.read_text())[gpu]["calibration"]
    eff = dataclasses.replace(load_efficiency(), kv_per_query_head=True,
                              **{k: calib[k] for k in tf.TERMS if k in calib})
    rows = [r for r in static_rows(Path(csv), HardwareConfig(), tp=None)[0] if r[1] == gpu]
    signed = tf.simulate(rows, eff) / tf._real(rows) - 1
    cells: dict[tuple[str, int, int], list[float]] = {}
    kernel: dict[tuple[int, bool], list[float]] = {}
    for (r, _, m), e in zip(rows, signed):
        cells.setdefault((m, r.gpus, r.batch), []).append(float(e))
        if r.prompt + r.output >= 1024:  # contexts over one partition: V1 or V2 by the batch
            kernel.setdefault((r.gpus, runs_v1(m, r.gpus, r.batch, r.prompt + r.output)), []).append(float(e))
    print(f"{gpu}: median signed error % over L = 128..2048 (min..max), terms {calib['rows']}")
    for (m, tp, b), es in sorted(cells.items()):
        print(f"{m:16} TP{tp} B{b:<4} {100 * np.median(es):+6.1f}  ({100 * min(es):+.0f}..{100 * max(es):+.0f})")
    print("rows of L >= 512 by the paged-attention kernel vLLM runs (rocm_attention.runs_v1): median signed %, rows")
    for (tp, v1), es in sorted(kernel.items()):
        print(f"TP{tp} {'V1' if v1 else 'V2'} {100 * np.median(es):+6.1f} {len(es)}")


if __name__ == "__main__":
    main(*sys.argv[1:3])
