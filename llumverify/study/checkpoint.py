"""A sweep's results folder doubles as its checkpoint: every finished run is saved at once, and the
same command on a partly filled folder runs only what is missing.

While a sweep is under way its folder holds
  manifest.json   {"format", "hash", "fingerprint", "runs"}: what the runs depend on, and its sha256;
  points/K.json   one finished run (K: its task key joined by "-"): summary, time series, wall time;
  lock, PARTIAL   the folder's writer and the marker of an unfinished result (llumverify/files/outdir.py):
                  a second sweep on the same folder is refused (it would tidy away the first one's files).
All go once results.csv / results.json are written. The manifest keeps the whole fingerprint, not
only its hash, so that refusing to resume a changed experiment can say what changed.

Points are JSON (exact for floats, ints, None, nan), each written to a temp file and renamed, so a
kill at any moment leaves whole points only. The final files are built from the saved points in
every run, resumed or not: an interrupted-and-resumed sweep writes the same bytes as one that was not.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import stat
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from types import TracebackType

from llumverify.files import interrupt
from llumverify.errors import UserError
from llumverify.study.experiment import Experiment
from llumverify.files.outdir import OutputDir
from llumverify.files.paths import fresh_dir, write_atomic
from llumverify.settings.metrics_registry import UnknownMetric
from llumverify.study.results import POINT_SCHEMA, SERIES_SCHEMA, check_schema, dumps, metric_value_problem
from llumverify.study.tasks import Task, TaskResult

FORMAT = 1
MANIFEST = "manifest.json"
POINTS = "points"


def fingerprint(exp: Experiment) -> dict[str, object]:
    """Everything a run's result depends on: the experiment without its prose, each trace's sha256 and,
    when a hardware setting names files, theirs (`files`: absent otherwise, so older manifests still match)."""
    doc = {k: v for k, v in exp.describe().items() if k not in ("name", "description", "finding")}
    doc["traces"] = {w.trace: hashlib.sha256(w.trace_path.read_bytes()).hexdigest()
                     for w in exp.workloads if w.trace is not None and w.trace_path is not None}
    files = hardware_files(exp)
    if files:
        doc["files"] = files
    return json.loads(dumps(doc))  # as the manifest will hold it: lists, not tuples


HARDWARE_PATHS = ("gpu", "model", "profile", "cost_file")  # HardwareConfig settings that may name files


def hardware_files(exp: Experiment) -> dict[str, str]:
    """"hardware.SETTING=VALUE" -> the sha256 of the files it names, for every hardware setting of `exp` (top level,
    workloads, grids) that names files: a GPU file, a model's config.json (and the quantisation files beside
    it), a profile folder's meta.yaml and tp1/*.csv, a step-cost file (and the GPU and model files it names).
    The runs read them as they read a trace, so a resumed sweep must not mix runs priced from two versions."""
    values = {(f, getattr(exp.config.hardware, f)) for f in HARDWARE_PATHS}
    for w in exp.workloads:
        values |= {(k.split(".", 1)[1], v) for k, v in w.config if k.split(".", 1)[0] == "hardware"}
    for k, vs in (*exp.grid, *(g for w in exp.workloads for g in w.grid)):
        if k.split(".", 1)[0] == "hardware":
            values |= {(k.split(".", 1)[1], v) for v in vs}
    out = {}
    for field, value in sorted((f, v) for f, v in values if f in HARDWARE_PATHS and isinstance(v, str) and v):
        try:
            paths = _named_files(field, value)
        except UserError:  # a step-cost file that does not load: the runs' checks refuse it, naming the setting
            paths = [Path(value)]
        if paths:
            digest = hashlib.sha256()
            for path in paths:
                digest.update(f"{path}\0".encode())
                try:
                    _hash_file(digest.update, path)
                except OSError as exc:  # read again by the runs, which say what is wrong
                    digest.update(f"unreadable: {exc.strerror}".encode())
            out[f"hardware.{field}={value}"] = digest.hexdigest()
    return out


def _hash_file(update: Callable[[bytes], object], path: Path) -> None:
    """`path`'s bytes to `update` (a digest's), read in blocks, if it is a regular file: a FIFO would block the
    sweep before any check and a device (a GPU file linked to /dev/zero) fill the memory; the runs' checks name them."""
    if not stat.S_ISREG(os.stat(path).st_mode):
        update(b"not a regular file")
        return
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            update(block)


