"""`llumverify goodput EXPERIMENT.toml`: the highest request rate meeting the SLO target, per GPU."""

from __future__ import annotations

from pathlib import Path

import click

from llumverify.cli.command import Command
from llumverify.cli.sweep import RunFailed
from llumverify.study.goodput import DEFAULT_TARGET, DEFAULT_TOL, run_goodput, short_runs, table
from llumverify.study.sweep import SweepFailed


@click.command(cls=Command)
@click.argument("experiment", type=click.Path(path_type=Path))
@click.option("--out", type=click.Path(path_type=Path), default=None,
              help="Output folder (default results/<experiment name>-goodput).")
@click.option("--target", type=float, default=DEFAULT_TARGET, show_default=True,
              help="SLO attainment a rate must reach (share of all requests meeting their SLO), in (0, 1).")
@click.option("--tol", type=float, default=DEFAULT_TOL, show_default=True,
              help="Relative tolerance: bisect until the failing rate is within (1 + tol) of the passing one.")
@click.option("--duration", type=float, default=None,
              help="Seconds of arrivals per run: each rate serves rate x S requests (at least the experiment's "
                   "requests), so a high rate is a sustained load, not one burst.")
@click.option("--jobs", type=int, default=None, help="Parallel processes (default: CPU count; 1 runs in-process).")
@click.option("--force", is_flag=True, help="Write into a non-empty --out folder (overwrites its goodput files).")
@click.option("--quiet", is_flag=True, help="No progress bar.")
def goodput(experiment: Path, out: Path | None, target: float, tol: float, duration: float | None,
            jobs: int | None, force: bool, quiet: bool) -> None:
    """Goodput of every policy x deployment of EXPERIMENT: the highest rate whose mean SLO attainment
    over the seeds is >= --target, per GPU, with a 95 % interval over per-seed goodputs."""
    try:
        folder, doc = run_goodput(experiment, out, target=target, tol=tol, jobs=jobs, force=force,
                                  progress=not quiet, duration_s=duration)
    except SweepFailed as exc:
        raise RunFailed(str(exc), exc.audit) from None
    click.echo(table(doc))
    short = short_runs(doc)
    if short:  # said, not silent: these runs were judged over fewer seconds of arrivals than --duration
        click.echo(f"note: {short} of {doc['runs']} runs replayed their trace whole (fewer requests than rate x "
                   f"--duration): at those rates it spans under {doc['duration_s']:g} s of arrivals")
    click.echo(f"{doc['runs']} runs in {doc['wall_s']:.1f} s; wrote {folder / 'goodput.json'}, "
               f"{folder / 'goodput.csv'} and {folder / 'attainment.png'}")
