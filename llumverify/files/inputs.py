"""Values read from input files, checked exactly: one place for the rules every reader shares.

Why: a reader that calls int() or bool() on what a file holds turns 2.9 into 2 and the string
"false" into True, and the run then reports on settings nobody asked for; one that sizes nothing
up front dies of MemoryError (or swaps for a minute) on a batch of 1e8. Each function returns the
value or raises a one-line UserError naming where it came from (`where`: a file, file:line or
option) and what was expected. Limits are far above any real input and far below what exhausts
a machine; docs/inputs.md lists them.
"""

from __future__ import annotations

import csv
import errno
import math
import os
import re
import stat
from collections.abc import Iterator, Sequence
from pathlib import Path

from llumverify.errors import UserError, brief

MAX_TEXT_BYTES = 1 << 30  # a text input read whole (a trace, a run's requests): 1 GiB
MAX_SETTINGS_BYTES = 16 << 20  # a settings file (experiment, profile, cost TOML, meta.json): 16 MiB
MAX_STATIC_BATCH = 65_536  # requests in one static batch (argonne's largest is 256)
MAX_STATIC_REQUESTS = 1_000_000  # requests over every row of a static-batch CSV (argonne's: 4,921)
# tokens (batch x length) over every row: argonne's CSV holds 4.0e6; 1.3e8 in one row simulates in
# 22 s (`llumverify validate --static-batch` on one 65,536 x 2,048 row, 2 shared cores, 2026-12-04)
MAX_STATIC_TOKENS = 100_000_000
MAX_LENGTH_TOKENS = 10_000_000  # tokens of one prompt or output


def symlink_loop(path: Path, label: str = "") -> UserError:
    """The one line for a path that is a symlink loop (or runs through one), naming `label` (an option) if given."""
    return UserError(f"{label + ' ' if label else ''}{path}: cannot resolve it (a symlink loop)")


def not_a_loop(path: Path, label: str = "") -> Path:
    """`path` itself once it is known not to be a symlink loop (os.stat's ELOOP); a loop is one line saying so
    (naming `label`, an option, if given). Why: exists(), is_file() and is_dir() answer a loop with False, and
    the caller then reports a file that is there as "not found"."""
    try:
        os.stat(path)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise symlink_loop(path, label) from None
    except ValueError:  # a NUL in the path: the caller's own open or stat names it
        pass
    return path


def regular_file(path: Path, what: str, max_bytes: int = MAX_TEXT_BYTES) -> Path:
    """`path` if it is a regular file of at most `max_bytes`: not a folder, device, FIFO or socket
    (a link to /dev/zero would be read until memory runs out), not a file too large to read whole."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise UserError(f"{path}: {what} not found") from None
    except OSError as exc:
        not_a_loop(path)
        raise UserError(f"{path}: cannot read it ({exc.strerror or exc})") from None
    if stat.S_ISDIR(st.st_mode):
        raise UserError(f"{path}: is a directory, not a file ({what} expected)")
    if not stat.S_ISREG(st.st_mode):
        kind = ("a character device" if stat.S_ISCHR(st.st_mode) else "a block device" if stat.S_ISBLK(st.st_mode)
                else "a FIFO" if stat.S_ISFIFO(st.st_mode) else "a socket" if stat.S_ISSOCK(st.st_mode)
                else "not a regular file")
        raise UserError(f"{path}: is {kind}, not a regular file ({what} expected)")
    if st.st_size > max_bytes:
        raise UserError(f"{path}: {st.st_size:,} bytes, over the {max_bytes:,}-byte limit for a {what}")
    return path


def csv_records(path: Path, what: str, columns: Sequence[str], max_rows: int) -> Iterator[tuple[int, dict[str, str]]]:
    """(line, record) of each row of a CSV file that must hold `columns`, at most `max_rows` rows:
    a missing column, too many rows, bytes that are not UTF-8 or broken quoting is one UserError
    naming the file, raised before the row that breaks the rule."""
    regular_file(path, what)
    try:
        with open(path, encoding="utf-8", newline="") as f:
            reader = csv.DictReader(f)
            missing = [c for c in columns if c not in (reader.fieldnames or ())]
            if missing:
                raise UserError(f"{path}: missing columns {missing}")
            for i, rec in enumerate(reader):
                if i >= max_rows:
                    raise UserError(f"{path}: more than {max_rows:,} rows")
                yield reader.line_num, rec
    except UnicodeDecodeError:
        raise UserError(f"{path}: not UTF-8 text") from None
    except csv.Error as exc:
        raise UserError(f"{path}: malformed CSV ({exc})") from None


def exact_int(value: object, where: str, *, lo: int | None = None, hi: int | None = None) -> int:
    """An integer as written (not 2.9, not "3", not true), within [lo, hi]."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise UserError(f"{where} must be an integer, got {brief(value)}")
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        bounds = f">= {lo:,}" if hi is None else f"in [{lo if lo is not None else '-inf'}, {hi:,}]"
        raise UserError(f"{where} must be an integer {bounds}, got {brief(value)}")
    return value


