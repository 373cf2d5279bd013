"""`llumverify sweep EXPERIMENT.toml`: run an experiment's grid in parallel and write its results."""

from __future__ import annotations

from pathlib import Path

import click

from llumverify.sweep import ENGINES, SweepFailed, run_experiment


class RunFailed(click.ClickException):
    """A run of the sweep failed; an audit failure exits 3 as in `simulate`, anything else 1."""

    def __init__(self, message: str, audit: bool) -> None:
        super().__init__(message)
        self.exit_code = 3 if audit else 1


@click.command()
@click.argument("experiment", type=click.Path(path_type=Path))
@click.option("--out", type=click.Path(path_type=Path), default=None,
              help="Results folder (default results/<experiment name>).")
@click.option("--jobs", type=int, default=None, help="Parallel processes for --engine local (default: CPU count).")
@click.option("--engine", type=click.Choice(ENGINES), default="local", show_default=True,
              help="Where runs execute: local processes or Ray tasks.")
@click.option("--ray-address", default=None, help="Ray cluster address for --engine ray (default: a local instance).")
@click.option("--quiet", is_flag=True, help="No progress bar.")
def sweep(experiment: Path, out: Path | None, jobs: int | None, engine: str, ray_address: str | None,
          quiet: bool) -> None:
    """Run every grid point x policy x seed of EXPERIMENT and write results.csv / results.json."""
    try:
        folder = run_experiment(experiment, out, jobs=jobs, engine=engine, ray_address=ray_address,
                                progress=not quiet)
    except SweepFailed as exc:
        raise RunFailed(str(exc), exc.audit) from None
    click.echo(f"wrote {folder / 'results.csv'}, {folder / 'results.json'} and {folder / 'timing.json'}")
