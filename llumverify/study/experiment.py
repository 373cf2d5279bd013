"""Experiment files (TOML) -> validated, frozen `Experiment` values.

An experiment names its workloads, policies, seeds and cluster settings, plus a `[grid]` of
settings to sweep. Everything is checked when the file is read, so a sweep never dies an hour in
on a typo: every error is a UserError naming the file and the key (docs/experiments.md).
"""

from __future__ import annotations

import dataclasses
import os
import re
import string
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from llumverify.settings import metrics_registry as registry
from llumverify.settings.config import STEP_COST_SOURCES, Setting, SettingError, SimConfig, setting, settings_of
from llumverify.errors import UserError, brief
from llumverify.files.outdir import name_problem
from llumverify.files.inputs import MAX_SETTINGS_BYTES, not_a_loop, regular_file
from llumverify.files.paths import read_text
from llumverify.scheduler.policies import DEFAULT_POLICIES, POLICIES
from llumverify.sim.engines import validate
from llumverify.sim.named_profiles import PROFILES, profile_values
from llumverify.sim.workload import LENGTHS, MAX_REQUESTS, STREAMS

Value = bool | int | float | str | tuple
Grid = tuple[tuple[str, tuple[Value, ...]], ...]

TRACES_VAR = "${TRACES}"
ARRIVALS = ("poisson", "gamma")
TIMESERIES = ("last-point", "first-seed", "all", "none")

# Workload keys a [grid] may sweep, and their checkers (the name of a workload and its trace are fixed).
_WORKLOAD_GRID_KEYS = ("lengths", "arrival", "rate", "cv", "rate_scale", "requests", "high_priority_frac", "spread",
                       "stream")
_TOP_KEYS = ("name", "description", "finding", "policies", "seeds", "requests", "timeseries", "profile", "workload",
             "grid")
_WORKLOAD_KEYS = ("name", "trace", "seeds", "grid", "profile", *_WORKLOAD_GRID_KEYS)


def traces_dir() -> Path:
    """The shared traces folder: $LLUMVERIFY_TRACES, else ../shared/traces next to the repository."""
    env = os.environ.get("LLUMVERIFY_TRACES")
    return Path(env) if env else Path(__file__).resolve().parents[3] / "shared" / "traces"


@dataclass(frozen=True)
class Workload:
    """One request stream: generated (`lengths`) or replayed (`trace`), with its own grid and seeds.

    `config` holds this workload's own config settings ("section.field" -> value), e.g. the
    artifact's migration threshold of 10 for M-M and S-L; they apply before any grid setting. A
    workload's `profile = NAME` puts that profile's settings (sim/named_profiles.py) first, under
    the workload's own tables and over the file's top level.

    `trace` is the path as written in the file (kept for results, so they do not depend on where
    the repository lives); `trace_path` is where it resolved to.
    """

    name: str
    lengths: str | None = setting(None, "Length distribution.", choices=LENGTHS, flag="--lengths")
    trace: str | None = setting(None, "Replay a trace file instead.", flag="--trace", path=True)
    trace_path: Path | None = None
    arrival: str = setting("poisson", "Arrival process.", choices=ARRIVALS, flag="--arrival")
    rate: float | None = setting(None, "Arrival rate, req/s (with a trace, replaces its arrivals).", unit="req/s",
                                 gt=0, flag="--rate")
    # bounded: gamma's shape is 1/cv², which a cv below about 1e-154 turns into a division by zero
    cv: float = setting(1.0, "Coefficient of variation (gamma).", ge=1e-6, le=1e6, flag="--cv")
    rate_scale: float = setting(1.0, "Speed a trace up (> 1) or down.", gt=0, flag="--rate-scale")
    requests: int | None = setting(None, "Requests to generate, or the first N of the trace.", gt=0,
                                   le=MAX_REQUESTS, flag="--requests")
    high_priority_frac: float = setting(0.0, "Share of generated requests in the high-priority class.", ge=0, le=1,
                                        flag="--high-priority-frac")
    spread: bool = setting(False, "Mooncake .jsonl traces: spread each second's arrivals over the second.")
    stream: str = setting("llumverify", "Generated workloads: our draw order, or the paper benchmark's (with --seed "
                          "51934: Fig. 11's own sample path).", choices=STREAMS, flag="--stream")
    seeds: tuple[int, ...] | None = None
    grid: Grid = ()
    config: tuple[tuple[str, Value], ...] = ()

    def settings(self) -> dict[str, Value | None]:
        """The settings that describe this workload in a results row (not its grid or seeds)."""
        return {"lengths": self.lengths, "trace": self.trace, "arrival": self.arrival, "rate": self.rate,
                "cv": self.cv, "rate_scale": self.rate_scale, "high_priority_frac": self.high_priority_frac,
                "spread": self.spread, "stream": self.stream}


