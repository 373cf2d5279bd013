"""Readers for public request traces (../shared/traces): Azure 2023 CSV, Mooncake JSONL, Vidur lengths, generic CSV.

Every problem in a file is a UserError naming the file and its 1-based line; no row is ever skipped
except blank lines.
"""

from __future__ import annotations

import csv
import datetime
import io
import json
import math
import numbers
import re
from collections.abc import Collection, Iterable, Iterator
from difflib import get_close_matches
from pathlib import Path

import numpy as np

from llumverify.settings.config import MAX_TIME_S
from llumverify.errors import UserError
from llumverify.files.inputs import ascii_int, unique_keys, whole_ns
from llumverify.files.paths import check_keys, input_file, read_text
from llumverify.files.prompt_hashes import OUTPUT_KEY, TOKEN_KEYS, PromptHashes
from llumverify.requests import HIGH, MAX_TOKENS, NORMAL, RequestSpec
from llumverify.sim.workload import arrival_times

_AZURE = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")
_VIDUR = ("num_prefill_tokens", "num_decode_tokens")
_GENERIC = ("arrival_s", "prompt_tokens", "output_tokens")
_MOONCAKE = ("timestamp", "input_length", "output_length")
_WORKLOAD = ("arrival_time_ns", "input_toks", "output_toks")  # the shared validation workloads
_PRIORITY = "priority"  # the generic CSV's optional column
_HASH_KEYS = ("hash_ids", OUTPUT_KEY, *TOKEN_KEYS)  # optional in either JSONL format (prompt_hashes.py)
_VIDUR_MORE = ("num_total_tokens", "pd_ratio", "arrived_at")  # in Vidur's processed traces, not read here
_READ = frozenset((*_AZURE, *_VIDUR, *_GENERIC, _PRIORITY, *_MOONCAKE, *_WORKLOAD, *_HASH_KEYS))
_ACCEPTED = ("accepted: .csv with header TIMESTAMP,ContextTokens,GeneratedTokens (Azure 2023), "
             "num_prefill_tokens,num_decode_tokens,... (Vidur, lengths only) or "
             "arrival_s,prompt_tokens,output_tokens[,priority] in any order (generic); "
             ".jsonl with keys timestamp,input_length,output_length (Mooncake)")
_AZURE_TS = re.compile(r"(\d{4})-(\d\d)-(\d\d)[ T](\d\d):(\d\d):(\d\d)(?:\.(\d{1,9}))?")

# One parsed row: (line number, arrival in seconds or None, prompt tokens, output tokens, priority).
_Row = tuple  # (line, arrival_s | None, prompt, output, priority[, hash_ids, hash_block, output_hash_ids])
MOONCAKE_HASH_BLOCK = 512  # tokens per hash id in the Mooncake traces (FAST'25 artifact)


def read_trace(path: str | Path, *, limit: int | None = None, rate_scale: float = 1.0, seed: int = 0,
               rate: float | None = None, arrival: str = "poisson", cv: float = 1.0,
               spread: bool = False) -> list[RequestSpec]:
    """Requests of a trace file, ids 0..n-1 in arrival order, arrival_s relative to the first request.

    limit: keep the first N requests (after `spread`). rate_scale: multiply the arrival rate (divides
    every arrival time). rate: replace the file's arrivals by `arrival_times(n, rate, ..., arrival, cv)`
    drawn from default_rng(seed), keeping its lengths; required for files without timestamps (Vidur).
    spread (Mooncake only): spread each distinct-timestamp bucket uniformly up to the next distinct
    timestamp (the last bucket over the median gap between distinct timestamps), seeded by `seed`.
    """
    path = Path(path)
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, numbers.Integral) or limit <= 0):
        raise UserError(f"limit must be a positive integer, got {limit!r}")
    if not (isinstance(rate_scale, numbers.Real) and math.isfinite(rate_scale) and rate_scale > 0):
        raise UserError(f"rate_scale must be positive, got {rate_scale!r}")
    suffix = input_file(path, "trace file").suffix.lower()
    if suffix == ".csv":
        rows = _read_csv(path, read_text(path, "trace file"))
    elif suffix == ".jsonl":
        rows = _read_mooncake(path, read_text(path, "trace file"))
    else:
        raise UserError(f"{path}: unknown trace format (extension {suffix or 'none'!r}); {_ACCEPTED}")
    if not rows:
        raise UserError(f"{path}: no data rows")
    if spread and (suffix != ".jsonl" or rate is not None):
        raise UserError(f"{path}: spread applies only to Mooncake .jsonl traces replayed with their own timestamps")

    rng = np.random.default_rng(seed)
    if rate is None:
        if rows[0][1] is None:
            raise UserError(f"{path} has no timestamps: give --rate")
        _check_order(path, rows)
        times = np.array([r[1] for r in rows], dtype=np.float64)
        if spread:
            times, order = _spread(times, rng)
            rows = [rows[i] for i in order]
        rows = rows[:limit]
        times = times[: len(rows)] - times[0]
        _check_horizon(path, rows, times / rate_scale, rate_scale)
    else:
        rows = rows[:limit]
        times = arrival_times(len(rows), rate, rng, arrival, cv)
    times = times / rate_scale
    return [RequestSpec(i, t, r[2], r[3], r[4], *r[5:]) for i, (t, r) in enumerate(zip(times.tolist(), rows))]