def whole_ns(value: float, where: str, key: str = "arrival_time_ns") -> float:
    """A time in ns (a workload JSONL's arrival_time_ns) that is a whole number: a fraction of a ns means the
    times are in seconds or ms, and a replay would squeeze them into a burst."""
    if value != int(value):
        raise UserError(f"{where}: {key} must be a whole number of ns, got {value!r} (are the times in seconds?)")
    return value


def exact_bool(value: object, where: str) -> bool:
    """true or false as written (the string "false" is not a boolean, and would read as true)."""
    if not isinstance(value, bool):
        raise UserError(f"{where} must be true or false, got {value!r}")
    return value


def finite(value: object, where: str, *, gt: float | None = None, ge: float | None = None,
           lt: float | None = None, le: float | None = None) -> float:
    """A finite number (not nan, inf, a string, a boolean or an integer beyond a float) within the given bounds."""
    try:
        ok = not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value)
    except OverflowError:  # an integer of hundreds of digits, as JSON allows
        ok = False
    if not ok:
        raise UserError(f"{where} must be a finite number, got {brief(value)}")
    for op, bound, ok in ((">", gt, lambda b: value > b), (">=", ge, lambda b: value >= b),
                          ("<", lt, lambda b: value < b), ("<=", le, lambda b: value <= b)):
        if bound is not None and not ok(bound):
            raise UserError(f"{where} must be {op} {bound:g}, got {value!r}")
    return float(value)


_ASCII_INT = re.compile(r"[+-]?[0-9]+")


def ascii_int(text: str) -> int | None:
    """The integer a text field spells in ASCII digits (an optional sign, spaces around), else None: int() would
    also read `1_000` and other scripts' digits, which in a CSV are a mangled field, not a count."""
    text = text.strip()
    return int(text) if _ASCII_INT.fullmatch(text) else None


def parsed_int(text: str, where: str, *, lo: int = 1, hi: int | None = None) -> int:
    """An integer field of a CSV row: ASCII digits only (not "2.9", "1e8" or "1_000"), within [lo, hi]."""
    value = ascii_int(text)
    if value is None:
        raise UserError(f"{where} must be an integer, got {text!r}")
    return exact_int(value, where, lo=lo, hi=hi)


def unique_keys(pairs: list[tuple[str, object]]) -> dict[str, object]:
    """json.loads' object_pairs_hook: a key given twice in one object with two values is a ValueError (json keeps
    the last one without a word, so `"input_length": 100, "input_length": 5000` replayed 5,000); the same value
    twice (a hand-merged file) says nothing the file did not mean, and is read."""
    out: dict[str, object] = {}
    for key, value in pairs:
        if key in out and out[key] != value:
            raise ValueError(f"key {key!r} given twice in one object")
        out[key] = value
    return out