_WORKLOAD_SETTINGS = settings_of(Workload)


@dataclass(frozen=True)
class Experiment:
    """A parsed experiment file. `grid` applies to every workload, after each workload's own grid."""

    path: Path
    name: str
    description: str
    finding: str | None
    policies: tuple[str, ...]
    seeds: tuple[int, ...]
    requests: int
    config: SimConfig
    workloads: tuple[Workload, ...]
    grid: Grid
    timeseries: str

    def describe(self) -> dict[str, object]:
        """The resolved experiment as plain data (for results.json): no absolute paths."""
        return {
            "name": self.name, "description": self.description, "finding": self.finding,
            "policies": list(self.policies), "seeds": list(self.seeds), "requests": self.requests,
            "timeseries": self.timeseries,
            "config": {k: v for k, v in dataclasses.asdict(self.config).items() if k != "step"},  # step: resolved per run
            "grid": {k: list(v) for k, v in self.grid},
            "workloads": [{"name": w.name, **w.settings(), "requests": w.requests,
                           "seeds": list(w.seeds) if w.seeds is not None else None,
                           "grid": {k: list(v) for k, v in w.grid}, "config": dict(w.config)}
                          for w in self.workloads],
        }


class _Ctx:
    """Where we are in the file, so every error names the file and the full key.

    options: for an experiment made from command-line options (`llumverify simulate`), key ->
    option ("cluster.num_instances" -> "--instances"): errors name the option instead.
    """

    def __init__(self, path: Path, options: dict[str, str] | None = None) -> None:
        self.path = path
        self.options = options

    def name(self, key: str) -> str:
        """What the user calls the setting at `key`: the key itself, or its option."""
        return key if self.options is None else self.options.get(key, key)

    def error(self, key: str, message: str) -> UserError:
        if self.options is not None:
            return UserError(f"{self.name(key)}: {message}")
        return UserError(f"{self.path}: {key}: {message}")

    def config_error(self, exc: UserError, where: str = "") -> UserError:
        """A config validation failure (sim/engines.py validate): a SettingError names its setting, anything else the file."""
        if isinstance(exc, SettingError):
            key = f"{_SECTION_OF[exc.owner]}.{exc.field}"
            return self.error(f"{where}: {key}" if where and self.options is None else key, exc.problem)
        if self.options is not None:
            return exc
        return UserError(f"{self.path}: {where + ': ' if where else ''}{exc}")


def load_experiment(path: str | Path) -> Experiment:
    """Read and validate an experiment file; UserError naming the file and key on any problem."""
    path = Path(path)
    try:
        doc = tomllib.loads(read_text(path, "experiment file", MAX_SETTINGS_BYTES))
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"{path}: invalid TOML: {exc}") from None
    except ValueError as exc:  # an integer of over 4,300 digits (Python's int-string limit)
        raise UserError(f"{path}: invalid TOML ({str(exc).splitlines()[0][:80]})") from None
    except RecursionError:
        raise UserError(f"{path}: nested too deeply to be an experiment file") from None
    return _parse(_Ctx(path), doc)


def from_options(doc: dict[str, object], options: dict[str, str]) -> Experiment:
    """The experiment a command line describes (`llumverify simulate`: one point), given as the
    document an experiment file would hold; checked by the same code, errors naming the options
    (`options`: key -> option). Relative trace paths are relative to the working directory."""
    return _parse(_Ctx(Path("command-line"), options), doc)


