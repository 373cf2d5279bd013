"""The `llumverify` command: thin click wiring. Each sub-command lives in llumverify/cli/.

Sub-commands are imported only when one runs (LazyGroup): `llumverify --help` needs none of
Z3, NumPy, SimPy or matplotlib, so it starts in a fraction of a second.
"""

from __future__ import annotations

import errno
import importlib
import sys
from typing import NoReturn

import click

from llumverify.files import interrupt
from llumverify.errors import INTERNAL_ERROR_EXIT, UserError, brief, internal_error

# name -> (module, function, one-line help shown by `llumverify --help`)
COMMANDS: dict[str, tuple[str, str, str]] = {
    "simulate": ("simulate", "simulate", "Simulate a Llumnix-style cluster under each policy and compare them."),
    "check": ("check", "check", "Prove (unbounded) or refute (shortest trace) the migration handshake's properties."),
    "sweep": ("sweep", "sweep", "Run every grid point x policy x seed of an experiment file."),
    "report": ("report", "report", "Plot and tabulate a sweep's results into reports/NAME/index.md."),
    "goodput": ("goodput", "goodput", "Highest rate with SLO attainment >= target, per policy and deployment."),
    "migrate-bench": ("migrate_bench", "migrate_bench", "Stall vs sequence length: live migration, blocking copy, recompute."),
    "validate": ("validate", "validate", "Compare the simulator with a real vLLM run or static batches."),
    "calibrate": ("validate", "calibrate", "Fit a step-cost profile (TOML) and print the error per point."),
    "validation-report": ("validate", "validation_report", "Regenerate reports/validation/ from the shared measurements."),
}


class LazyGroup(click.Group):
    """A group whose commands are imported on first use; the listing comes from COMMANDS."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in COMMANDS:
            return None
        module, attr, _ = COMMANDS[name]
        return getattr(importlib.import_module(f"llumverify.cli.{module}"), attr)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        with formatter.section("Commands"):
            formatter.write_dl([(name, COMMANDS[name][2]) for name in self.list_commands(ctx)])


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="llumverify")
def cli() -> None:
    """Is live migration of LLM requests safe (check), and when does it pay (simulate)?"""


def main(argv: list[str] | None = None) -> None:
    """Entry point: bad input becomes one line on stderr and exit status 2, never a traceback.

    A bug is one line too (exit 70), naming the temp file that holds its full traceback; Ctrl-C is one
    line saying what was kept (exit 130, llumverify/files/interrupt.py).
    """
    if argv is None:  # the console command: Ctrl-C is one line within a second (in-process callers keep theirs)
        interrupt.install()
    try:
        rv = cli.main(args=argv, prog_name="llumverify", standalone_mode=False)
    except UserError as exc:
        click.echo(f"llumverify: error: {exc}", err=True)
        sys.exit(2)
    except (interrupt.Interrupted, click.exceptions.Abort):
        interrupt.exit_interrupted()
    except click.exceptions.NoArgsIsHelpError as exc:  # its message is the whole help text
        click.echo(f"llumverify: error: no command given (one of: {', '.join(COMMANDS)}); see llumverify --help",
                   err=True)
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        click.echo(f"llumverify: error: {exc.format_message()}", err=True)
        sys.exit(exc.exit_code)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except OSError as exc:
        if exc.errno != errno.ENAMETOOLONG:  # anything else with a file is checked where it is opened
            _bug(exc)
        click.echo(f"llumverify: error: {brief(exc.filename)}: path too long (a name over 255 bytes, or over "
                   "4,096 in all)", err=True)
        sys.exit(2)
    except Exception as exc:  # noqa: BLE001 - a bug: one line, the traceback goes to a file
        _bug(exc)
    sys.exit(rv if isinstance(rv, int) else 0)


def _bug(exc: Exception) -> NoReturn:
    if interrupt.signalled():  # Ctrl-C that a native call's wrapper turned into another exception
        interrupt.exit_interrupted()
    click.echo(f"llumverify: {internal_error(exc)}", err=True)
    sys.exit(INTERNAL_ERROR_EXIT)
