"""A GPU the catalog does not hold, read from a TOML file of a catalog entry's keys.

`--gpu my-gpu.toml` (or hardware.gpu) prices a GPU no catalog lists from its datasheet numbers,
written as one sim/catalog/gpus.toml [[gpu]] entry (at the top level, or as the file's one [[gpu]]
table). Every number is bounded to what a GPU can be, so a units slip (989 for 989e12 FLOP/s) is a
one-line error naming the key, not a simulation that never ends.
"""

from __future__ import annotations

import re
from pathlib import Path

from llumverify.errors import UserError
from llumverify.files.paths import read_toml

# key -> (lowest, highest, what the number is): datasheet units, so e12 / e9 slips are caught
NUMBERS = {"flops": (1e12, 1e17, "peak dense BF16/FP16 tensor FLOP/s, e.g. 989.4e12"),
           "mem_bw": (1e10, 1e14, "memory bandwidth in bytes/s, e.g. 3.35e12"),
           "memory_bytes": (1 << 30, 1 << 44, "memory size in bytes, e.g. 85899345920 for 80 GiB")}
TEXT = ("name", "memory_type", "interconnect")
OPTIONAL = ("arch", "visible_memory_bytes", "inline_ecc", "sms", "clock_ghz", "source")
ARCH = re.compile(r"sm_\d{2,3}[a-z]?|gfx\d[0-9a-f]{2,3}")  # sm_90, sm_90a, sm_120; gfx90a, gfx942, gfx1100


def read_gpu_file(path: Path) -> dict:
    """The catalog GPU fields (sim/catalog.py GPU) a GPU file holds, checked key by key; the catalog
    checks memory_type and interconnect against its own entries."""
    where = f"GPU file {path}"
    doc = read_toml(path, "GPU file")
    entry = doc
    if "gpu" in doc:  # the catalog's form: one [[gpu]] table and nothing beside it
        tables = doc["gpu"]
        if len(doc) > 1 or not isinstance(tables, list) or len(tables) != 1 or not isinstance(tables[0], dict):
            raise UserError(f"{where}: expected one GPU's keys, at the top level or as the file's one [[gpu]] table")
        entry = tables[0]
    unknown = sorted(set(entry) - {*NUMBERS, *TEXT, *OPTIONAL})
    if unknown:
        raise UserError(f"{where}: unknown keys {unknown} (a GPU's: {', '.join((*TEXT, *NUMBERS, *OPTIONAL))})")
    for key in (*TEXT, "source", "arch"):
        value = entry.get(key)
        if value is None and key in TEXT:
            raise UserError(f"{where}: {key} is missing")
        if value is not None and not (isinstance(value, str) and value.strip() and value.isprintable()):
            raise UserError(f"{where}: {key} must be a name, got {value!r}")  # on one line: errors name the GPU
    if "arch" in entry and not ARCH.fullmatch(entry["arch"]):
        raise UserError(f"{where}: arch must be a CUDA sm_XY or an AMD gfx target, got {entry['arch']!r}")
    if "inline_ecc" in entry:
        if not isinstance(entry["inline_ecc"], bool):
            raise UserError(f"{where}: inline_ecc must be true or false, got {entry['inline_ecc']!r}")
        if entry["inline_ecc"] and str(entry["memory_type"]).upper().startswith("HBM"):
            raise UserError(f"{where}: inline_ecc is for GDDR memory that stores its own ECC bits (HBM's ECC is "
                            f"side-band), got memory_type {entry['memory_type']!r}")
    for key, (lo, hi, what) in NUMBERS.items():
        entry[key] = _number(entry.get(key), key, lo, hi, what, where, integer=key == "memory_bytes")
    if ("sms" in entry) != ("clock_ghz" in entry):
        raise UserError(f"{where}: sms and clock_ghz go together (the SM count and its maximum boost clock), got "
                        f"only {'sms' if 'sms' in entry else 'clock_ghz'}")
    if "sms" in entry:
        entry["sms"] = _number(entry["sms"], "sms", 1, 1024, "streaming multiprocessors or compute units", where, True)
        entry["clock_ghz"] = _number(entry["clock_ghz"], "clock_ghz", 0.1, 5.0, "maximum boost clock in GHz, e.g. 1.98",
                                     where, False)
    if "visible_memory_bytes" in entry:
        entry["visible_memory_bytes"] = _number(entry["visible_memory_bytes"], "visible_memory_bytes", 1 << 30,
                                                entry["memory_bytes"], "bytes, at most memory_bytes", where, True)
    return {"source": where, **entry, "config_file": str(path)}


def _number(value: object, key: str, lo: float, hi: float, what: str, where: str, integer: bool) -> float | int:
    if value is None:
        raise UserError(f"{where}: {key} is missing ({what})")
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not lo <= value <= hi \
            or (integer and value != int(value)):
        raise UserError(f"{where}: {key} must be {'an integer' if integer else 'a number'} in [{_bound(lo, integer)}, "
                        f"{_bound(hi, integer)}] ({what}), got {value!r}")
    return int(value) if integer else float(value)


def _bound(x: float, integer: bool) -> str:
    """A bound as a message says it: a small integer whole (1,024), anything else to 3 digits (1.07e+09)."""
    return f"{int(x):,}" if integer and x < 1e6 else f"{x:.3g}"