def _imply_engine(ctx: _Ctx, doc: dict[str, object]) -> dict[str, object]:
    """`doc` with engine.generation = "vllm-v1" where a step-cost source (hardware gpu, model, profile,
    cost_file) applies and no engine is chosen: the default vllm-0.2 is the paper's A10/LLaMA-7B fit
    and takes none. A source at the top level (or its grid) applies to every workload: the top level
    gets the engine; one in a workload (or its grid) gets it in that workload only. A named vllm-0.2
    setup (profile testbed) where a step-cost source applies is refused naming both. Malformed
    tables are left to the checks that follow."""
    def table(t: object, section: str) -> dict[str, object]:
        value = t.get(section) if isinstance(t, dict) else None
        return value if isinstance(value, dict) else {}

    def scope(t: dict[str, object]) -> list[dict[str, object]]:  # a table and its grid
        return [t, table(t, "grid")]

    def sourced(t: dict[str, object]) -> bool:
        return any(table(x, "hardware").get(k) for x in scope(t) for k in STEP_COST_SOURCES)

    def chosen(t: dict[str, object]) -> bool:
        return any("generation" in table(x, "engine") for x in scope(t))

    def setup(t: dict[str, object]) -> bool:  # a named profile other than the published defaults
        return isinstance(t.get("profile"), str) and t["profile"] in PROFILES and t["profile"] != "published"

    def refuse(key: str, t: dict[str, object]) -> UserError:
        return ctx.error(key, f"{t['profile']!r} is a vllm-0.2 setup (the paper's testbed): it does not go with "
                              "hardware step costs (gpu, model, a profile folder, cost_file)")

    def with_engine(t: dict[str, object]) -> dict[str, object]:
        return {**t, "engine": {**table(t, "engine"), "generation": "vllm-v1"}} \
            if "engine" not in t or isinstance(t["engine"], dict) else t

    entries = doc.get("workload")
    if entries is None:
        return doc
    top, top_engine = sourced(doc), chosen(doc)
    listed = [w for w in (entries if isinstance(entries, list) else [entries]) if isinstance(w, dict)]
    if top and not top_engine and not any(chosen(w) for w in listed):  # every workload: say it once, at the top
        if setup(doc):
            raise refuse("profile", doc)
        for i, w in enumerate(listed):
            if setup(w):
                raise refuse(f"workload[{i}].profile", w)
        return with_engine(doc)
    out = []
    for i, w in enumerate(entries if isinstance(entries, list) else [entries]):
        if isinstance(w, dict) and (top or sourced(w)):
            if setup(doc):
                raise refuse("profile", doc)
            if setup(w):
                raise refuse(f"workload[{i}].profile", w)
            if not top_engine and not chosen(w):
                w = with_engine(w)
        out.append(w)
    return {**doc, "workload": out if isinstance(entries, list) else out[0]}


def _parse(ctx: _Ctx, doc: dict[str, object]) -> Experiment:
    path = ctx.path
    doc = _imply_engine(ctx, doc)
    sections = _config_sections()
    _unknown(ctx, "", doc, (*_TOP_KEYS, *sections))
    name = _typed(ctx, "name", doc.get("name", path.stem), str)
    if name_problem(name):
        raise ctx.error("name", name_problem(name))  # the results folder is named after it
    policies = tuple(_list_of(ctx, "policies", doc.get("policies", list(DEFAULT_POLICIES)), str))
    for i, policy in enumerate(policies):
        if policy not in POLICIES:
            raise ctx.error(f"policies[{i}]", f"unknown policy {policy!r} (registered: {', '.join(POLICIES)})")
    seeds = _seeds(ctx, "seeds", doc.get("seeds", [0]))
    requests = _count(ctx, "requests", doc.get("requests", 1000))
    timeseries = _typed(ctx, "timeseries", doc.get("timeseries", "last-point"), str)
    if timeseries not in TIMESERIES:
        raise ctx.error("timeseries", f"must be one of {', '.join(TIMESERIES)}, got {timeseries!r}")
    own = _section_values(ctx, "", doc, sections)
    config = _config(ctx, doc, own)
    grid = _grid(ctx, "grid", doc.get("grid", {}), sections)
    _set_and_swept(ctx, "", own, grid)
    workloads = _workloads(ctx, doc.get("workload"), sections)
    finding = _typed(ctx, "finding", doc["finding"], str) if "finding" in doc else None
    exp = Experiment(path=path, name=name, description=_typed(ctx, "description", doc.get("description", ""), str),
                     finding=finding,  # type: ignore[arg-type]
                     policies=policies, seeds=seeds, requests=requests, config=config,
                     workloads=workloads, grid=grid, timeseries=timeseries)
    _check_grid_fits(ctx, exp)
    problem = finding_problem(str(finding), [w.name for w in workloads], policies) if finding is not None else None
    if problem:
        raise ctx.error("finding", problem)
    return exp


