"""Input files and output folders, checked before any work starts, and atomic writes.

Why: a run that dies at its end on an unwritable folder, or on a binary file it reads half-way,
wastes the run. Each check raises a one-line UserError naming the path (and line) and what is
wrong; `write_atomic` means an interrupted run never leaves a half-written file behind.
"""

from __future__ import annotations

import json
import os
import tempfile
import tomllib
from collections.abc import Iterable
from pathlib import Path

from llumverify.errors import UserError
from llumverify.files.inputs import (MAX_SETTINGS_BYTES, MAX_TEXT_BYTES, not_a_loop, regular_file, symlink_loop,
                                    unique_keys)


def input_file(path: Path, what: str, max_bytes: int = MAX_TEXT_BYTES) -> Path:
    """`path` if it is an existing regular file of a readable size; else "not found", "is a
    directory", "is a character device", ... naming it (llumverify/files/inputs.py)."""
    return regular_file(path, what, max_bytes)


def read_text(path: Path, what: str, max_bytes: int = MAX_TEXT_BYTES) -> str:
    """The UTF-8 text of a file (a BOM is dropped); binary or mis-encoded files name their line."""
    try:
        data = input_file(path, what, max_bytes).read_bytes()
    except OSError as exc:
        raise UserError(f"{path}: cannot read it ({exc.strerror or exc})") from None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        if data.startswith((b"\xff\xfe", b"\xfe\xff")):
            raise UserError(f"{path}:1: UTF-16 text, expected a UTF-8 text {what} (save it as UTF-8)") from None
        raise UserError(f"{path}:{_line_of(data, exc.start)}: not UTF-8 text (byte 0x{data[exc.start]:02x}), "
                        f"expected a UTF-8 text {what}") from None
    nul = data.find(b"\0")
    if nul >= 0:
        raise UserError(f"{path}:{_line_of(data, nul)}: binary data (a NUL byte), expected a UTF-8 text {what}")
    return text


def read_toml(path: Path, what: str, label: str = "") -> dict:
    """A TOML file's table; any problem is one line naming `label` (an option) or the path."""
    name = f"{label} {path}" if label else str(path)
    try:
        return tomllib.loads(read_text(path, what, MAX_SETTINGS_BYTES))
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"{name}: {str(exc).splitlines()[0]}") from None
    except ValueError as exc:  # an integer of over 4,300 digits (Python's int-string limit)
        raise UserError(f"{name}: not a {what} ({str(exc).splitlines()[0][:80]})") from None
    except RecursionError:
        raise UserError(f"{name}: nested too deeply to be a settings file") from None
    except UserError as exc:
        raise UserError(f"{label} {exc}" if label else str(exc)) from None


def read_json_object(path: Path, what: str, max_bytes: int = MAX_SETTINGS_BYTES) -> dict:
    """A JSON settings file's object (a run's meta.json, a model's config.json, a cluster config):
    not found, not UTF-8, not JSON, nested too deeply, a key given twice in one object (json keeps the
    last without a word) or not an object is one line naming the path."""
    text = read_text(path, what, max_bytes)
    try:
        doc = json.loads(text, object_pairs_hook=unique_keys)
    except json.JSONDecodeError as exc:
        raise UserError(f"{path}: not a JSON file ({str(exc).splitlines()[0]})") from None
    except RecursionError:
        raise UserError(f"{path}: nested too deeply to be a {what}") from None
    except ValueError as exc:  # an integer of over 4,300 digits (Python's int-string limit)
        raise UserError(f"{path}: not a {what} ({str(exc).splitlines()[0][:80]})") from None
    if not isinstance(doc, dict):
        raise UserError(f"{path}: expected a JSON object ({what})")
    return doc


def user_path(text: str) -> Path:
    """`text` as a path, "~" and "~user" expanded; an unknown user is a one-line error."""
    try:
        return Path(text.strip()).expanduser()
    except RuntimeError:
        raise UserError(f"{text.strip()}: no such user's home folder") from None


