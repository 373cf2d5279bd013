"""The one exception type users see, and what a bug turns into: always a single line on stderr."""

from __future__ import annotations

import os
import tempfile
import traceback

INTERNAL_ERROR_EXIT = 70  # sysexits' EX_SOFTWARE: distinct from bad input (2) and a failed audit (3)


class UserError(Exception):
    """Bad input (trace, config, option). The message names the file, line or option at fault."""


def brief(value: object) -> str:
    """A value as a one-line error shows it: its repr, or its start and length when that is long (a
    JSON integer of hundreds of digits would fill the screen)."""
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:20]}... ({len(text)} characters)"


def internal_error(exc: BaseException) -> str:
    """One line for a bug: the exception and the temp file its full traceback was written to.

    Why a file: a raw traceback buries the one useful line for a user, yet a bug report needs the
    whole of it; the line says where to find it.
    """
    summary = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}".rstrip(": ")
    try:
        fd, path = tempfile.mkstemp(prefix="llumverify-traceback-", suffix=".txt")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write("".join(traceback.format_exception(exc)))
    except OSError as write_error:
        return f"internal error (a bug): {summary} (traceback not saved: {write_error.strerror or write_error})"
    return f"internal error (a bug): {summary}; full traceback in {path}"
