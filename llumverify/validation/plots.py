"""Plots of a validation: real vs simulated CDFs, per-request scatter, running/waiting over time."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from llumverify.validation.replay import METRICS, RealRun, occupancy


def plot_run(out: Path, run: RealRun, sim: dict[str, np.ndarray]) -> list[Path]:
    """Write cdf.png, scatter.png and occupancy.png into `out` (byte-stable: no dates in metadata)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.style
    from matplotlib.figure import Figure

    paths = []
    with matplotlib.style.context("default"):
        fig = Figure(figsize=(12, 3.6))
        for ax, m in zip(fig.subplots(1, 3), METRICS):
            for data, label in ((run.real[m], "real vLLM"), (sim[m], "simulated")):
                x = np.sort(data[~np.isnan(data)])
                ax.plot(x, np.arange(1, len(x) + 1) / len(x), label=label)
            ax.set_xlabel(f"{m.upper()} (s)")
            ax.set_ylabel("CDF")
            ax.legend()
        fig.tight_layout()
        paths.append(_save(fig, out / "cdf.png"))

        fig = Figure(figsize=(12, 3.6))
        for ax, m in zip(fig.subplots(1, 3), METRICS):
            ok = ~np.isnan(run.real[m]) & ~np.isnan(sim[m])
            ax.scatter(run.real[m][ok], sim[m][ok], s=6)
            hi = float(max(run.real[m][ok].max(), sim[m][ok].max()))
            ax.plot([0, hi], [0, hi], color="grey", linewidth=0.8)
            ax.set_xlabel(f"real {m.upper()} (s)")
            ax.set_ylabel(f"simulated {m.upper()} (s)")
        fig.tight_layout()
        paths.append(_save(fig, out / "scatter.png"))

        if run.series.get("t"):
            t = np.array(run.series["t"])
            running, waiting = occupancy(sim, t)
            fig = Figure(figsize=(8, 3.6))
            ax = fig.subplots()
            ax.plot(t, run.series["running"], label="running (real)")
            ax.plot(t, running, label="running (sim)", linestyle="--")
            ax.plot(t, run.series["waiting"], label="waiting (real)")
            ax.plot(t, waiting, label="waiting (sim)", linestyle="--")
            ax.set_xlabel("time since the first arrival (s)")
            ax.set_ylabel("requests")
            ax.legend()
            fig.tight_layout()
            paths.append(_save(fig, out / "occupancy.png"))
    return paths


def _save(fig, path: Path) -> Path:
    tmp = path.with_name(path.name + ".tmp.png")
    fig.savefig(tmp, dpi=90, metadata={"Software": None})
    tmp.replace(path)
    return path
