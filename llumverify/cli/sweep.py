"""`llumverify sweep EXPERIMENT.toml`: run an experiment's grid in parallel and write its results.

Every finished run is saved in the results folder as it comes; the same command on a folder
holding a partial sweep of the same experiment runs only what is missing (llumverify/study/checkpoint.py).
"""

from __future__ import annotations

from pathlib import Path

import click

from llumverify.cli.command import Command
from llumverify.study.sweep import RUNNERS, SweepFailed, run_experiment


class RunFailed(click.ClickException):
    """A run of the sweep failed; an audit failure exits 3 as in `simulate`, anything else 1."""

    def __init__(self, message: str, audit: bool) -> None:
        super().__init__(message)
        self.exit_code = 3 if audit else 1


def run_and_report(experiment: Path, out: Path | None, *, force: bool, jobs: int | None = None,
                   runner: str = "local", ray_address: str | None = None, progress: bool = True) -> None:
    """run_experiment, then say what it wrote; a failed run is one line (Ctrl-C: cli.main and the checkpoint)."""
    try:
        folder = run_experiment(experiment, out, jobs=jobs, runner=runner, ray_address=ray_address,
                                progress=progress, force=force)
    except SweepFailed as exc:
        raise RunFailed(str(exc), exc.audit) from None
    click.echo(f"wrote {folder / 'results.csv'}, {folder / 'results.json'} and {folder / 'timing.json'}")


@click.command(cls=Command)
@click.argument("experiment", type=click.Path(path_type=Path))
@click.option("--out", type=click.Path(path_type=Path), default=None,
              help="Results folder (default results/<experiment name>): new or empty, or a partial sweep "
                   "of this experiment to resume.")
@click.option("--force", is_flag=True,
              help="Use a non-empty --out anyway: discard any partial sweep there, overwrite its result files.")
@click.option("--jobs", type=int, default=None, help="Parallel processes for --runner local (default: CPU count).")
@click.option("--runner", type=click.Choice(RUNNERS), default="local", show_default=True,
              help="Where runs execute: local processes or Ray tasks.")
@click.option("--ray-address", default=None, help="Ray cluster address for --runner ray (default: a local instance).")
@click.option("--quiet", is_flag=True, help="No progress bar.")
def sweep(experiment: Path, out: Path | None, force: bool, jobs: int | None, runner: str, ray_address: str | None,
          quiet: bool) -> None:
    """Run every grid point x policy x seed of EXPERIMENT and write results.csv / results.json."""
    run_and_report(experiment, out, force=force, jobs=jobs, runner=runner, ray_address=ray_address,
                   progress=not quiet)
