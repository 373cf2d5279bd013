"""Tidy results rows, per-point aggregates across seeds (mean and a 95 % t interval), and writers.

results.csv and results.json are byte-identical for identical inputs: rows in task-key order,
sorted JSON keys, floats written as repr (exact), no wall-clock times (those go to timing.json).
Each file is written whole or not at all (temp file + rename). Metric columns are the registered
metrics (llumverify/settings/metrics_registry.py), each aggregated over seeds as the registry says; both
JSON files carry `schema_version`.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from llumverify.settings import metrics_registry as registry
from llumverify.errors import UserError
from llumverify.files.inputs import not_a_loop
from llumverify.files.paths import read_text, write_atomic

if TYPE_CHECKING:
    from llumverify.study.experiment import Experiment
    from llumverify.study.tasks import TaskResult

ID_COLUMNS = ("workload", "policy", "seed")
SETTING_COLUMNS = ("lengths", "trace", "arrival", "rate", "cv", "rate_scale", "high_priority_frac", "spread", "stream")
# results.json and timing.json layout: 2 added schema_version; a file without it is version 1 (same layout).
SCHEMA_VERSION = 2

# Two-sided 95 % quantiles of Student's t for 1..30 degrees of freedom (standard tables, 9 decimals).
_T975 = (12.706204736, 4.302652730, 3.182446305, 2.776445105, 2.570581836, 2.446911851, 2.364624252,
         2.306004135, 2.262157163, 2.228138852, 2.200985160, 2.178812830, 2.160368656, 2.144786688,
         2.131449546, 2.119905299, 2.109815578, 2.100922040, 2.093024054, 2.085963447, 2.079613845,
         2.073873068, 2.068657610, 2.063898562, 2.059538553, 2.055529439, 2.051830516, 2.048407142,
         2.045229642, 2.042272456)
_Z975 = 1.959963984540054
_PACK_LEN = 16  # lists of numbers longer than this are written on one line


def t975(df: int) -> float:
    """Student's t 0.975 quantile: the table up to 30 df, then the Cornish-Fisher expansion in 1/df.

    The expansion (four terms around the normal quantile) is within 4e-8 of the exact value from
    31 df on, far below the noise of any confidence interval here; scipy is not needed.
    """
    if df < 1:
        raise ValueError(f"degrees of freedom must be >= 1, got {df}")
    if df <= len(_T975):
        return _T975[df - 1]
    z, v = _Z975, float(df)
    return (z + (z**3 + z) / (4 * v) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * v**2)
            + (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / (384 * v**3)
            + (79 * z**9 + 776 * z**7 + 1482 * z**5 - 1920 * z**3 - 945 * z) / (92160 * v**4))


def mean_ci(values: Sequence[float]) -> dict[str, float | int | None]:
    """Mean and the half-width of its 95 % t interval (None for one value or any non-finite value)."""
    n = len(values)
    if n == 0 or not all(math.isfinite(v) for v in values):
        return {"n": n, "mean": None, "ci95": None}
    mean = math.fsum(values) / n
    if n == 1:
        return {"n": 1, "mean": mean, "ci95": None}
    sd = math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (n - 1))
    return {"n": n, "mean": mean, "ci95": t975(n - 1) * sd / math.sqrt(n)}


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def rows_of(results: Sequence[TaskResult]) -> list[dict[str, object]]:
    """One tidy row per run: ids, the workload's settings, config settings, every summary metric.

    Config columns are the "section.field" settings any workload sets or any grid sweeps, each
    with the value that run used. Derived: migrations_per_s = migrations / makespan_s when the
    summary counts migrations.
    """
    config_keys = sorted({k for res in results
                          for k, _ in (*res.task.point.settings, *res.task.point.workload.config) if "." in k})
    rows = []
    for res in results:
        point = res.task.point
        row: dict[str, object] = {"workload": point.workload.name, "policy": res.task.policy, "seed": res.task.seed}
        row.update(point.workload.settings())
        row.update({k: _config_value(point.config, k) for k in config_keys})
        row.update(res.summary)
        if "migrations" in res.summary and "migrations_per_s" not in res.summary:
            makespan = float(res.summary.get("makespan_s", 0.0))  # type: ignore[arg-type]
            row["migrations_per_s"] = float(res.summary["migrations"]) / makespan if makespan > 0 else 0.0  # type: ignore[arg-type]
        rows.append(row)
    return rows


def _config_value(config: object, key: str) -> object:
    """The value of "section.field" ("sim.field": a SimConfig scalar) in a SimConfig."""
    section, field = key.split(".", 1)
    return getattr(config if section == "sim" else getattr(config, section), field)


def columns_of(rows: Sequence[dict[str, object]]) -> list[str]:
    """ids, workload settings, config settings (sorted), then metrics (sorted).

    Every other key of a row is a summary metric and must be registered (UnknownMetric otherwise:
    a metric nobody defined is not silently tabulated or dropped); a metric may be None in some
    runs (e.g. a downtime in a run without migrations).
    """
    fixed = (*ID_COLUMNS, *SETTING_COLUMNS)
    rest = {k for row in rows for k in row if k not in fixed}
    config = sorted(k for k in rest if "." in k)
    metrics = sorted(registry.get(k).name for k in rest if "." not in k)
    return [*fixed, *config, *metrics]


def metric_names(rows: Sequence[dict[str, object]]) -> list[str]:
    """The numeric summary metrics present in the rows."""
    return [c for c in columns_of(rows) if c not in (*ID_COLUMNS, *SETTING_COLUMNS) and "." not in c]


def aggregate(rows: Sequence[dict[str, object]]) -> list[dict[str, object]]:
    """Per point and policy (rows in key order, seeds adjacent): every metric over seeds as its
    registry entry says ("mean": n, mean and ci95).

    A point is its workload, settings and config columns. Seeds where a metric is missing or None
    are left out of its statistics (n counts the seeds that have it).
    """
    columns = columns_of(rows)
    metrics = metric_names(rows)
    identity = [c for c in columns if c != "seed" and c not in metrics]
    groups: dict[tuple[object, ...], list[dict[str, object]]] = {}
    for row in rows:
        key = tuple((k, _jsonable(row.get(k))) for k in identity)
        groups.setdefault(key, []).append(row)
    out = []
    for key, members in groups.items():
        agg: dict[str, object] = dict(key)
        agg["seeds"] = [m["seed"] for m in members]
        agg["metrics"] = {m: _OVER_SEEDS[registry.get(m).over_seeds](
                              [float(r[m]) for r in members if _number(r.get(m))])  # type: ignore[arg-type]
                          for m in metrics}
        out.append(agg)
    return out


# registry.AGGREGATIONS -> how a metric's per-seed values combine
_OVER_SEEDS = {"mean": mean_ci}


def _jsonable(value: object) -> object:
    """NaN and infinities are not JSON: they become null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value


