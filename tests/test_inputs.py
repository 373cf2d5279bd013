"""llumverify/files/inputs.py: values from files are taken exactly as written, and only from regular files."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from llumverify.errors import UserError
from llumverify.files.inputs import exact_bool, exact_int, finite, parsed_int, regular_file


@pytest.mark.parametrize("value", [2.9, 2.0, "3", True, None])
def test_an_integer_is_an_integer_as_written(value: object) -> None:
    with pytest.raises(UserError, match="x must be an integer"):
        exact_int(value, "x")


def test_integers_in_bounds_pass_and_out_of_bounds_name_them() -> None:
    assert exact_int(7, "x", lo=1, hi=7) == 7
    with pytest.raises(UserError, match=r"x must be an integer in \[1, 7\], got 8"):
        exact_int(8, "x", lo=1, hi=7)


@pytest.mark.parametrize("value", ["false", "true", 0, 1, None])
def test_a_boolean_is_true_or_false_not_a_truthy_string(value: object) -> None:
    with pytest.raises(UserError, match="must be true or false"):
        exact_bool(value, "x")
    assert exact_bool(False, "x") is False


@pytest.mark.parametrize("value", [float("nan"), float("inf"), "1.0", True])
def test_a_number_is_finite(value: object) -> None:
    with pytest.raises(UserError, match="x must be a finite number"):
        finite(value, "x", gt=0)
    with pytest.raises(UserError, match="x must be < 1"):
        finite(1, "x", gt=0, lt=1)


@pytest.mark.parametrize("text", ["2.5", "1e8", "", "0x10", "1_000", "\u0661\u0660", "\uff11\uff10"])
def test_a_csv_integer_is_digits(text: str) -> None:
    """ASCII digits only: int() also reads `1_000` and other scripts' digits, a mangled field in a CSV."""
    with pytest.raises(UserError, match="must be an integer"):
        parsed_int(text, "f.csv:2: Batch Size")
    assert parsed_int(" 12 ", "f.csv:2: Batch Size") == 12


def test_only_regular_files_of_a_readable_size_are_read(tmp_path: Path) -> None:
    small = tmp_path / "a.toml"
    small.write_text("x = 1\n")
    assert regular_file(small, "experiment file") == small
    with pytest.raises(UserError, match="is a character device, not a regular file"):
        regular_file(Path("/dev/zero"), "experiment file")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(UserError, match="is a FIFO, not a regular file"):
        regular_file(fifo, "trace file")
    with pytest.raises(UserError, match="6 bytes, over the 5-byte limit"):
        regular_file(small, "experiment file", max_bytes=5)
    with pytest.raises(UserError, match="is a directory"):
        regular_file(tmp_path, "trace file")
    with pytest.raises(UserError, match="trace file not found"):
        regular_file(tmp_path / "none.csv", "trace file")


@pytest.mark.slow
def test_a_vllm_v1_run_stays_within_the_memory_it_was_estimated_to_need(tmp_path: Path) -> None:
    """--memory-budget is only honoured if the estimate is an upper bound: a vllm-v1 run far over
    capacity (every request queued at once, the worst case) peaks below what check_memory computed."""
    import subprocess
    import sys

    from llumverify.settings.config import ClusterConfig, EngineConfig, SimConfig
    from llumverify.sim.engines import ENGINES
    from llumverify.sim.run import estimated_memory_mb

    requests = 20_000
    peak = tmp_path / "peak_kb"
    # VmHWM, not ru_maxrss: Linux carries ru_maxrss over exec, so a child of a pytest worker that
    # has grown reports the worker's peak; VmHWM is the child's own address space
    code = ("import re\nfrom llumverify.cli import main\ntry:\n    main()\nfinally:\n"
            "    hwm = re.search(r'VmHWM:\\s+(\\d+)', open('/proc/self/status').read()).group(1)\n"
            f"    open({str(peak)!r}, 'w').write(hwm)\n")
    subprocess.run([sys.executable, "-c", code, "simulate", "--engine", "vllm-v1", "--requests", str(requests),
                    "--rate", "2000", "--instances", "1", "--policy", "round-robin"],
                   check=True, capture_output=True, timeout=600)
    cfg = SimConfig(engine=EngineConfig(generation="vllm-v1"), cluster=ClusterConfig(num_instances=1))
    need_mb = estimated_memory_mb(requests, 1, int(requests / 2000 / cfg.sample_interval_s) + 1, kb_per_request=ENGINES["vllm-v1"].kb_per_request)
    assert int(peak.read_text()) / 1024 < need_mb
