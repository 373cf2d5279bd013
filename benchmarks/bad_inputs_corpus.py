"""Run every case of tests/bad_inputs/cases.toml as a real `llumverify` process and count what went wrong.

tests/test_bad_inputs.py checks each case in-process; this runs the console command itself (signal
handlers, exit codes, process start) and prints the counts issue 30 asks for: tracebacks, silent
acceptances (exit 0), runs over 60 s, outputs written (anything created in the case's folders).
Usage: python benchmarks/bad_inputs_corpus.py [LLUMVERIFY]   (default: llumverify beside this Python)
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

CORPUS = Path(__file__).resolve().parents[1] / "tests" / "bad_inputs"
LIMIT_S = 60.0


def _tree(root: Path) -> dict[str, bytes | None]:
    return {str(p.relative_to(root)): (os.readlink(p).encode() if p.is_symlink() else None if p.is_dir()
                                       else p.read_bytes()) for p in sorted(root.rglob("*"))}


def main() -> None:
    exe = sys.argv[1] if len(sys.argv) > 1 else str(Path(sys.executable).with_name("llumverify"))
    cases = tomllib.loads((CORPUS / "cases.toml").read_text(encoding="utf-8"))["case"]
    counts = {"tracebacks": 0, "silent acceptances": 0, "over 60 s": 0, "outputs written": 0, "not one line": 0}
    slowest = 0.0
    for case in cases:
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            shutil.copytree(CORPUS, root / "corpus", symlinks=True)  # a symlink loop stays one
            (root / "scratch").mkdir()
            before = _tree(root)
            argv = [a.replace("{corpus}", str(root / "corpus")).replace("{tmp}", str(root / "scratch"))
                    for a in case["args"]]
            start = time.monotonic()
            try:
                proc = subprocess.run([exe, *argv], capture_output=True, text=True, timeout=LIMIT_S)
                code, err = proc.returncode, proc.stderr
            except subprocess.TimeoutExpired:
                code, err = None, ""
            took = time.monotonic() - start
            slowest = max(slowest, took)
            problems = {"tracebacks": "Traceback" in err, "silent acceptances": code == 0,
                        "over 60 s": code is None, "outputs written": _tree(root) != before,
                        "not one line": code is not None and err.count("\n") != 1}
            for name, bad in problems.items():
                if bad:
                    counts[name] += 1
                    print(f"{case['id']}: {name} (exit {code}, {took:.1f} s): {err.strip()[:200]}")
    print(f"{len(cases)} cases; " + ", ".join(f"{n}: {c}" for n, c in counts.items()) + f"; slowest {slowest:.1f} s")


if __name__ == "__main__":
    main()
