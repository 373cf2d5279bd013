"""Per-request output files, written row by row as requests end (sim/records.py hands the rows
over in arrival order), so writing them costs no memory per finished request.

requests.csv always works; requests.parquet needs pyarrow (the `parquet` extra). A file is written
as NAME.part and renamed when complete, so an interrupted or failed run leaves no file that looks
whole.
"""

from __future__ import annotations

import csv
import importlib.util
from pathlib import Path
from types import TracebackType
from typing import Any

from llumverify.errors import UserError
from llumverify.sim.records import Row

NS = 1e9
FORMATS = ("csv", "parquet")
COLUMNS = ("request_id", "policy", "arrival_s", "prompt_tokens", "output_tokens", "priority", "instance",
           "first_token_s", "finish_s", "preemptions", "migrations", "status")
PARQUET_ROW_GROUP = 65_536  # rows buffered per Parquet row group (a few MB)


def check_format(fmt: str) -> None:
    """UserError, before any work, for a format this machine cannot write."""
    if fmt not in FORMATS:
        raise UserError(f"unknown requests format {fmt!r}: choose one of {', '.join(FORMATS)}")
    if fmt == "parquet" and importlib.util.find_spec("pyarrow") is None:
        raise UserError("Parquet output needs pyarrow: pip install pyarrow (or llumverify[parquet]), or write CSV")


def csv_fields(policy: str, row: Row) -> list[str]:
    """One requests.csv row; floats in repr form so identical runs write identical bytes."""
    return [str(row.id), policy, repr(row.arrival_s), str(row.prompt), str(row.output), str(row.priority),
            str(row.instance) if row.instance >= 0 else "",
            repr(row.first_token_ns / NS) if row.first_token_ns >= 0 else "",
            repr(row.finish_ns / NS) if row.finish_ns >= 0 else "",
            str(row.preemptions), str(row.migrations), row.status]


class RequestsFile:
    """DIR/requests.csv or DIR/requests.parquet, one row per request and policy (COLUMNS)."""

    def __init__(self, out_dir: Path, fmt: str = "csv") -> None:
        check_format(fmt)
        self.path = out_dir / f"requests.{fmt}"
        self._part = out_dir / f"requests.{fmt}.part"
        self._out: _Csv | _Parquet = _Csv(self._part) if fmt == "csv" else _Parquet(self._part)

    def write(self, policy: str, row: Row) -> None:
        """Append one request's row."""
        self._out.write(policy, row)

    def __enter__(self) -> RequestsFile:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        """Complete: flush and rename into place. Failed: drop the partial file."""
        self._out.close()
        if kind is None:
            self._part.replace(self.path)
        else:
            self._part.unlink(missing_ok=True)


class _Csv:
    def __init__(self, path: Path) -> None:
        self._f = open(path, "w", newline="")
        self._w = csv.writer(self._f, lineterminator="\n")
        self._w.writerow(COLUMNS)

    def write(self, policy: str, row: Row) -> None:
        self._w.writerow(csv_fields(policy, row))

    def close(self) -> None:
        self._f.close()


class _Parquet:
    """Rows buffered by column and written a row group at a time; times in seconds, None where
    the CSV has an empty field."""

    def __init__(self, path: Path) -> None:
        import pyarrow as pa  # optional: check_format found it
        import pyarrow.parquet as pq

        self._pa = pa
        i64, f64, text = pa.int64(), pa.float64(), pa.string()
        self._schema = pa.schema(list(zip(COLUMNS, (i64, text, f64, i64, i64, i64, i64, f64, f64, i64, i64, text))))
        self._w = pq.ParquetWriter(path, self._schema)
        self._cols: list[list[Any]] = [[] for _ in COLUMNS]

    def write(self, policy: str, row: Row) -> None:
        values = (row.id, policy, row.arrival_s, row.prompt, row.output, row.priority,
                  row.instance if row.instance >= 0 else None,
                  row.first_token_ns / NS if row.first_token_ns >= 0 else None,
                  row.finish_ns / NS if row.finish_ns >= 0 else None, row.preemptions, row.migrations, row.status)
        for col, v in zip(self._cols, values):
            col.append(v)
        if len(self._cols[0]) >= PARQUET_ROW_GROUP:
            self._flush()

    def _flush(self) -> None:
        if self._cols[0]:
            self._w.write_table(self._pa.Table.from_pydict(dict(zip(COLUMNS, self._cols)), schema=self._schema))
            self._cols = [[] for _ in COLUMNS]

    def close(self) -> None:
        self._flush()
        self._w.close()
