"""The interconnect's NCCL terms (alpha_ns, bw_eff) fitted on measured all-reduce timings (issue #28).

Measurements: microsoft/vidur (MIT) `data/profiling/network/<gpu>_dgx/all_reduce.csv`, NCCL
all-reduces of fp16 buffers within one DGX node. Reading, from Vidur's own code: `size` is BYTES
(vidur/profiling/collectives/collectives_wrapper.py reports `self._size * 2  # bytes` for a buffer
of `_size` fp16 elements; the sklearn execution-time predictor turns it into tokens as size /
embedding_dim / 2); the time is the median over three rounds of the median NCCL kernel duration
(kineto, kernels named "nccl*", eleven back-to-back calls) on rank 0 only (profiling/collectives/
main.py keeps gpu_id 0's result); rows with devices_per_node < num_workers span nodes and are left out.
Only buffers of at least NCCL_MIN_BYTES enter a fit: below it vLLM does not call NCCL on NVLink
(its custom all-reduce's max_size, sim/collectives.py), so those timings describe no vLLM step.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from llumverify.errors import UserError
from llumverify.sim.catalog import Interconnect
from llumverify.sim.collectives import allreduce_ns, allreduce_wire_bytes

NCCL_MIN_BYTES = 8 * 2**20  # vLLM's custom all-reduce max_size: larger all-reduces go to NCCL
ALPHAS = np.arange(0, 100_001, 500)  # ns
BW_EFFS = np.round(np.arange(0.30, 1.0001, 0.01), 2)
COLUMNS = ("rank", "num_workers", "devices_per_node", "size", "collective", "time_stats.all_reduce.median")


@dataclass(frozen=True)
class Timing:
    """One measured all-reduce: tp GPUs, an nbytes buffer, ns on the GPU."""

    tp: int
    nbytes: int
    ns: float


def read_vidur(text: str, label: str = "all_reduce.csv") -> list[Timing]:
    """The one-node NCCL all-reduces of a Vidur network profile (rank 0, `size` in bytes, ms -> ns)."""
    rows = list(csv.DictReader(io.StringIO(text)))
    missing = [c for c in COLUMNS if not rows or c not in rows[0]]
    if missing:
        raise UserError(f"{label}: not a Vidur all-reduce profile (no rows or no column {missing[0]!r})")
    try:
        out = [Timing(int(r["num_workers"]), int(r["size"]), float(r["time_stats.all_reduce.median"]) * 1e6)
               for r in rows if r["rank"] == "0" and r["collective"] == "all_reduce"
               and int(r["devices_per_node"]) >= int(r["num_workers"])]
    except ValueError as e:
        raise UserError(f"{label}: a malformed number ({e})") from None
    if not out:
        raise UserError(f"{label}: no one-node all-reduce rows on rank 0")
    return out


def nccl_rows(timings: Sequence[Timing]) -> list[Timing]:
    """The timings of buffers vLLM sends through NCCL on NVLink (at least NCCL_MIN_BYTES)."""
    return [t for t in timings if t.nbytes >= NCCL_MIN_BYTES]


def signed_errors(timings: Sequence[Timing], link: Interconnect) -> np.ndarray:
    """simulated / measured − 1 of each timing, the link's NCCL terms (no custom kernel)."""
    nccl = replace(link, custom_max_bytes=0)
    return np.array([allreduce_ns(t.nbytes, t.tp, nccl) / t.ns - 1 for t in timings])


def fit_nccl(timings: Sequence[Timing], link: Interconnect) -> tuple[Interconnect, float]:
    """(link with alpha_ns and bw_eff fitted, median |log(simulated / measured)|) on NCCL-sized timings
    of every TP degree at once: one fixed time and one share of the datasheet bandwidth."""
    rows = nccl_rows(timings)
    if not rows:
        raise UserError(f"fit failed: no all-reduce of at least {NCCL_MIN_BYTES:,} bytes to fit on")
    wire = np.array([allreduce_wire_bytes(t.nbytes, t.tp) for t in rows]) / link.bw * 1e9  # ns at bw_eff 1
    real = np.array([t.ns for t in rows])
    pred = ALPHAS[:, None, None] + wire[None, None, :] / BW_EFFS[None, :, None]
    loss = np.median(np.abs(np.log(pred / real)), axis=2)
    i, j = np.unravel_index(int(np.argmin(loss)), loss.shape)
    return replace(link, alpha_ns=float(ALPHAS[i]), bw_eff=float(BW_EFFS[j])), float(loss[i, j])


def by_tp(timings: Sequence[Timing], link: Interconnect) -> dict[int, float]:
    """Median signed error per TP degree."""
    errs = signed_errors(timings, link)
    return {tp: float(np.median(errs[[t.tp == tp for t in timings]])) for tp in sorted({t.tp for t in timings})}