def apply_settings(path: Path, workload: Workload, config: SimConfig,
                   settings: dict[str, Value]) -> tuple[Workload, SimConfig]:
    """The workload and config with the workload's own config and one grid point's settings applied.

    Keys without a dot are workload settings; "section.field" keys go to the config.
    """
    ctx = _Ctx(path)
    wl_changes = {k: v for k, v in settings.items() if "." not in k}
    config = with_settings(config, {**dict(workload.config), **{k: v for k, v in settings.items() if "." in k}})
    try:
        validate(config)
    except UserError as exc:
        raise ctx.config_error(exc, f"grid ({workload.name})") from None
    return dataclasses.replace(workload, **wl_changes), config


# --- sections of SimConfig --------------------------------------------------------------------

SettingSpec = tuple[Setting, type, bool]  # settings_of: (Setting, kind, optional)


def _config_sections() -> dict[str, dict[str, SettingSpec]]:
    """section -> field -> its setting: each dataclass-valued field of SimConfig is a table, its
    own settings (fast, sample_interval_s) live under [sim]."""
    default = SimConfig()
    out = {f.name: settings_of(type(getattr(default, f.name))) for f in dataclasses.fields(SimConfig)
           if dataclasses.is_dataclass(getattr(default, f.name))}
    out["sim"] = settings_of(SimConfig)
    return out


# config class name -> its section ("SchedulerConfig" -> "scheduler"), to name a SettingError's key
_SECTION_OF = {type(getattr(SimConfig(), f.name)).__name__: f.name for f in dataclasses.fields(SimConfig)
               if dataclasses.is_dataclass(getattr(SimConfig(), f.name))} | {"SimConfig": "sim"}


def _profile(ctx: _Ctx, key: str, table: dict[str, object]) -> dict[str, Value]:
    """The settings of the named profile `table` selects with `profile = NAME` (none if it names none)."""
    if "profile" not in table:
        return {}
    name = _typed(ctx, key, table["profile"], str)
    if name not in PROFILES:
        raise ctx.error(key, f"unknown profile {name!r} (choose from {', '.join(PROFILES)})")
    return profile_values(name)  # type: ignore[arg-type]


def _config(ctx: _Ctx, doc: dict[str, object], own: dict[str, Value]) -> SimConfig:
    """The file's top-level config: its profile's settings, then its own tables (`own`) over them.
    Checked as each workload completes it (_check_grid_fits): a workload or a grid may give what it
    lacks (a model set here, the GPUs swept)."""
    return with_settings(SimConfig(), {**_profile(ctx, "profile", doc), **own})


def with_settings(config: SimConfig, settings: dict[str, Value]) -> SimConfig:
    """`config` with "section.field" settings replaced ("sim.field" is a SimConfig scalar). A KV size
    given (engine.num_blocks) wins over the catalog's (hardware.kv_from_catalog off) unless the
    same settings say otherwise."""
    for key, value in settings.items():
        section, field = key.split(".", 1)
        if section == "sim":
            config = dataclasses.replace(config, **{field: value})
        else:
            part = dataclasses.replace(getattr(config, section), **{field: value})
            config = dataclasses.replace(config, **{section: part})
    if "engine.num_blocks" in settings and "hardware.kv_from_catalog" not in settings:
        config = dataclasses.replace(config, hardware=dataclasses.replace(config.hardware, kv_from_catalog=False))
    return config


# A repeating timer (report_interval_s, round_period_s, autoscale interval_s, sample_interval_s, lease_check_s) from
# an experiment file or the command line: a simulated ns is the config's floor (hand-built configs in the tests step
# at tens of ns), but every tick is an event: 20 requests on 2 instances took 15-38 s at 10 µs and over a minute at
# 1 µs or 1 ns (2 cores, 2026-12-08), so a sweep of such points ran for hours. 0.1 ms is far below any real
# scheduler's period (Llumnix reports every 50 ms) and keeps such a run within seconds.
MIN_PERIOD_S = 1e-4


def _like(ctx: _Ctx, key: str, value: object, spec: SettingSpec) -> Value:
    """`value` checked by its setting (config.Setting.problem, the one check every front door uses).

    TOML arrays become tuples; an integer given for a float setting becomes a float (ints stay ints:
    simulated time is exact).
    """
    s, kind, optional = spec
    if kind is tuple:
        if not isinstance(value, list):
            raise ctx.error(key, f"must be a list, got {value!r}")
        value = _tuples(value)
    elif kind is float and isinstance(value, int) and not isinstance(value, bool) and abs(value) < 2**64:
        value = float(value)  # a larger integer stays one: problem() refuses it
    if s.period and type(value) in (int, float) and 0 < value < MIN_PERIOD_S:  # before problem()'s 1-ns floor
        raise ctx.error(key, f"must be {'' if s.gt is not None else '0 or '}at least {MIN_PERIOD_S:g} s (0.1 ms): "
                             f"a repeating timer, and at 1 µs even a 20-request run takes minutes, got {value!r}")
    problem = s.problem(kind, value, optional)
    if problem:
        raise ctx.error(key, problem)
    return value  # type: ignore[return-value]