def _named_files(field: str, value: str) -> list[Path]:
    """The files a hardware setting's value names (none for a catalog name), as the runs resolve them."""
    from llumverify.files.paths import user_path

    if field == "gpu":
        from llumverify.sim.catalog import gpu_file_path

        path = gpu_file_path(value)
        return [] if path is None else [path]
    if field == "model":
        from llumverify.sim.hf_config import config_path
        from llumverify.sim.hf_quant import SIDE_FILES

        config = config_path(value)
        if config is None:
            return []
        return [config, *(config.parent / name for name, _ in SIDE_FILES if (config.parent / name).is_file())]
    if field == "profile":
        folder = user_path(value)
        return [folder / "meta.yaml", *sorted((folder / "tp1").glob("*.csv"))]
    from llumverify.sim.stepcost import load_step_cost

    cost = load_step_cost(user_path(value))  # the GPU and model it names may be files too
    return [user_path(value), *_named_files("gpu", cost.gpu), *_named_files("model", cost.model)]


def _key_name(task: Task) -> str:
    return "-".join(map(str, task.key))


class Checkpoint:
    """The saved runs of one sweep in `folder` (see the module doc). Open with `Checkpoint.open`,
    then `with` it: it holds the folder's lock and, on success, removes the checkpoint."""

    def __init__(self, folder: Path, fp: dict[str, object], runs: int, resume: bool, claim: OutputDir,
                 check_summary: Callable[[Iterable[str]], None] | None = None) -> None:
        self.folder = folder
        self._check_summary = check_summary
        self._claim = claim
        self.points = folder / POINTS
        self._fp = fp
        self._runs = runs
        self.resume = resume

    @classmethod
    def open(cls, out: Path, exp: Experiment, runs: int, force: bool,
             extra: dict[str, object] | None = None,
             check_summary: Callable[[Iterable[str]], None] | None = None) -> Checkpoint:
        """Check `out` before any work and decide: a new sweep, or resume the partial one there.

        Writes nothing (see `begin`). Refuses, naming why: a folder holding anything but a partial
        run of this very experiment (unless --force, which starts over), an unreadable manifest.
        `extra`: settings outside the experiment file that the runs depend on (goodput's --duration).
        `check_summary`: raises UnknownMetric for a saved summary's keys that no run of this kind
        reports (metrics_registry.check_summary for a sweep's runs), so a saved run is never used
        unchecked.
        """
        claim = OutputDir(out, "--out", force, staged=False, fresh=False)
        fp = {**fingerprint(exp), **json.loads(dumps(extra or {}))}  # extra: what else the runs depend on
        manifest = out / MANIFEST
        if not force and manifest.is_file():
            old = _read_manifest(manifest)
            if old["hash"] != _digest(fp):
                done = len(list((out / POINTS).glob("*.json")))
                if "files" in fp and old["hash"] == _digest({k: v for k, v in fp.items() if k != "files"}):
                    raise UserError(f"--out {out}: holds a partial sweep started by an older llumverify, which did not "
                                    f"record the files its hardware settings name ({', '.join(fp['files'])}): whether "
                                    f"they changed since is unknown; use --force to discard its {done} finished runs, "
                                    "or give another --out")
                raise UserError(f"--out {out}: holds a partial sweep of a different experiment "
                                f"({', '.join(_changes(old['fingerprint'], fp))} changed since it started); "
                                f"use --force to discard its {done} finished runs, or give another --out")
            return cls(out, fp, runs, resume=True, claim=claim, check_summary=check_summary)
        fresh_dir(out, "--out", force)
        return cls(out, fp, runs, resume=False, claim=claim, check_summary=check_summary)

    def __enter__(self) -> Checkpoint:
        """Take the folder's lock, then create (or, resuming, tidy) the checkpoint: manifest, points
        folder, no stale temp files."""
        self._claim.__enter__()
        try:
            self._begin()
            interrupt.keep(f"the finished runs are saved in {self.folder}: run the same command to resume")
        except BaseException as exc:
            self._claim.__exit__(type(exc), exc, exc.__traceback__)
            raise
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        """Finished: the final files are written, the checkpoint is no longer needed. Either way the
        lock goes; an unfinished sweep's points stay for the resume."""
        try:
            if kind is None:
                shutil.rmtree(self.points)
                (self.folder / MANIFEST).unlink()
                self._claim.commit()
        finally:
            self._claim.__exit__(kind, exc, tb)

    def _begin(self) -> None:
        if self.resume:
            self.points.mkdir(exist_ok=True)
            for tmp in self.points.glob(".*.tmp"):  # a run killed mid-write
                tmp.unlink()
            return
        if self.points.is_dir():  # --force over an earlier sweep: its points are not ours
            shutil.rmtree(self.points)
        self.points.mkdir(parents=True)
        write_atomic(self.folder / MANIFEST, dumps({"format": FORMAT, "hash": _digest(self._fp),
                                                     "fingerprint": self._fp, "runs": self._runs}))

    def done(self, todo: Sequence[Task]) -> set[tuple[int, ...]]:
        """Keys of the tasks whose run is saved, each point read once now so a damaged one stops the
        sweep before any run rather than after the last."""
        return {self._read(t).task.key for t in todo if (self.points / f"{_key_name(t)}.json").is_file()}

    def save(self, result: TaskResult) -> None:
        """Save one finished run (atomically)."""
        doc = {"key": list(result.task.key), "label": result.task.label, "summary": result.summary,
               "timeseries": result.timeseries, "wall_s": result.wall_s}
        write_atomic(self.points / f"{_key_name(result.task)}.json", json.dumps(doc))

    def load(self, todo: Sequence[Task]) -> list[TaskResult]:
        """Every task's saved run, in task order."""
        return [self._read(task) for task in todo]

    def _read(self, task: Task) -> TaskResult:
        """One saved run, checked to be what `save` writes (UserError naming a damaged point file
        and its field): a damaged one would crash the results writer or go into the results."""
        path = self.points / f"{_key_name(task)}.json"
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
            check_schema(doc, POINT_SCHEMA)
            if doc["timeseries"] is not None:
                check_schema(doc["timeseries"], SERIES_SCHEMA, "timeseries")
            if doc["label"] != task.label:
                raise ValueError(f"it holds {doc['label']!r}, not {task.label!r}")
            if doc["key"] != list(task.key):
                raise ValueError(f"key {doc['key']!r} is not this run's {list(task.key)!r}")
            if self._check_summary is not None:
                try:
                    self._check_summary(doc["summary"])
                except UnknownMetric as exc:
                    raise ValueError(f"summary: {exc}") from None
            if not math.isfinite(doc["wall_s"]) or doc["wall_s"] < 0:  # timing.json adds them up
                raise ValueError(f"wall_s must be a finite number of seconds >= 0, got {doc['wall_s']!r}")
            summary = doc["summary"]
            bad = next((k for k, v in summary.items() if v is not None and metric_value_problem(k, v)), None)
            if bad is not None:
                raise ValueError(f"summary.{bad} {metric_value_problem(bad, summary[bad])}")
            if {"requests", "finished", "rejected", "failed"} <= summary.keys() and summary["requests"] != \
                    summary["finished"] + summary["rejected"] + summary["failed"]:  # every request ends once
                raise ValueError(f"summary: finished {summary['finished']!r} + rejected {summary['rejected']!r} + "
                                 f"failed {summary['failed']!r} is not its requests {summary['requests']!r}")
            return TaskResult(task, doc["summary"], doc["timeseries"], doc["wall_s"])
        except (OSError, ValueError, KeyError, TypeError, RecursionError) as exc:
            raise UserError(f"{path}: damaged point file ({exc}); delete it and run the same command "
                            "to redo that run") from None



def _digest(fp: dict[str, object]) -> str:
    return hashlib.sha256(dumps(fp).encode()).hexdigest()


def _read_manifest(path: Path) -> dict[str, object]:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        if not (isinstance(doc, dict) and doc.get("format") == FORMAT
                and isinstance(doc.get("hash"), str) and isinstance(doc.get("fingerprint"), dict)):
            raise ValueError(f"not a format-{FORMAT} sweep manifest")
    except (OSError, ValueError) as exc:
        raise UserError(f"{path}: unreadable sweep manifest ({exc}); use --force to start the sweep over") from None
    return doc


def _changes(old: dict[str, object], new: dict[str, object]) -> list[str]:
    """Which parts of a fingerprint differ: top-level keys, and a trace by name when its contents did."""
    changed = [k for k in sorted({*old, *new}) if k not in ("traces", "files") and old.get(k) != new.get(k)]
    for part, what in (("traces", "trace"), ("files", "the files of")):
        old_files, new_files = old.get(part) or {}, new.get(part) or {}
        changed += [f"{what} {t}" for t in sorted({*old_files, *new_files})  # type: ignore[misc]
                    if old_files.get(t) != new_files.get(t)]  # type: ignore[union-attr]
    return changed or ["the fingerprint's format"]
