"""The command line every published-data check in benchmarks/ shares: one source folder, --out.

A check builds (results, table) from its source; --out is checked before any replay and gets
results.json and table.md (its header, then the table), each written atomically.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from llumverify.errors import UserError
from llumverify.files.paths import writable_dir, write_atomic


def git(repo: Path, *args: str) -> str:
    """`git ARGS` in a clone or a bare git directory (the `fetch` tool's mirrors); a failure is a
    one-line UserError with git's own first line."""
    cmd = ["git", "--git-dir", str(repo), *args] if (repo / "objects").is_dir() else ["git", "-C", str(repo), *args]
    try:
        return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    except FileNotFoundError:
        raise UserError("git is not installed") from None
    except subprocess.CalledProcessError as exc:
        said = (exc.stderr or "").strip().splitlines()
        raise UserError(f"{repo}: git {' '.join(args)}: {said[0] if said else f'exit {exc.returncode}'}") from None


def report_main(name: str, doc: str, argv: list[str], build: Callable[[Path], tuple[object, str]],
                header: str) -> int:
    """Run one check: exit 2 with a one-line error on bad input, else print its table (and write it)."""
    ap = argparse.ArgumentParser(prog=name, description=doc.splitlines()[0])
    ap.add_argument("source", type=Path)
    ap.add_argument("--out", type=Path)
    a = ap.parse_args(argv)
    try:
        if a.out is not None:  # checked before any replay, made only once it can be
            writable_dir(a.out, "--out")
            a.out.mkdir(parents=True, exist_ok=True)
        results, text = build(a.source)
    except UserError as exc:
        print(f"{name}: error: {exc}", file=sys.stderr)
        return 2
    print(text)
    if a.out is not None:
        write_atomic(a.out / "results.json", json.dumps(results, indent=2, sort_keys=True) + "\n")
        write_atomic(a.out / "table.md", header + text)
    return 0