def _tuples(value: object) -> object:
    """TOML arrays (nested) as tuples, so a config stays hashable and frozen."""
    return tuple(_tuples(v) for v in value) if isinstance(value, list) else value


def _section_values(ctx: _Ctx, where: str, doc: dict[str, object],
                    sections: dict[str, dict[str, SettingSpec]]) -> dict[str, Value]:
    """"section.field" -> checked value for every config section table present in `doc`."""
    out: dict[str, Value] = {}
    for section in sections:
        if section not in doc:
            continue
        key = f"{where}.{section}" if where else section
        table = doc[section]
        if not isinstance(table, dict):
            raise ctx.error(key, f"must be a table, got {type(table).__name__}")
        known = sections[section]
        _unknown(ctx, key, table, known)
        out.update({f"{section}.{k}": _like(ctx, f"{key}.{k}", v, known[k]) for k, v in table.items()})
    return out


# --- workloads --------------------------------------------------------------------------------

def _workloads(ctx: _Ctx, raw: object, sections: dict[str, dict[str, SettingSpec]]) -> tuple[Workload, ...]:
    if raw is None:
        raise ctx.error("workload", "missing: give at least one [[workload]] with lengths or trace")
    entries = [raw] if isinstance(raw, dict) else raw
    if not isinstance(entries, list) or not entries:
        raise ctx.error("workload", "must be a table or a non-empty array of tables ([[workload]])")
    out: list[Workload] = []
    for i, entry in enumerate(entries):
        key = f"workload[{i}]"
        if not isinstance(entry, dict):
            raise ctx.error(key, f"must be a table, got {type(entry).__name__}")
        out.append(_workload(ctx, key, entry, sections))
    names = [w.name for w in out]
    for i, name in enumerate(names):
        if names.index(name) != i:
            raise ctx.error(f"workload[{i}].name", f"duplicate workload name {name!r} (give each a distinct name)")
    problem = workload_names_problem(names) if ctx.options is None else None  # a file's: `report` plots them
    if problem:
        raise ctx.error(f"workload[{problem[0]}].name", problem[1])
    return tuple(out)


