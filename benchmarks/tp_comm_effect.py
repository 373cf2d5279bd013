"""What the fitted NVLink terms change on the held-out argonne TP rows, and whether tp_step_ns absorbs it.

    python benchmarks/tp_comm_effect.py ARGONNE_VLLM_CSV   # All_results.csv's header and vLLM rows (docs/engines.md)

Section 4's calibration (transfer_fit.held_out_table: engine terms on the one-GPU A100-40GB rows, the
per-step TP overhead tp_step_ns on its dense TP rows), NVIDIA rows only, three ways:
1. the session-11 NVLink terms (NCCL alpha 10 us, bw_eff 0.8, no custom all-reduce), tp_step_ns refitted;
2. the catalog's terms (benchmarks/nccl_fit.py), tp_step_ns refitted (what the report shows);
3. the catalog's terms with tp_step_ns kept at 1.'s value (the change itself, nothing absorbing it).
Prints each TP group's median APE and median signed error. About 40 s.
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

from llumverify.settings.config import HardwareConfig
from llumverify.sim import catalog
from llumverify.sim.roofline import load_efficiency
from llumverify.validation.static_batch import static_rows
from llumverify.validation.transfer_fit import LOGO_GPUS, held_out_table

PRIOR = {"alpha_ns": 10_000.0, "bw_eff": 0.8, "custom_alpha_ns": 0.0, "custom_max_bytes": 0}


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


if __name__ == "__main__":
    if len(sys.argv) != 2 or not Path(sys.argv[1]).is_file():
        sys.exit("usage: python benchmarks/tp_comm_effect.py ARGONNE_VLLM_CSV (a file)")
    main(Path(sys.argv[1]))