def _cell(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    return str(value)


def dumps(doc: object) -> str:
    """Canonical JSON: sorted keys, two-space indent, repr floats, null for non-finite, final newline.

    Long lists of numbers (time series) go on one line each: one number per line would double
    the size of a results.json that carries them.
    """
    packed: list[str] = []

    def pack(value: object) -> object:
        if isinstance(value, dict):
            return {k: pack(v) for k, v in value.items()}
        if isinstance(value, list):
            if len(value) > _PACK_LEN and all(v is None or _number(v) for v in value):
                packed.append(json.dumps(value, separators=(",", ":"), allow_nan=False))
                return f"\0{len(packed) - 1}\0"
            return [pack(v) for v in value]
        return value

    text = json.dumps(pack(_jsonable(doc)), indent=2, sort_keys=True, allow_nan=False)
    return re.sub(r'"\\u0000(\d+)\\u0000"', lambda m: packed[int(m.group(1))], text) + "\n"


def write_results(out: Path, exp: Experiment, results: Sequence[TaskResult], total_wall_s: float) -> None:
    """out/results.csv, out/results.json (rows, aggregates, config, time series) and out/timing.json."""
    out.mkdir(parents=True, exist_ok=True)
    rows = rows_of(results)
    columns = columns_of(rows)
    table = io.StringIO()
    writer = csv.writer(table, lineterminator="\n")
    writer.writerow(columns)
    writer.writerows([_cell(row.get(c)) for c in columns] for row in rows)
    write_atomic(out / "results.csv", table.getvalue())
    series = [{"workload": r.task.point.workload.name, "policy": r.task.policy, "seed": r.task.seed,
               "settings": dict(r.task.point.settings), "series": r.timeseries}
              for r in results if r.timeseries]
    doc = {"schema_version": SCHEMA_VERSION, "experiment": exp.describe(), "columns": columns, "rows": rows,
           "aggregates": aggregate(rows), "timeseries": series}
    write_atomic(out / "results.json", dumps(doc))
    timing = {"schema_version": SCHEMA_VERSION, "total_wall_s": total_wall_s,
              "runs": [{"label": r.task.label, "wall_s": r.wall_s} for r in results]}
    write_atomic(out / "timing.json", dumps(timing))


class _Each:
    """Schema: a dict whose every value matches `schema` (any keys)."""

    def __init__(self, schema: object) -> None:
        self.schema = schema


_NUM = (int, float)
_OPT_NUM = (int, float, type(None))
_OPT_STR = (str, type(None))
# What `llumverify report` reads from results.json: {key: schema}, [item schema], _Each(value schema) or types.
RESULTS_SCHEMA: dict[str, object] = {
    "experiment": {"name": str, "policies": [str], "seeds": [int], "requests": int, "grid": dict,
                   "config": {"cluster": {"num_instances": int}},
                   "workloads": [{"name": str, "grid": dict, "trace": _OPT_STR, "lengths": _OPT_STR, "arrival": str,
                                  "rate": _OPT_NUM, "cv": _NUM, "rate_scale": _NUM, "requests": (int, type(None)),
                                  "seeds": (list, type(None)), "config": dict}]},
    "aggregates": [{"workload": str, "policy": str, "seeds": list,
                    "metrics": _Each({"n": int, "mean": _OPT_NUM, "ci95": _OPT_NUM})}],
}
# One run's time series: name -> its samples (None: no sample).
SERIES_SCHEMA = _Each([_OPT_NUM])
# results.json's optional time series (runs that kept them).
TIMESERIES_SCHEMA = [{"workload": str, "policy": str, "seed": int, "settings": dict, "series": SERIES_SCHEMA}]
# One run saved in a sweep's checkpoint (llumverify/study/checkpoint.py), as it writes it: its
# timeseries, when not None, is a SERIES_SCHEMA; which summary keys are allowed is the caller's.
POINT_SCHEMA: dict[str, object] = {"key": list, "label": str, "summary": _Each(_OPT_NUM),
                                   "timeseries": (dict, type(None)), "wall_s": _NUM}


class SchemaMismatch(ValueError):
    """Where a document departs from its schema (the caller names the file)."""


def load_results(folder: Path) -> dict[str, object]:
    """results.json of a results folder, checked against RESULTS_SCHEMA (UserError naming the first gap)."""
    folder = not_a_loop(Path(folder))
    if folder.exists() and not folder.is_dir():  # a file, or a device such as /dev/null
        raise UserError(f"{folder}: {'is a file' if folder.is_file() else 'is not a folder'}, expected a results "
                        "folder (holding results.json)")
    if not folder.exists():
        raise UserError(f"{folder}: results folder not found (run `llumverify sweep` first)")
    path = folder / "results.json"
    if not path.exists():
        raise UserError(f"{path}: not found (run `llumverify sweep` first)")
    try:
        doc = json.loads(read_text(path, "results.json"))
    except (ValueError, RecursionError) as exc:
        raise UserError(f"{path}: invalid JSON: {exc}") from None
    _check(path, doc, RESULTS_SCHEMA, "")
    version = doc.get("schema_version", 1)
    if isinstance(version, bool) or not isinstance(version, int) or not 1 <= version <= SCHEMA_VERSION:
        raise UserError(f"{path}: schema_version {version!r} is not one this llumverify reads "
                        f"(1 to {SCHEMA_VERSION}: a newer llumverify wrote it?)")
    _check(path, doc.get("timeseries", []), TIMESERIES_SCHEMA, "timeseries")
    exp = doc["experiment"]
    swept = {w["name"]: [*w["grid"], *exp["grid"]] for w in exp["workloads"]}
    grids = {w["name"]: {**exp["grid"], **w["grid"]} for w in exp["workloads"]}
    for kind in ("aggregates", "timeseries"):
        for i, entry in enumerate(doc.get(kind, [])):
            if entry["policy"] not in exp["policies"]:
                raise UserError(f"{path}: {kind}[{i}].policy {entry['policy']!r} is not in experiment.policies")
            if entry["workload"] not in swept:  # the report draws experiment.workloads only: it would vanish
                raise UserError(f"{path}: {kind}[{i}].workload {entry['workload']!r} is not in experiment.workloads")
            where = entry if kind == "aggregates" else entry["settings"]
            missing = [k for k in swept[entry["workload"]] if k not in where]
            if missing:
                raise UserError(f"{path}: {kind}[{i}] lacks the swept setting {missing[0]!r}")
            off = [k for k in swept[entry["workload"]] if isinstance(grids[entry["workload"]][k], list)
                   and where[k] not in grids[entry["workload"]][k]]
            if off:
                raise UserError(f"{path}: {kind}[{i}].{off[0]} {where[off[0]]!r} is not one of the values swept "
                                f"({grids[entry['workload']][off[0]]!r})")
    for i, entry in enumerate(doc.get("timeseries", [])):  # each sample is one time: t_s and every series align
        lengths = {k: len(v) for k, v in entry["series"].items()}
        odd = next((k for k, n in lengths.items() if n != lengths.get("t_s", n)), None)
        if odd is not None:
            raise UserError(f"{path}: timeseries[{i}].series.{odd} has {lengths[odd]} samples, t_s {lengths['t_s']}")
    if not doc["aggregates"]:
        raise UserError(f"{path}: aggregates is empty: no run to report (not a results.json written by "
                        "`llumverify sweep`)")
    points: dict[tuple[tuple[str, str], ...], int] = {}
    for i, agg in enumerate(doc["aggregates"]):
        point = tuple(sorted((k, repr(v)) for k, v in agg.items() if k not in ("metrics", "seeds")))
        if point in points:
            raise UserError(f"{path}: aggregates[{i}] repeats aggregates[{points[point]}]'s point (workload "
                            f"{agg['workload']!r}, policy {agg['policy']!r}): which one is the result?")
        points[point] = i
        for name, stats in agg["metrics"].items():
            _check_stats(path, f"aggregates[{i}].metrics.{name}", name, stats, len(agg["seeds"]))
    return doc


def _check_stats(path: Path, where: str, name: str, stats: dict[str, object], seeds: int) -> None:
    """A metric's n, mean and ci95 as a sweep writes them: n the seeds that have a value (0 to the point's seeds),
    finite (a run without a value writes null), ci95 >= 0, and the mean >= 0 unless the metric's unit can be
    negative (a threshold); a report would plot anything else as nonsense."""
    if not 0 <= stats["n"] <= seeds:  # type: ignore[operator]
        raise UserError(f"{path}: {where}.n must be an integer in [0, {seeds}] (the seeds that have a value), "
                        f"got {stats['n']!r}")
    if stats["mean"] is not None and (problem := metric_value_problem(name, stats["mean"])):  # type: ignore[arg-type]
        raise UserError(f"{path}: {where}.mean {problem}")
    ci95 = stats["ci95"]
    if ci95 is not None and (not math.isfinite(ci95) or ci95 < 0):  # type: ignore[arg-type, operator]
        raise UserError(f"{path}: {where}.ci95 must be a finite number >= 0 or null, got {ci95!r}")


def metric_value_problem(name: str, value: float) -> str:
    """What is wrong with `value` as metric `name`'s (one run's, or a mean over seeds), '' if nothing: it must be
    finite, >= 0 unless the metric's unit can be negative (a threshold), and at most its bound (a share is stored as a
    fraction). Shared by results.json's aggregates and a sweep's saved runs (checkpoint.py)."""
    signed = name in registry.METRICS and registry.get(name).unit == "blocks/request"
    if not math.isfinite(value) or (not signed and value < 0):
        return f"must be a finite number{'' if signed else ' >= 0'} or null, got {value!r}"
    high = registry.get(name).bounds[1] if name in registry.METRICS else math.inf
    if value > high:
        return f"must be at most {high:g} (a share, stored as a fraction), got {value!r}"
    return ""


def _check(path: Path, value: object, schema: object, where: str) -> None:
    """UserError naming the first place `value` departs from `schema` (not written by `llumverify sweep`)."""
    try:
        check_schema(value, schema, where)
    except SchemaMismatch as exc:
        raise UserError(f"{path}: {exc} (not a results.json written by `llumverify sweep`)") from None


def check_schema(value: object, schema: object, where: str = "") -> None:
    """SchemaMismatch naming the first place `value` departs from `schema`: one checker for every
    file the study layer reads back (results.json, a checkpoint's saved runs)."""
    if isinstance(schema, dict):
        if not isinstance(value, dict):
            raise SchemaMismatch(f"{where or 'the document'} must be an object, got {type(value).__name__}")
        for key, sub in schema.items():
            full = f"{where}.{key}" if where else key
            if key not in value:
                raise SchemaMismatch(f"missing key {full}")
            check_schema(value[key], sub, full)
    elif isinstance(schema, list):
        if not isinstance(value, list):
            raise SchemaMismatch(f"{where} must be a list, got {type(value).__name__}")
        for i, item in enumerate(value):
            check_schema(item, schema[0], f"{where}[{i}]")
    elif isinstance(schema, _Each):
        if not isinstance(value, dict):
            raise SchemaMismatch(f"{where} must be an object, got {type(value).__name__}")
        for key, item in value.items():
            check_schema(item, schema.schema, f"{where}.{key}")
    elif isinstance(value, bool) or not isinstance(value, schema):  # type: ignore[arg-type]
        raise SchemaMismatch(f"{where} has the wrong type ({type(value).__name__} {value!r:.40})")
