"""Fit the NVLink NCCL terms on H100 and check them on A100 (issue #28; the numbers in gpus.toml's sources).

    python benchmarks/nccl_fit.py VIDUR_CHECKOUT   # a clone of microsoft/vidur (MIT), e.g. the
                                                   # `fetch` tool's /work/.mirror/microsoft+vidur/repo

Calibration: H100 DGX (NVLink4), data/profiling/network/h100_dgx/all_reduce.csv; held out: A100 DGX
(NVLink3), a100_dgx/all_reduce.csv, with the transfer rule (the same fixed time and the same share
of the datasheet bandwidth). Both read and fitted by llumverify/validation/collective_fit.py, on
buffers of 8 MiB and more (vLLM's NCCL range on NVLink). Prints the median signed error
(simulated / measured − 1) per TP degree for the prior terms, the fitted ones and the catalog's,
and A100's own fit with its error on H100 (the rule the other way). Reads the files with `git show HEAD:...`
when the checkout has no work tree. A second.
"""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

from llumverify.sim.catalog import get_gpu
from llumverify.validation.collective_fit import NCCL_MIN_BYTES, by_tp, fit_nccl, nccl_rows, read_vidur

FIT, HELD_OUT = "H100", "A100-80GB"
FILES = {"H100": "data/profiling/network/h100_dgx/all_reduce.csv",
         "A100-80GB": "data/profiling/network/a100_dgx/all_reduce.csv"}
PRIOR = {"alpha_ns": 10_000.0, "bw_eff": 0.8, "custom_max_bytes": 0}  # the terms before this fit (session 11)


def _text(repo: Path, rel: str) -> str:
    path = repo / rel
    if path.is_file():
        return path.read_text()
    return subprocess.run(["git", "-C", str(repo), "show", f"HEAD:{rel}"], check=True, capture_output=True,
                          text=True).stdout


def _line(label: str, errs: dict[int, float]) -> str:
    return f"  {label:<34} " + ", ".join(f"TP{tp} {e:+.1%}" for tp, e in errs.items())


def main(repo: Path) -> None:
    rows = {g: nccl_rows(read_vidur(_text(repo, f), f)) for g, f in FILES.items()}
    fitted, loss = fit_nccl(rows[FIT], get_gpu(FIT).link)
    print(f"fit on {FIT} ({fitted.name}), {len(rows[FIT])} all-reduces of >= {NCCL_MIN_BYTES:,} bytes: "
          f"alpha_ns {fitted.alpha_ns:,.0f}, bw_eff {fitted.bw_eff} (median |log error| {loss:.3f})")
    for g, timings in rows.items():
        link = get_gpu(g).link
        role = "calibration" if g == FIT else "held out, transfer rule"
        print(f"{g} over {link.name} ({role}), {len(timings)} all-reduces, median signed error:")
        print(_line("prior (10 us, bw_eff 0.8)", by_tp(timings, dataclasses.replace(link, **PRIOR))))
        print(_line(f"{FIT}-fitted terms", by_tp(timings, dataclasses.replace(
            link, alpha_ns=fitted.alpha_ns, bw_eff=fitted.bw_eff))))
        print(_line("catalog (sim/catalog/gpus.toml)", by_tp(timings, link)))
    own, own_loss = fit_nccl(rows[HELD_OUT], get_gpu(HELD_OUT).link)
    print(f"{HELD_OUT}'s own fit: alpha_ns {own.alpha_ns:,.0f}, bw_eff {own.bw_eff} (median |log error| "
          f"{own_loss:.3f}); on {FIT} (the rule the other way):")
    print(_line(f"{HELD_OUT}-fitted terms", by_tp(rows[FIT], dataclasses.replace(
        get_gpu(FIT).link, alpha_ns=own.alpha_ns, bw_eff=own.bw_eff))))


if __name__ == "__main__":
    if len(sys.argv) != 2 or not Path(sys.argv[1]).is_dir():
        sys.exit("usage: python benchmarks/nccl_fit.py VIDUR_CHECKOUT (a folder)")
    main(Path(sys.argv[1]))
