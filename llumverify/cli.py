"""The `llumverify` command: thin click wiring. Each sub-command lives in llumverify/commands/."""

from __future__ import annotations

import sys

import click

from llumverify.errors import UserError


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="llumverify")
def cli() -> None:
    """Is live migration of LLM requests safe (check), and when does it pay (simulate)?"""


def _register() -> None:
    from llumverify.commands import check, goodput, migrate_bench, report, simulate, sweep, validate

    for command in (simulate.simulate, check.check, sweep.sweep, report.report, migrate_bench.migrate_bench,
                    validate.validate, validate.calibrate, validate.validation_report, goodput.goodput):
        cli.add_command(command)


def main(argv: list[str] | None = None) -> None:
    """Entry point: bad input becomes one line on stderr and exit status 2, never a traceback."""
    _register()
    try:
        rv = cli.main(args=argv, prog_name="llumverify", standalone_mode=False)
    except UserError as exc:
        click.echo(f"llumverify: error: {exc}", err=True)
        sys.exit(2)
    except click.exceptions.Abort:
        click.echo("llumverify: aborted", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        click.echo(f"llumverify: error: {exc.format_message()}", err=True)
        sys.exit(exc.exit_code)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    sys.exit(rv if isinstance(rv, int) else 0)


if __name__ == "__main__":
    main()
