"""Output folders are proved creatable before any work: os.access says yes to root even where
nothing can be made (/proc), so the check makes and removes a probe folder there."""

from __future__ import annotations

from pathlib import Path

import pytest

from llumverify.errors import UserError
from llumverify.files.paths import fresh_dir, writable_dir


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux /proc")
def test_a_folder_that_cannot_be_created_is_refused_up_front():
    with pytest.raises(UserError, match=r"--out /proc/x/y: cannot create it in /proc"):
        writable_dir(Path("/proc/x/y"), "--out")


def test_the_probe_leaves_no_trace(tmp_path):
    fresh_dir(tmp_path / "new" / "out", "--out", force=False)
    assert list(tmp_path.iterdir()) == []
