"""`llumverify migrate-bench`: migration stall vs sequence length (sim/microbench.py)."""

from __future__ import annotations

from pathlib import Path

import click
from tabulate import tabulate

from llumverify.cli.command import Command
from llumverify.files.outdir import OutputDir
from llumverify.protocol.variants import VARIANTS
from llumverify.sim.microbench import PAPER_MS, measure, plot


@click.command("migrate-bench", cls=Command)
@click.option("--out", type=click.Path(path_type=Path), default=None, help="Write DIR/migrate_bench.csv and .png.")
@click.option("--migration-variant", type=click.Choice(list(VARIANTS)), default="safe", show_default=True,
              help="Protocol variant the live migration runs.")
def migrate_bench(out: Path | None, migration_variant: str) -> None:
    """Stall vs sequence length: live migration, blocking copy, recompute (like the paper's Fig. 10)."""
    claim = click.get_current_context().with_resource(OutputDir(out, "--out", fresh=False)) if out is not None else None
    rows = measure(variant=migration_variant)
    table = [[r["tokens"], r["live_ms"], r["blocking_ms"], r["recompute_ms"]] for r in rows]
    click.echo(tabulate(table, headers=["tokens", "live ms", "blocking ms", "recompute ms"], floatfmt=".1f"))
    click.echo("paper (7B): " + "; ".join(
        f"{kind} " + ", ".join(f"{ms:,.0f} ms at {n}" for n, ms in points.items())
        for kind, points in PAPER_MS.items()))
    if claim is not None:
        lines = ["tokens,live_ms,blocking_ms,recompute_ms"] + [
            f"{r['tokens']},{r['live_ms']!r},{r['blocking_ms']!r},{r['recompute_ms']!r}" for r in rows]
        (claim.path / "migrate_bench.csv").write_text("\n".join(lines) + "\n")
        plot(rows, claim.path / "migrate_bench.png")
        claim.commit()
        click.echo(f"wrote {out / 'migrate_bench.csv'} and {out / 'migrate_bench.png'}")
