"""What the fitted NVLink terms change on the held-out argonne TP rows, and whether tp_step_ns absorbs it.

    python benchmarks/tp_comm_effect.py ARGONNE_VLLM_CSV   # All_results.csv's header and vLLM rows (docs/engines.md)

Section 4's calibration (transfer_fit.held_out_table: engine terms on the one-GPU A100-40GB rows, the
per-step TP overhead tp_step_ns on its dense TP rows), NVIDIA rows only, three ways:
1. the session-11 NVLink terms (NCCL alpha 10 us, bw_eff 0.8, no custom all-reduce), tp_step_ns refitted;
2. the catalog's terms (benchmarks/nccl_fit.py), tp_step_ns refitted (what the report shows);
3. the catalog's terms with tp_step_ns kept at 1.'s value (the change itself, nothing absorbing it);
4. a rejected alternative: vLLM 2024's two custom kernels priced apart (one stage at TP 2, and at TP 4 / 8
   below 512 / 256 KiB; two stages above: csrc/custom_all_reduce.cuh), each alpha + bytes fitted by least
   squares on vllm-project/vllm PR #24532's H100 TP4 table (ca_1stage / ca_2stage, 0.5-4 MiB; a one-stage
   kernel reads every peer's buffer: (tp − 1)·S bytes), tp_step_ns refitted.
Prints each TP group's median APE and median signed error. About a minute.
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import numpy as np

from llumverify.settings.config import HardwareConfig
from llumverify.sim import catalog, collectives
from llumverify.sim.roofline import load_efficiency
from llumverify.validation.static_batch import static_rows
from llumverify.validation.transfer_fit import LOGO_GPUS, held_out_table

PRIOR = {"alpha_ns": 10_000.0, "bw_eff": 0.8, "custom_alpha_ns": 0.0, "custom_max_bytes": 0}
# vllm-project/vllm PR #24532 (H100, TP 4, bf16 (T, 8192) buffers): µs per all-reduce of each custom kernel
PR_MIB = np.array([0.5, 1, 1.5, 2, 3, 4])
PR_US = {"one": np.array([10, 14, 19, 23, 30, 38.]), "two": np.array([17, 18, 25, 26, 35, 42.])}


def _two_kernels() -> None:
    """Replace collectives.allreduce_ns by variant 4 (restored by the caller)."""
    link, nccl = catalog.get_interconnect("NVLink4"), collectives.allreduce_ns
    fits = {}
    for kind, wire in (("one", 3 * PR_MIB), ("two", 1.5 * PR_MIB)):
        a = np.vstack([np.ones_like(wire), wire * 2**20 / link.bw * 1e6]).T
        alpha_us, inv_eff = np.linalg.lstsq(a, PR_US[kind], rcond=None)[0]
        fits[kind] = (alpha_us * 1000, 1 / inv_eff)
    print("4. two custom kernels: " + ", ".join(f"{k}-stage alpha {a / 1000:.1f} us, bw_eff {e:.2f}"
                                                for k, (a, e) in fits.items()))

    def allreduce(nbytes: float, tp: int, link: catalog.Interconnect) -> float:
        if not (tp in collectives.CUSTOM_AR_TP and nbytes < link.custom_max_bytes):
            return nccl(nbytes, tp, link)
        if tp == 2 or (tp <= 4 and nbytes < 512 * 1024) or (tp <= 8 and nbytes < 256 * 1024):
            alpha, eff = fits["one"]
            return alpha + (tp - 1) * nbytes / (link.bw * eff) * 1e9
        alpha, eff = fits["two"]
        return alpha + collectives.allreduce_wire_bytes(nbytes, tp) / (link.bw * eff) * 1e9

    collectives.allreduce_ns = allreduce


def _run(label: str, rows, tp_step_ns: int | None = None) -> int:
    _, _, eff, _, calib_tp, table = held_out_table(rows, load_efficiency(), tp_step_ns)
    print(f"{label}: tp_step_ns {eff.tp_step_ns:,} (A100-40GB TP calibration median APE {100 * calib_tp:.1f} %)")
    for key, v in table.items():
        if "TP1" not in key:
            print(f"  {key:<36} {v['rows']:>4} rows  median APE {100 * v['median_ape']:4.1f} %  "
                  f"signed {100 * v['median_signed']:+5.1f} %")
    return eff.tp_step_ns


def main(csv_path: Path) -> None:
    rows, _ = static_rows(csv_path, HardwareConfig(), tp=None)
    rows = [r for r in rows if r[0].framework == "vLLM" and r[1] in LOGO_GPUS]
    shipped = catalog._interconnects
    prior = {k: dataclasses.replace(v, **PRIOR) if v.name in ("NVLink3", "NVLink4") else v for k, v in shipped().items()}
    catalog._interconnects = lambda: prior
    try:
        old_step = _run("1. session-11 NVLink terms", rows)
    finally:
        catalog._interconnects = shipped
    _run("2. catalog NVLink terms", rows)
    _run("3. catalog NVLink terms, tp_step_ns as in 1.", rows, old_step)
    nccl = collectives.allreduce_ns
    _two_kernels()
    try:
        _run("4. two custom kernels (PR #24532 fit)", rows)
    finally:
        collectives.allreduce_ns = nccl


if __name__ == "__main__":
    if len(sys.argv) != 2 or not Path(sys.argv[1]).is_file():
        sys.exit("usage: python benchmarks/tp_comm_effect.py ARGONNE_VLLM_CSV (a file)")
    main(Path(sys.argv[1]))
