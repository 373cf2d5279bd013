"""What a user sees from `llumverify check`: exit codes, one-line errors, JSON."""

from __future__ import annotations

import json

import pytest

from llumverify.cli import main


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exc:
        main(["check", *args])
    out = capsys.readouterr()
    return int(exc.value.code or 0), out.out, out.err


def test_safe_variant_passes(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "--variant", "safe")
    assert code == 0
    assert "single_owner           PROVED (unbounded)" in out


def test_head_variant_fails_with_numbered_trace(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "--variant", "head")
    assert code == 1
    assert "single_owner           VIOLATED in 7 steps" in out
    assert "counterexample to single_owner:" in out and "   7. " in out


def test_json_output(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "--variant", "safe", "--json")
    report = json.loads(out)
    assert code == 0 and report["ok"] is True
    assert all(p["verdict"] == "PROVED" for p in report["variants"]["safe"]["properties"])


@pytest.mark.parametrize("args", [("--variant", "nope"), ("--depth", "0")])
def test_bad_options_are_one_line(capsys: pytest.CaptureFixture[str], args: tuple[str, ...]) -> None:
    code, out, err = _run(capsys, *args)
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1


def test_mutants_all_killed(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "--variant", "safe", "--mutants")
    assert code == 0
    assert "SURVIVED" not in out and out.rstrip().endswith("killed")
