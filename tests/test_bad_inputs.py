"""The bad-input corpus (tests/bad_inputs/cases.toml): every bad input is one line naming its culprit.

Each case runs the real command line in-process on a copy of the corpus and must exit with its
status (2 unless stated), print exactly one line on stderr (no traceback) that names the culprit
and the problem, print nothing on stdout and write nothing anywhere: it failed before any work.
A bug, unlike bad input, is one line too, naming the file that holds its traceback.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import tomllib
from pathlib import Path

import pytest

import llumverify.cli as cli
from llumverify.cli import simulate as simulate_command
from llumverify.errors import INTERNAL_ERROR_EXIT

CORPUS = Path(__file__).resolve().parent / "bad_inputs"
CASES = tomllib.loads((CORPUS / "cases.toml").read_text(encoding="utf-8"))["case"]
TINY = CORPUS / "experiments" / "tiny.toml"
POINTS_AT = {"experiments": ("traces",)}  # corpus entries whose files name another entry (../traces/...)


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as info:
        cli.main(argv)
    out, err = capsys.readouterr()
    return info.value.code, out, err  # type: ignore[return-value]


def _tree(root: Path) -> dict[str, bytes | None]:
    """Every path under root with its bytes (None for a folder, its target for a symlink): to prove a case wrote
    nothing."""
    return {str(p.relative_to(root)): (os.readlink(p).encode() if p.is_symlink() else None if p.is_dir()
                                       else p.read_bytes()) for p in sorted(root.rglob("*"))}


def _copy_named(args: list[str], corpus: Path) -> None:
    """Copy the corpus's top-level entries the case's arguments name ({corpus}/ENTRY/...), with all
    they hold: the copies a case runs on, 196 whole-corpus copies being most of this file's time.
    A case that needs an entry it does not name fails here with a culprit of its own, not silently."""
    corpus.mkdir()
    named = {a.split("{corpus}/", 1)[1].split("/", 1)[0] for a in args if "{corpus}/" in a}
    for name in sorted(named | {n for e in named for n in POINTS_AT.get(e, ())}):
        src = CORPUS / name
        if src.is_dir():
            shutil.copytree(src, corpus / name, symlinks=True)  # a symlink loop stays one
        elif src.exists():
            shutil.copy2(src, corpus / name)


def test_the_corpus_is_large_and_every_case_names_its_culprit() -> None:
    ids = [case["id"] for case in CASES]
    assert len(ids) >= 40 and len(set(ids)) == len(ids)
    for case in CASES:
        assert set(case) <= {"id", "args", "culprit", "problem", "exit", "without"} and case["culprit"] \
            and case["problem"], case


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES, ids=[case["id"] for case in CASES])
def test_bad_input_is_one_line_naming_the_culprit(case: dict, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    if "without" in case and importlib.util.find_spec(case["without"]) is not None:
        pytest.skip(f"bad input only without the optional {case['without']!r} installed")
    corpus, scratch = tmp_path / "corpus", tmp_path / "scratch"
    _copy_named(case["args"], corpus)
    scratch.mkdir()
    before = _tree(tmp_path)
    argv = [a.replace("{corpus}", str(corpus)).replace("{tmp}", str(scratch)) for a in case["args"]]
    code, out, err = _run(argv, capsys)
    assert code == case.get("exit", 2), err
    assert err.startswith("llumverify: error: ") and err.count("\n") == 1 and "Traceback" not in err, err
    assert case["culprit"] in err and case["problem"] in err, err
    assert out == ""
    assert _tree(tmp_path) == before  # nothing written, nothing created


def test_a_bug_is_one_line_and_its_traceback_goes_to_a_file(monkeypatch: pytest.MonkeyPatch,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    def broken(*_args: object, **_kwargs: object) -> None:
        raise ZeroDivisionError("the simulator divided by zero")

    monkeypatch.setattr(simulate_command, "run_policy", broken)
    code, _, err = _run(["simulate", "--requests", "20", "--instances", "2"], capsys)
    assert code == INTERNAL_ERROR_EXIT and err.count("\n") == 1 and "Traceback" not in err
    assert "internal error (a bug): ZeroDivisionError: the simulator divided by zero" in err
    saved = Path(err.rsplit("full traceback in ", 1)[1].strip())
    try:
        text = saved.read_text(encoding="utf-8")
        assert text.startswith("Traceback") and "def broken" not in text and "the simulator divided by zero" in text
    finally:
        saved.unlink()


def test_ctrl_c_wrapped_by_a_native_call_is_the_interrupted_line_not_a_bug(monkeypatch: pytest.MonkeyPatch,
                                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """Ctrl-C landing in ctypes' argument conversion (a Z3 call) reaches main as ctypes.ArgumentError;
    the handler's flag says it was Ctrl-C: exit 130 and the one line, not "internal error (a bug)"."""
    import ctypes
    import threading

    from llumverify.files import interrupt

    def z3_call_interrupted(*_args: object, **_kwargs: object) -> None:
        monkeypatch.setattr(interrupt, "_signalled", True)  # what interrupt._raise sets before raising
        raise ctypes.ArgumentError("argument 1: Interrupted: ")

    monkeypatch.setattr(simulate_command, "run_policy", z3_call_interrupted)
    monkeypatch.setattr(interrupt, "_said", threading.Lock())  # the line is said once a process
    code, _, err = _run(["simulate", "--requests", "20", "--instances", "2"], capsys)
    assert code == interrupt.EXIT and err.startswith("llumverify: interrupted; ") and err.count("\n") == 1, err
    assert "internal error" not in err


def test_a_bug_in_a_sweep_run_names_its_run_and_traceback(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    from llumverify.study import sweep as sweep_module

    def broken(*_args: object, **_kwargs: object) -> None:
        raise KeyError("lost")

    monkeypatch.setattr(sweep_module, "simulate", broken)
    code, _, err = _run(["sweep", str(TINY), "--out", str(tmp_path / "out"), "--jobs", "1", "--quiet"], capsys)
    assert code == 1 and err.count("\n") == 1 and "Traceback" not in err
    assert "tiny [] round-robin seed 0: internal error (a bug): KeyError" in err
    saved = Path(err.rsplit("full traceback in ", 1)[1].strip())
    try:
        assert "KeyError: 'lost'" in saved.read_text(encoding="utf-8")
    finally:
        saved.unlink()