def plot_slug(name: str) -> str:
    """A workload's name as `llumverify report` writes it in its plot files' names (latency_SLUG.png)."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name)


def workload_names_problem(names: Sequence[str]) -> tuple[int, str] | None:
    """(index, what is wrong) of the first workload name the report cannot title a section and name plot files
    with, or None: a name on one line of at most 200 bytes (its files' names fit 255), no two sharing their plot
    files (`a,b` and `a b` both write latency_a_b.png: the report would show the second's plots under both)."""
    seen: dict[str, str] = {}
    for i, name in enumerate(names):
        if not name.strip() or name != name.strip() or not name.isprintable() or len(name.encode()) > 200:
            return i, (f"must be a name on one line without surrounding spaces, at most 200 bytes (the report's "
                       f"plot files are named after it), got {brief(name)}")
        slug = plot_slug(name).casefold()  # casefold: one file on a case-insensitive file system
        if slug in seen:
            return i, (f"{name!r} and {seen[slug]!r} would share the report's plot files (latency_"
                       f"{plot_slug(name)}.png): give names that differ in letters, digits, '_', '.' or '-'")
        seen[slug] = name
    return None


def _workload(ctx: _Ctx, key: str, entry: dict[str, object], sections: dict[str, dict[str, SettingSpec]]) -> Workload:
    _unknown(ctx, key, entry, (*_WORKLOAD_KEYS, *sections))
    has_lengths, has_trace = "lengths" in entry, "trace" in entry
    if has_lengths and has_trace:
        raise ctx.error(f"{key}.lengths", f"cannot be combined with {ctx.name(key + '.trace')} "
                                          "(the trace gives the lengths)")
    if not has_lengths and not has_trace:
        raise ctx.error(key, "give exactly one of lengths (generated) or trace (replayed)")
    values = {k: _workload_value(ctx, f"{key}.{k}", k, v) for k, v in entry.items()
              if k in _WORKLOAD_GRID_KEYS}
    trace = trace_path = None
    if has_trace:
        trace = _typed(ctx, f"{key}.trace", entry["trace"], str)
        trace_path = _resolve_trace(ctx, f"{key}.trace", trace)
    default_name = values.get("lengths") or (trace_path.stem if trace_path else "")
    name = _typed(ctx, f"{key}.name", entry.get("name", default_name), str)
    seeds = _seeds(ctx, f"{key}.seeds", entry["seeds"]) if "seeds" in entry else None
    grid = _grid(ctx, f"{key}.grid", entry.get("grid", {}), sections)
    own = _section_values(ctx, key, entry, sections)
    _set_and_swept(ctx, key, {**values, **own}, grid)
    config = tuple({**_profile(ctx, f"{key}.profile", entry), **own}.items())
    return Workload(name=name, trace=trace, trace_path=trace_path, seeds=seeds, grid=grid, config=config,  # type: ignore[arg-type]
                    **values)


def _workload_value(ctx: _Ctx, key: str, name: str, value: object) -> Value:
    return _like(ctx, key, value, _WORKLOAD_SETTINGS[name])


def _resolve_trace(ctx: _Ctx, key: str, trace: str) -> Path:
    """${TRACES} is the shared traces folder; other relative paths are relative to the TOML's folder."""
    if trace.startswith(TRACES_VAR):
        path = traces_dir() / trace[len(TRACES_VAR):].lstrip("/")
    elif "${" in trace:
        raise ctx.error(key, f"unknown variable in {trace!r} (only {TRACES_VAR} is defined)")
    else:
        path = Path(trace) if Path(trace).is_absolute() else ctx.path.parent / trace
    try:
        not_a_loop(path)
    except UserError as exc:
        raise ctx.error(key, str(exc)) from None
    if path.is_dir():
        raise ctx.error(key, f"is a directory, not a trace file: {path}")
    if not path.exists():
        hint = f" (set LLUMVERIFY_TRACES for {TRACES_VAR})" if trace.startswith(TRACES_VAR) else ""
        raise ctx.error(key, f"trace file not found: {path}{hint}")
    try:
        return regular_file(path, "trace file")
    except UserError as exc:
        raise ctx.error(key, str(exc)) from None


# --- grids ------------------------------------------------------------------------------------

def _grid(ctx: _Ctx, key: str, raw: object, sections: dict[str, dict[str, SettingSpec]]) -> Grid:
    """A table of setting -> non-empty list; nested tables ([grid.cluster]) give "section.field" keys."""
    if not isinstance(raw, dict):
        raise ctx.error(key, f"must be a table, got {type(raw).__name__}")
    out: list[tuple[str, tuple[Value, ...]]] = []
    for name, values in raw.items():
        full = f"{key}.{name}"
        if isinstance(values, dict):
            if name not in sections:
                raise ctx.error(full, f"unknown section (grid sections: {', '.join(sections)})")
            known = sections[name]
            _unknown(ctx, full, values, known)
            for field, vals in values.items():
                items = _grid_list(ctx, f"{full}.{field}", vals)
                out.append((f"{name}.{field}",
                            tuple(_like(ctx, f"{full}.{field}[{i}]", v, known[field]) for i, v in enumerate(items))))
                if f"{name}.{field}" in ("hardware.gpu", "hardware.model"):
                    _same_hardware(ctx, f"{full}.{field}", field, out[-1][1])
            continue
        if name not in _WORKLOAD_GRID_KEYS:
            raise ctx.error(full, f"unknown grid setting (workload settings: {', '.join(_WORKLOAD_GRID_KEYS)}; "
                                  "config settings go in sub-tables like [grid.cluster])")
        items = _grid_list(ctx, full, values)
        out.append((name, tuple(_workload_value(ctx, f"{full}[{i}]", name, v) for i, v in enumerate(items))))
    return tuple(out)


def _same_hardware(ctx: _Ctx, key: str, field: str, values: tuple[Value, ...]) -> None:
    """UserError for two values of a swept GPU or model that name one catalog entry or file (H100 and H100-SXM,
    a model's name and its HF id): every point would run twice under two labels. Names the catalogs do not know
    are left to the point checks that follow, which say so."""
    from llumverify.sim.catalog import get_gpu, get_model

    seen: dict[object, Value] = {}
    for value in values:
        try:
            entry = (get_gpu if field == "gpu" else get_model)(str(value))
        except UserError:
            continue
        if entry in seen:
            raise ctx.error(key, f"{seen[entry]!r} and {value!r} are one {field} ({entry.name}): each point would "
                                 "run twice")
        seen[entry] = value


def _set_and_swept(ctx: _Ctx, where: str, given: dict[str, Value], grid: Grid) -> None:
    """UserError for a setting that one table (the top level, or workload `where`) both sets and
    sweeps in its grid: every point would take the swept values and the set one would be silently
    dropped (a setting is set or swept, not both). A profile's settings may be swept: they are defaults."""
    prefix = f"{where}." if where else ""
    for name, _ in grid:
        if name in given:
            raise ctx.error(f"{prefix}{name}", f"set to {given[name]!r} and swept by {prefix}grid.{name} "
                                               "(set it or sweep it, not both)")


def _grid_list(ctx: _Ctx, key: str, values: object) -> list[object]:
    if not isinstance(values, list):
        raise ctx.error(key, f"a grid setting must be a list of values, got {values!r}")
    if not values:
        raise ctx.error(key, "empty list: a grid setting needs at least one value")
    if len(set(map(repr, values))) != len(values):
        raise ctx.error(key, f"duplicate values in {values!r}")
    return values


def _check_grid_fits(ctx: _Ctx, exp: Experiment) -> None:
    """A setting is swept in one place only, makes sense for its workload, and every point's config is valid."""
    top = dict(exp.grid)
    for i, w in enumerate(exp.workloads):
        key = f"workload[{i}]"
        for name, _ in (*w.grid, *w.config):
            if name in top:
                raise ctx.error(f"{key}: {name}", "also swept by the top-level [grid] (set or sweep it in one place)")
        swept = {**dict(w.grid), **top}
        if w.trace is not None and "lengths" in swept:
            raise ctx.error(key, "a trace gives the lengths: do not sweep lengths over it")
        if w.trace is not None and ("high_priority_frac" in swept or w.high_priority_frac):
            raise ctx.error(f"{key}.high_priority_frac", "applies only to generated workloads (a trace gives priorities)")
        if w.trace is not None and ("stream" in swept or w.stream != "llumverify"):
            raise ctx.error(f"{key}.stream", "applies only to generated workloads (a trace gives its requests)")
        if w.trace is None:
            if "rate_scale" in swept or w.rate_scale != 1.0:
                raise ctx.error(f"{key}.rate_scale", f"applies only to traces (use {ctx.name(key + '.rate')} for "
                                                     "generated workloads)")
            if w.rate is None and "rate" not in swept:
                raise ctx.error(key, "a generated workload needs a rate (or a grid over rate)")
        if w.spread and w.trace is not None and not w.trace.endswith(".jsonl"):
            raise ctx.error(f"{key}.spread", "applies only to Mooncake .jsonl traces")
        arrivals = swept.get("arrival", (w.arrival,))
        cvs = swept.get("cv", (w.cv,))
        if "poisson" in arrivals and any(cv != 1.0 for cv in cvs):
            raise ctx.error(f"{key}.cv", f"a Poisson process has cv 1: set {ctx.name(key + '.arrival')} to gamma "
                                         "to vary cv")
        # the workload's config, then each swept value beside the first value of every other swept
        # setting: settings that only make sense together (hardware gpu and model) may be swept together,
        # or one set and one swept; an error names where it arises (the top level, the workload, its grid)
        base = {name: values[0] for name, values in swept.items() if "." in name}
        _check_point(ctx, key, w, exp.config, base)
        for name, values in swept.items():
            if "." in name:
                for value in values[1:]:
                    _check_point(ctx, key, w, exp.config, {**base, name: value})


def _check_point(ctx: _Ctx, key: str, w: Workload, config: SimConfig, settings: dict[str, Value]) -> None:
    """One point's config (the file's, workload `key`'s, the grid's `settings`) is valid. A setting's
    error names where that setting was given (the grid, the workload, else the top level)."""
    try:
        validate(with_settings(config, {**dict(w.config), **settings}))
    except UserError as exc:
        culprit = f"{_SECTION_OF[exc.owner]}.{exc.field}" if isinstance(exc, SettingError) else None
        where = f"grid ({w.name})" if culprit in settings else key if culprit in dict(w.config) else ""
        raise ctx.config_error(exc, where) from None


# --- the finding template -------------------------------------------------------------------

# field root -> (its indices, which of them is the metric, which the policy or policy pair)
_FINDING_FIELDS = {"ratio": ("ratio[METRIC][A/B]", 0, 1), "wratio": ("wratio[WORKLOAD][METRIC][A/B]", 1, 2),
                   "at": ("at[WORKLOAD][X][POLICY][METRIC]", 3, 2)}


def finding_problem(template: str, workloads: Sequence[str], policies: Sequence[str]) -> str | None:
    """What is wrong with a `finding` template, or None: every field is exactly one of the shapes
    the report fills in (no attribute access: `{ratio.__class__}` would print Python internals), names
    a registered metric (a ratio metric under ratio/wratio), a workload and policies of this
    experiment, and keeps to a plain format spec (a width of 10**11 fills memory). One check for both
    readers of a template: the experiment file (so a renamed metric fails when it is read, not after
    the sweep) and results.json (`llumverify report`, llumverify/study/report.py)."""
    try:
        parsed = [(f, spec or "") for _, f, spec, _ in string.Formatter().parse(template) if f is not None]
    except ValueError as exc:
        return f"not a format template: {exc}"
    shapes = ", ".join(shape for shape, _, _ in _FINDING_FIELDS.values())
    for field, spec in parsed:
        root, index = re.match(r"[^\[.]*", field).group(), re.findall(r"\[([^\]]*)\]", field)  # type: ignore[union-attr]
        shape, metric_at, policy_at = _FINDING_FIELDS.get(root, ("", 0, 0))
        if not shape or len(index) != shape.count("[") or field != root + "".join(f"[{i}]" for i in index):
            return f"{{{field}}}: expected one of {shapes}"
        if "{" in spec:
            return f"{{{field}}}: format spec {spec!r}: no fields inside a format spec"
        if re.search(r"\d{4}", spec):
            return f"{{{field}}}: format spec {spec!r}: widths and precisions up to 999"
        try:
            metric = registry.get(index[metric_at])
        except registry.UnknownMetric as exc:
            return f"{{{field}}}: {exc}"
        if root != "at" and metric.name not in registry.RATIO_METRICS:
            return f"{{{field}}}: ratios compare {', '.join(registry.RATIO_METRICS)}"
        if root != "ratio" and index[0] not in workloads:
            return f"{{{field}}}: no workload {index[0]!r} (workloads: {', '.join(workloads)})"
        for policy in index[policy_at].split("/") if root != "at" else [index[policy_at]]:
            if policy not in policies:
                return f"{{{field}}}: {policy!r} is not in policies"
    return None


# --- scalar checks ----------------------------------------------------------------------------

def _unknown(ctx: _Ctx, where: str, table: dict[str, object], known: object) -> None:
    names = list(known)  # type: ignore[call-overload]
    for key in table:
        if key not in names:
            full = f"{where}.{key}" if where else key
            raise ctx.error(full, f"unknown key (known: {', '.join(names)})")


def _typed(ctx: _Ctx, key: str, value: object, kind: type) -> Value:
    if not isinstance(value, kind):
        raise ctx.error(key, f"must be a {kind.__name__}, got {value!r}")
    return value  # type: ignore[return-value]


def _count(ctx: _Ctx, key: str, value: object) -> int:
    """A number of requests (the experiment's default; a workload's may be unset)."""
    s, kind, _ = _WORKLOAD_SETTINGS["requests"]
    return _like(ctx, key, value, (s, kind, False))  # type: ignore[return-value]


def _list_of(ctx: _Ctx, key: str, value: object, kind: type) -> list[Value]:
    if not isinstance(value, list) or not value:
        raise ctx.error(key, f"must be a non-empty list, got {value!r}")
    items = [_typed(ctx, f"{key}[{i}]", v, kind) for i, v in enumerate(value)]
    if len(set(items)) != len(items):
        raise ctx.error(key, f"duplicate values in {value!r}")
    return items


def _seeds(ctx: _Ctx, key: str, value: object) -> tuple[int, ...]:
    items = _list_of(ctx, key, value, int)
    for i, seed in enumerate(items):
        if isinstance(seed, bool) or not 0 <= seed < 2**64:  # type: ignore[operator]  # as --seed (a config integer)
            below = " below 2^64" if not isinstance(seed, bool) and seed >= 2**64 else ""  # type: ignore[operator]
            raise ctx.error(f"{key}[{i}]", f"must be a non-negative integer{below}, got {seed!r}")
    return tuple(items)  # type: ignore[arg-type]
