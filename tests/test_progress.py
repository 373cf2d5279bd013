"""The in-run progress report: every request counted, nothing else changed, silent off a terminal."""

from __future__ import annotations

from click.testing import CliRunner

from llumverify.cli import cli
from llumverify.settings.config import SimConfig
from llumverify.sim.run import simulate
from llumverify.sim.workload import generate


def test_progress_counts_every_ended_request_and_changes_nothing() -> None:
    specs = generate(1000, 9.5, seed=3)
    seen: list[int] = []
    with_bar = simulate(specs, "llumnix", SimConfig(), progress=seen.append)
    plain = simulate(specs, "llumnix", SimConfig())
    assert seen == list(range(5, 1001, 5))  # every 1000 // 200 ended requests, the last included
    assert with_bar.summary == plain.summary


def test_no_bar_when_stderr_is_not_a_terminal() -> None:
    run = CliRunner().invoke(cli, ["simulate", "--requests", "300"])
    assert run.exit_code == 0, run.output
    assert run.stderr == ""
