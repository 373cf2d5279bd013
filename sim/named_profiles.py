"""Named configuration profiles: "published" (the defaults) and "testbed" (sim/catalog/testbed.toml).

A profile is a set of "section.field" settings, each with its source, applied before anything an
experiment file or the command line sets, so one name stands for a sourced setup and the numbers
live in one file. `llumverify simulate --profile testbed` and `profile = "testbed"` in an
experiment file (top level or one [[workload]]) both come here.
"""

from __future__ import annotations

import dataclasses
import tomllib
from dataclasses import dataclass
from functools import cache

from llumverify.settings.config import SimConfig, settings_of
from llumverify.errors import UserError
from llumverify.sim.catalog import CATALOG_DIR

PROFILES = ("published", "testbed")
_FILES = {"testbed": CATALOG_DIR / "testbed.toml"}  # "published" is the defaults: no file

Value = bool | int | float | str


@dataclass(frozen=True)
class ProfileSetting:
    """One setting a profile changes: its key, value, and whether and to what it was fitted."""

    key: str
    value: Value
    fitted: bool
    source: str


def _spec(key: str) -> tuple[object, type, bool] | None:
    """(Setting, kind, optional) of a "section.field" key of SimConfig, or None if there is none."""
    section, _, field = key.partition(".")
    default = SimConfig()
    part = getattr(default, section, None)
    if not field or not dataclasses.is_dataclass(part):
        return None
    return settings_of(type(part)).get(field)


def _document(name: str) -> dict[str, object]:
    """Profile `name`'s file as read ({} for the defaults), each time (profile_settings keeps what it checked);
    UserError for an unknown name or an unreadable file."""
    if name not in PROFILES:
        raise UserError(f"unknown profile {name!r} (choose from {', '.join(PROFILES)})")
    if name not in _FILES:
        return {}
    path = _FILES[name]
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise UserError(f"{path}: cannot read profile {name!r}: {exc}") from None


@cache
def profile_settings(name: str) -> tuple[ProfileSetting, ...]:
    """The settings profile `name` applies, in file order; UserError for an unknown name or a bad file."""
    doc = _document(name)
    path = _FILES.get(name)
    out = []
    for i, entry in enumerate(doc.get("setting", [])):
        where = f"{path}: setting[{i}]"
        if set(entry) != {"key", "value", "fitted", "source"}:
            raise UserError(f"{where}: needs exactly key, value, fitted and source, got {', '.join(sorted(entry))}")
        spec = _spec(entry["key"])
        if spec is None:
            raise UserError(f"{where}: unknown setting {entry['key']!r} (section.field of an experiment file)")
        s, kind, optional = spec
        problem = s.problem(kind, entry["value"], optional)  # type: ignore[attr-defined]
        if problem:
            raise UserError(f"{where}: {entry['key']} {problem}")
        out.append(ProfileSetting(entry["key"], entry["value"], bool(entry["fitted"]), entry["source"]))
    return tuple(out)


def profile_values(name: str) -> dict[str, Value]:
    """"section.field" -> value of every setting profile `name` changes."""
    return {s.key: s.value for s in profile_settings(name)}


def profile_config(name: str, base: SimConfig | None = None) -> SimConfig:
    """`base` (default SimConfig()) with profile `name`'s settings applied."""
    cfg = base if base is not None else SimConfig()
    for key, value in profile_values(name).items():
        section, field = key.split(".", 1)
        cfg = dataclasses.replace(cfg, **{section: dataclasses.replace(getattr(cfg, section), **{field: value})})
    return cfg


def profile_changes(name: str, cfg: SimConfig, section: str = "") -> list[str]:
    """The settings profile `name` sets (those of `section` only, if given) that `cfg` holds otherwise: options or a
    cost file applied over the profile changed them."""
    return [s.key for s in profile_settings(name) if s.key.startswith(section)
            and getattr(getattr(cfg, s.key.split(".", 1)[0]), s.key.split(".", 1)[1]) != s.value]


def profile_error(name: str, cfg: SimConfig) -> str | None:
    """Profile `name`'s own measured error, if its file states one; None if it states none. When `cfg` changes a
    setting the profile sets (a constant, the block count, a migration rule), what was measured is not this run:
    the line says so and names the changes."""
    text = _document(name).get("measured_error")
    if not isinstance(text, str):
        return None
    changed = profile_changes(name, cfg)
    return text if not changed else (f"none for this run: the {name} profile's own error ({text.split(' (')[0]}) "
                                     f"holds with every setting it sets, and this run changes {', '.join(changed)}")