def resolved(path: Path, label: str = "") -> Path:
    """`path` made absolute with its symlinks followed; a symlink loop is one line (not_a_loop: Path.resolve
    raises RuntimeError on one before Python 3.13 and follows it silently from 3.13 on)."""
    try:
        return not_a_loop(path, label).resolve()
    except (RuntimeError, OSError):
        raise symlink_loop(path, label) from None


def check_keys(path: Path | str, data: Iterable[str], known: Iterable[str], label: str = "", what: str = "key",
               empty_ok: bool = True) -> None:
    """Every key of a settings file (or `what`: a trace's column) is a known one (a typo would silently
    keep a default); with empty_ok=False there is at least one (an empty file of overrides overrides nothing:
    a truncated copy or the wrong file, which the run would go on without)."""
    known = set(known)
    name = f"{label} {path}" if label else str(path)
    keys = list(data)
    if not keys and not empty_ok:
        raise UserError(f"{name}: holds no {what}, so it overrides nothing (known: {', '.join(sorted(known))})")
    for key in keys:
        if key not in known:
            raise UserError(f"{name}: unknown {what} {key!r} (known: {', '.join(sorted(known))})")


def _line_of(data: bytes, offset: int) -> int:
    """The 1-based line holding byte `offset`."""
    return data.count(b"\n", 0, offset) + 1


def writable_dir(out: Path, option: str) -> None:
    """`out` is a writable folder, or can be created as one (its nearest existing parent is)."""
    if not_a_loop(out, option).exists() or out.is_symlink():
        if not out.is_dir():
            raise UserError(f"{option} {out}: exists and is not a folder")
        if not os.access(out, os.W_OK | os.X_OK):
            raise UserError(f"{option} {out}: folder is not writable")
        return
    parent = out.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise UserError(f"{option} {out}: cannot create it, {parent} is not a folder")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise UserError(f"{option} {out}: cannot create it, {parent} is not writable")
    try:  # access() says yes for root even where nothing can be made (e.g. /proc): try it, leave no trace
        os.rmdir(tempfile.mkdtemp(prefix=".llumverify-probe-", dir=parent))
    except OSError as exc:
        raise UserError(f"{option} {out}: cannot create it in {parent} ({exc.strerror or exc})") from None


def writable_file(out: Path, option: str) -> None:
    """`out` can be written as a file: not a folder, in an existing folder where a file can be made
    (tried: access() says yes for root even where nothing can be made, e.g. /proc)."""
    if not_a_loop(out, option).is_dir() or not out.parent.is_dir():
        raise UserError(f"{option} {out}: " + ("is a folder" if out.is_dir() else f"folder {out.parent} not found"))
    _not_special(out, option)
    try:
        fd, probe = tempfile.mkstemp(prefix=".llumverify-probe-", dir=out.parent)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise UserError(f"{option} {out}: cannot write in {out.parent} ({exc.strerror or exc})") from None


def fresh_dir(out: Path, option: str, force: bool) -> None:
    """`out` is writable and empty (or new), unless --force allows overwriting what is there."""
    writable_dir(out, option)
    if not force and out.is_dir() and any(out.iterdir()):
        raise UserError(f"{option} {out}: folder is not empty (use --force to overwrite, or give a new folder)")


def _not_special(out: Path, option: str) -> None:
    """`out` is not a device, pipe or socket: the rename that writes it atomically would replace
    the node itself (a /dev entry turned into a JSON file), not write through it."""
    if out.exists() and not out.is_file():
        raise UserError(f"{option} {out}: exists and is not a regular file (a device, pipe or socket); "
                        "give the path of a file")


def write_atomic(path: Path, text: str) -> None:
    """Write `text` to a temp file beside `path`, then rename it over `path`: all or nothing."""
    _not_special(path, "output")
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    umask = os.umask(0)
    os.umask(umask)
    try:
        os.fchmod(fd, 0o666 & ~umask)  # what open() would have made, not mkstemp's 0600
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
