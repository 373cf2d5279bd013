"""`llumverify report RESULTS_DIR`: write reports/NAME/index.md and its plots from a sweep's
results, or from a goodput search's goodput.json."""

from __future__ import annotations

from pathlib import Path

import click

from llumverify.cli.command import Command
from llumverify.errors import UserError
from llumverify.files.outdir import PARTIAL


@click.command(cls=Command)
@click.argument("results_dir", type=click.Path(path_type=Path))
@click.option("--name", default=None, help="Report name (default: the experiment's name).")
@click.option("--reports-dir", type=click.Path(path_type=Path), default=Path("reports"), show_default=True,
              help="Folder that holds one sub-folder per report.")
def report(results_dir: Path, name: str | None, reports_dir: Path) -> None:
    """Plot and tabulate RESULTS_DIR/results.json (or goodput.json) into REPORTS_DIR/NAME/index.md
    (byte-reproducible)."""
    if (results_dir / PARTIAL).exists():
        raise UserError(f"{results_dir}: unfinished ({PARTIAL} is there: its writer was stopped, or is still at "
                        "work); run that command again, then report")
    if (results_dir / "goodput.json").is_file() and not (results_dir / "results.json").exists():
        from llumverify.study.goodput_report import write_goodput_report

        index = write_goodput_report(results_dir, reports_dir, name)
    else:
        from llumverify.study.report import write_report  # matplotlib: only when a report is written

        index = write_report(results_dir, name=name, reports_dir=reports_dir)
    click.echo(f"wrote {index}")
