"""The compiled build (setup.py, llumverify/_native.py): it gives the sources' results bit for bit,
CI runs it, and a source edited since the build is never run as its old compiled self."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from llumverify import _native

ROOT = Path(__file__).resolve().parent.parent


def test_an_edited_or_missing_source_is_stale(tmp_path: Path) -> None:
    kept, edited = tmp_path / "kept.py", tmp_path / "edited.py"
    kept.write_text("x = 1\n")
    edited.write_text("y = 2\n")
    hashes = {m: hashlib.sha256(p.read_bytes()).hexdigest() for m, p in (("a.kept", kept), ("a.edited", edited))}
    files = {"a.kept": kept, "a.edited": edited, "a.gone": tmp_path / "gone.py"}
    assert _native.stale(hashes, files) == []
    edited.write_text("y = 3\n")
    hashes["a.gone"] = hashes["a.kept"]
    assert _native.stale(hashes, files) == ["a.edited", "a.gone"]


def test_the_record_names_each_compiled_modules_source() -> None:
    if not _native.RECORD.is_file():
        pytest.skip("pure-Python install (LLUMVERIFY_PURE=1 or no C compiler): nothing was compiled")
    files = _native.source_files(sorted(json.loads(_native.RECORD.read_text())))
    assert files and all(p.is_file() and p.suffix == ".py" for p in files.values())
    assert files["llumverify.sim.instance"].parent.name == "sim"


@pytest.mark.skipif(not os.environ.get("CI"), reason="CI builds and must run the compiled simulator")
def test_ci_runs_the_compiled_build() -> None:
    import llumverify.sim.instance as instance
    assert _native.compiled() and instance.__file__.endswith(".so")


@pytest.mark.slow
def test_compiled_and_sources_give_the_same_outputs() -> None:
    """Both engines, P/D with every fallback, migrations and crashes: every record and summary."""
    if not _native.compiled():
        pytest.skip("the compiled build is not active here, so there is nothing to compare")
    cmd = [sys.executable, str(ROOT / "benchmarks" / "output_hashes.py"), "--only", "fail"]
    compiled = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    pure = subprocess.run(cmd, capture_output=True, text=True, check=True,
                          env={**os.environ, "LLUMVERIFY_PURE": "1"}).stdout
    assert len(compiled.splitlines()) == 6 and compiled == pure


@pytest.mark.parametrize("value, code", [("1", 0), ("0", 0), ("yes", 2)])
def test_llumverify_pure_takes_0_or_1(value: str, code: int) -> None:
    """1 picks the sources, 0 the build; a typo is refused in one line rather than picking either."""
    probe = "from llumverify import _native; print(_native.compiled())"
    run = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         env={**os.environ, "LLUMVERIFY_PURE": value})
    assert run.returncode == code
    if code:
        assert run.stderr.strip().splitlines() == ["llumverify: error: LLUMVERIFY_PURE must be 0 or 1, not 'yes'"]
    else:
        built = _native.RECORD.is_file()
        fresh = built and not _native.stale(hashes := json.loads(_native.RECORD.read_text()),
                                            _native.source_files(sorted(hashes)))
        assert run.stdout.strip() == str(value == "0" and fresh)
