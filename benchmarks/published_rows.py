"""What the scripts that price published kernel times share: reading their rows CSV and their main.

Each such script (moe_kernels_published.py, w4_kernels_published.py) keeps one CSV of published times
under reports/validation/, checks every row against what it prices, prints a table per kernel series
and the terms it fits; bad input is one line on stderr and exit 2.
"""
from __future__ import annotations

import csv
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from tabulate import tabulate

from llumverify.errors import UserError

Rows = list[dict[str, str]]


def source_key(r: dict[str, str]) -> str:
    """A row's publication: its source's first word (repository#number or URL), what a series and a fit weight group by."""
    return r["source"].split(" ")[0]


def read_csv(path: Path, columns: Sequence[str]) -> Rows:
    """The CSV's rows as dicts, every one of `columns` present and non-empty (a UserError naming the line otherwise)."""
    with path.open(newline="") as f:
        reader = csv.DictReader(f)
        if missing := set(columns) - set(reader.fieldnames or ()):
            raise UserError(f"{path}: missing columns {', '.join(sorted(missing))}")
        rows = list(reader)
    for line, r in enumerate(rows, start=2):
        if any(r.get(c) in (None, "") for c in columns):
            raise UserError(f"{path}:{line}: every column needs a value")
    return rows


def main(argv: list[str], script: str, default: Path, read: Callable[[Path], Rows],
         table: Callable[[Rows], list[list]], headers: Sequence[str], fit: Callable[[Rows], dict[str, float]],
         shipped: dict[str, float]) -> int:
    """`python benchmarks/<script>.py [ROWS_CSV]`: the table and the terms `fit` finds, against the `shipped` values."""
    if len(argv) > 1:
        print(f"usage: python benchmarks/{script}.py [ROWS_CSV]", file=sys.stderr)
        return 2
    path = Path(argv[0]) if argv else default
    try:
        rows = read(path)
        body, fitted = table(rows), fit(rows)
    except (OSError, UserError) as exc:
        print(f"{script}: error: {exc}", file=sys.stderr)
        return 2
    print(tabulate(body, headers=list(headers), tablefmt="github"))
    for term, value in fitted.items():
        unit = " ns" if term.endswith("_ns") else " ps" if term.endswith("_ps_per_k") else ""
        print(f"{term} as these rows fit it (the script's docstring says which rows count): {value:,}{unit} (shipped: "
              f"{shipped[term]:,}{unit})")
    return 0