def _check_order(path: Path, rows: list[_Row]) -> None:
    for prev, row in zip(rows, rows[1:]):
        if row[1] < prev[1]:
            raise UserError(f"{path}:{row[0]}: timestamp earlier than line {prev[0]} (rows must be sorted by time)")


def _check_horizon(path: Path, rows: list[_Row], times: np.ndarray, rate_scale: float) -> None:
    """Every arrival (after the first, rate-scaled) within the simulator's MAX_TIME_S, naming the first beyond."""
    beyond = np.flatnonzero(~(times <= MAX_TIME_S))
    if len(beyond):
        i = int(beyond[0])
        scaled = f" after rate_scale {rate_scale!r}" if rate_scale != 1.0 else ""
        raise UserError(f"{path}:{rows[i][0]}: arrival {times[i]:.3g} s after the first request{scaled} is beyond "
                        f"the simulator's {MAX_TIME_S:.0e} s (are the times in seconds?)")


def _spread(times: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Uniform offsets within each quantised bucket; returns the new times and the stable sort order."""
    distinct = np.unique(times)
    if len(distinct) < 2:
        return times, np.arange(len(times))
    gaps = np.diff(distinct)
    widths = np.append(gaps, np.median(gaps))
    bucket = np.searchsorted(distinct, times)
    spread = times + rng.random(len(times)) * widths[bucket]
    order = np.argsort(spread, kind="stable")
    return spread[order], order


def _tokens(path: Path, line: int, name: str, value: object) -> int:
    """A token count: an integer in [1, MAX_TOKENS] (strings of ASCII digits are parsed: `1_000` or another
    script's digits are a mangled field, not a count; bools and floats refused)."""
    if isinstance(value, str):
        parsed = ascii_int(value)
        if parsed is None:
            raise UserError(f"{path}:{line}: {name} {value.strip()!r} is not an integer (ASCII digits)")
        value = parsed
    if isinstance(value, bool) or not isinstance(value, int):
        raise UserError(f"{path}:{line}: {name} {value!r} is not an integer")
    if not 1 <= value <= MAX_TOKENS:
        raise UserError(f"{path}:{line}: {name} must be an integer in [1, {MAX_TOKENS:,}], got {value}")
    return value



def _check_names(where: str, names: Iterable[str], known: Collection[str], what: str, *, own: bool) -> None:
    """Refuse a column or key the reader would drop without a word (a misspelt `priorty` left every
    request at priority 0). The project's own format (own) has no other names, so any unknown one is
    refused. A public format's files may carry more (Vidur's num_total_tokens, a harness's own keys),
    kept as before; refused there is only a name some format reads (it is not read in this one) or
    one close to it (a misspelling: difflib ratio >= 0.8, e.g. hash_id for hash_ids)."""
    suspect = [n for n in names if n not in known
               and (own or n in _READ or get_close_matches(n, _READ, n=1, cutoff=0.8))]
    check_keys(where, suspect, known, what=what)


def _csv_rows(path: Path, reader: Iterator[list[str]], width: int) -> Iterator[tuple[int, list[str]]]:
    """Data rows with their line numbers; blank lines skipped, short/long rows refused."""
    for fields in reader:
        line = reader.line_num  # type: ignore[attr-defined]
        if not fields or (len(fields) == 1 and not fields[0].strip()):
            continue
        if len(fields) != width:
            raise UserError(f"{path}:{line}: expected {width} fields as in the header, got {len(fields)}")
        yield line, fields


def _read_csv(path: Path, text: str) -> list[_Row]:
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = next(reader, None)
        if header is None:
            raise UserError(f"{path}: empty file")
        cols = [h.strip() for h in header]
        duplicate = [name for i, name in enumerate(cols) if name in cols[:i]]
        if duplicate:
            raise UserError(f"{path}:1: duplicate column {duplicate[0]!r} (header: {','.join(cols)})")
        index = {name: i for i, name in enumerate(cols)}

        def need(names: tuple[str, ...], more: tuple[str, ...] = (), *, own: bool = False) -> list[int]:
            """The columns `names` (all required) of a header holding no column the format would drop
            (`more`: the format's other known ones; _check_names)."""
            missing = [n for n in names if n not in index]
            if missing:
                raise UserError(f"{path}:1: missing column {', '.join(missing)} (header: {','.join(cols)})")
            _check_names(f"{path}:1", cols, names + more, "column", own=own)
            return [index[n] for n in names]

        rows = _csv_rows(path, reader, len(cols))
        if "TIMESTAMP" in index:
            return _azure(path, rows, *need(_AZURE))
        if _VIDUR[0] in index or _VIDUR[1] in index:
            if "arrived_at" in index:  # Vidur's request traces carry it; read here, it would be dropped without a word
                raise UserError(f"{path}:1: column 'arrived_at' is not read (the Vidur form is lengths only): rename the "
                                "columns arrival_s,prompt_tokens,output_tokens for the generic form, or drop it and "
                                "give --rate")
            ip, iout = need(_VIDUR, _VIDUR_MORE)
            return [(line, None, _tokens(path, line, _VIDUR[0], r[ip]), _tokens(path, line, _VIDUR[1], r[iout]), NORMAL)
                    for line, r in rows]
        if any(n in index for n in _GENERIC):
            return _generic(path, rows, *need(_GENERIC, (_PRIORITY,), own=True), index.get(_PRIORITY))
        raise UserError(f"{path}:1: unknown trace format, header {','.join(cols)!r} not recognised; {_ACCEPTED}")
    except csv.Error as exc:  # e.g. a quote left open at the end of the file
        raise UserError(f"{path}:{reader.line_num}: malformed CSV ({exc})") from None


def _azure(path: Path, rows: Iterator[tuple[int, list[str]]], it: int, ip: int, io: int) -> list[_Row]:
    """Azure 2023: wall-clock timestamps with 7 fractional digits, parsed to exact integer nanoseconds."""
    days: dict[str, int] = {}
    out: list[_Row] = []
    first_ns: int | None = None
    for line, r in rows:
        stamp = r[it].strip()
        m = _AZURE_TS.fullmatch(stamp)
        try:
            if m is None:
                raise ValueError
            y, mo, d, hh, mi, ss, frac = m.groups()
            day = days.get(stamp[:10])
            if day is None:
                day = days[stamp[:10]] = datetime.date(int(y), int(mo), int(d)).toordinal()
            if int(hh) > 23 or int(mi) > 59 or int(ss) > 59:
                raise ValueError
        except ValueError:
            raise UserError(f"{path}:{line}: unparseable timestamp {stamp!r} (expected like 2023-11-16 18:17:03.9799600)") from None
        ns = ((day * 86400 + int(hh) * 3600 + int(mi) * 60 + int(ss)) * 10**9 + int((frac or "0").ljust(9, "0")))
        if first_ns is None:
            first_ns = ns
        out.append((line, (ns - first_ns) / 1e9, _tokens(path, line, _AZURE[1], r[ip]),
                    _tokens(path, line, _AZURE[2], r[io]), NORMAL))
    return out


def _generic(path: Path, rows: Iterator[tuple[int, list[str]]], ia: int, ip: int, io: int,
             iq: int | None) -> list[_Row]:
    out: list[_Row] = []
    for line, r in rows:
        try:
            t = float(r[ia])
        except ValueError:
            t = math.nan
        if not math.isfinite(t):
            raise UserError(f"{path}:{line}: arrival_s {r[ia].strip()!r} is not a finite number")
        if 1e11 <= abs(t) <= 1e19:  # seconds since 1970 are about 1.7e9, in ms 1.7e12, in ns 1.7e18
            raise UserError(f"{path}:{line}: arrival_s {t:.4g} is over 3,000 years: epoch milliseconds (or µs, ns)? "
                            "(arrival_s is in seconds)")
        priority = NORMAL
        if iq is not None:
            if r[iq].strip() not in ("0", "1"):
                raise UserError(f"{path}:{line}: priority must be 0 or 1, got {r[iq].strip()!r}")
            priority = HIGH if r[iq].strip() == "1" else NORMAL
        out.append((line, t, _tokens(path, line, "prompt_tokens", r[ip]),
                    _tokens(path, line, "output_tokens", r[io]), priority))
    return out


def _read_mooncake(path: Path, text: str) -> list[_Row]:
    """Mooncake FAST'25 JSONL (timestamp in ms; hash_ids per 512-token block) or the shared validation
    workload JSONL (arrival_time_ns; hash_ids per 16-token block, or derived from input_tok_ids in
    blocks as long: llumverify/files/prompt_hashes.py). hash_ids feed vllm-v1's prefix cache."""
    out: list[_Row] = []
    hashes: PromptHashes | None = None  # one per file: ids are numbered over the whole file
    kept: set[str] = set()  # keys a row carried that _check_names let through (checked once a file)
    for line, row in enumerate(text.split("\n"), start=1):
        if not row.strip():
            continue
        try:
            obj = json.loads(row, object_pairs_hook=unique_keys)
        except (ValueError, RecursionError) as e:  # JSONDecodeError, a 5,000-digit number, [[[[...
            raise UserError(f"{path}:{line}: malformed JSON ({getattr(e, 'msg', e)})") from None
        if not isinstance(obj, dict):
            raise UserError(f"{path}:{line}: expected a JSON object, got {type(obj).__name__}")
        if "arrival_time_ns" in obj:  # the shared validation workloads: ns, 16-token hash blocks
            keys, scale, block = ("arrival_time_ns", "input_toks", "output_toks"), 1e-9, 16
        else:
            keys, scale, block = _MOONCAKE, 1e-3, MOONCAKE_HASH_BLOCK
        missing = [k for k in keys if k not in obj]
        if missing:
            raise UserError(f"{path}:{line}: missing key {', '.join(missing)}")
        if extra := obj.keys() - kept - set(keys + _HASH_KEYS):
            _check_names(f"{path}:{line}", sorted(extra), keys + _HASH_KEYS, "key", own=False)
            kept |= extra
        ts = obj[keys[0]]
        if isinstance(ts, bool) or not isinstance(ts, (int, float)) or not math.isfinite(ts):
            raise UserError(f"{path}:{line}: unparseable {keys[0]} {ts!r}")
        if abs(ts) > 1e15:  # past 1e15 ms (Mooncake) or ns, a number of another kind; converted, it would overflow
            raise UserError(f"{path}:{line}: {keys[0]} {ts:.4g} is out of range: at most 1e15 "
                            f"{'ns' if scale == 1e-9 else 'ms'} (times from the trace's start, not the epoch)")
        if scale == 1e-9:  # a validation workload: whole ns (validate reads the same file so)
            whole_ns(ts, f"{path}:{line}")
        prompt = _tokens(path, line, keys[1], obj[keys[1]])
        if hashes is None:
            hashes = PromptHashes(block)
        elif hashes.block != block:
            raise UserError(f"{path}:{line}: a row with {keys[0]} in a file whose first row has another format")
        ids = hashes.of(obj, f"{path}:{line}", prompt)
        output = _tokens(path, line, keys[2], obj[keys[2]])
        more = hashes.output_of(obj, f"{path}:{line}", prompt, output, ids)
        out.append((line, ts * scale, prompt, output, NORMAL, ids, block if ids or more else 0, more))
    if not out and not text:
        raise UserError(f"{path}: empty file")
    return out
