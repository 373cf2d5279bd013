"""sim/profile.py: a StepCost from a one-layer vLLM kernel profile (LLMServingSim format)."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from conftest import validation_dir

from llumverify.errors import UserError
from llumverify.sim.profile import (attention_fit_errors, attention_fit_rows, moe_block_ns, profile_meta,
                                    read_moe, step_cost_from_profile)
from llumverify.sim.stepcost import StepCost, interpolate, load_step_cost


PROFILES = validation_dir() / "llmservingsim" / "profiles"
REAL = [("RTX4090/Llama-3.1-8B", 32), ("RTXPRO6000/Llama-3.1-8B", 32), ("RTXPRO6000/Qwen3-32B", 64)]


def real_profile(name: str) -> Path:
    path = PROFILES / name
    if not (path / "tp1" / "attention.csv").is_file():
        pytest.skip(f"no validation profile at {path} (set LLUMVERIFY_VALIDATION)")
    return path


def csv_rows(path: Path) -> list[dict[str, str]]:
    with path.open(encoding="utf-8") as f:
        return list(csv.DictReader(f))


def test_a_step_cost_built_in_code_that_falls_as_it_grows_is_refused() -> None:
    """The monotone rule lives in StepCost.validate, so a table built in code (a profile, first principles, a
    test) meets it too, not only one read from a TOML: a 20-token step cheaper than a 14-token one is a slip."""
    StepCost(fixed_ns=0, linear=((1, 100), (14, 900), (20, 900)), per_seq=((1, 5),)).validate()  # flat is fine
    with pytest.raises(UserError, match="StepCost.linear must not fall as x grows: 900 ns at x = 14, then 400 at x = 20"):
        StepCost(fixed_ns=0, linear=((1, 100), (14, 900), (20, 400)), per_seq=((1, 5),)).validate()
    with pytest.raises(UserError, match="StepCost.per_seq must not fall"):
        StepCost(fixed_ns=0, linear=((1, 100),), per_seq=((1, 5), (8, 4))).validate()


# ---------------------------------------------------------------------------- real profiles
def test_rtx4090_profile_is_a_valid_step_cost(tmp_path: Path) -> None:
    folder = real_profile("RTX4090/Llama-3.1-8B")
    cost = step_cost_from_profile(folder, 32, fixed_ns=1234)
    cost.validate()
    assert (cost.engine, cost.gpu, cost.model) == ("vllm-v1", "RTX4090", "meta-llama/Llama-3.1-8B")
    assert "vLLM 0.19.0" in cost.source and "x 32 layers" in cost.source
    assert cost.fixed_ns == 1234
    assert len(cost.linear) <= 24 and len(cost.per_seq) <= 24
    assert all(a[1] <= b[1] for a, b in zip(cost.linear, cost.linear[1:]))
    assert cost.decode_attn_ns_per_token > 0 and cost.prefill_attn_fs_per_pair > 0
    (tmp_path / "c.toml").write_text(cost.to_toml(), encoding="utf-8")
    assert load_step_cost(tmp_path / "c.toml") == cost
    assert profile_meta(folder)["vllm_version"] == "0.19.0"


@pytest.mark.parametrize("name,layers", REAL)
def test_one_token_decode_is_the_sum_of_its_kernels(name: str, layers: int) -> None:
    """By hand: embedding + L x (2 x layernorm [+ 2 x qk_norm] + other ops + attention) + final
    norm + lm_head + sampler, from the 1-token / 1-sequence / (1 decode, 16 KV) rows."""
    folder = real_profile(name)
    dense = {r["layer"]: float(r["time_us"]) for r in csv_rows(folder / "tp1" / "dense.csv") if r["tokens"] == "1"}
    seq = {r["layer"]: float(r["time_us"]) for r in csv_rows(folder / "tp1" / "per_sequence.csv")
           if r["sequences"] == "1"}
    attn = next(float(r["time_us"]) for r in csv_rows(folder / "tp1" / "attention.csv")
                if (r["prefill_chunk"], r["kv_prefill"], r["n_decode"], r["kv_decode"]) == ("0", "0", "1", "16"))
    per_layer = sum(us * (2 if op in ("layernorm", "qk_norm") else 1) for op, us in dense.items()
                    if op not in ("embedding", "final_layernorm"))
    dense_us = dense["embedding"] + layers * per_layer + dense["final_layernorm"]
    cost = step_cost_from_profile(folder, layers)
    assert abs(interpolate(cost.linear, 1) - dense_us * 1000) <= 1
    assert abs(interpolate(cost.per_seq, 1) - sum(seq.values()) * 1000) <= 1
    expected_ns = (dense_us + sum(seq.values()) + layers * attn) * 1000
    assert cost.step_ns([], 1, 16) == pytest.approx(expected_ns, rel=0.01)
    assert 5e6 < expected_ns < 60e6  # 5-60 ms: a bandwidth-bound read of 8-32 B parameters


# Median / p90 APE of attention_fit_errors on the three profiles (prefill, decode, mixed), as the
# simulator charges them (integer StepCost coefficients for the real layer count):
#   RTX4090/Llama     median 0.140/0.067/0.150  p90 0.248/0.181/0.432
#   RTXPRO6000/Llama  median 0.105/0.046/0.134  p90 0.192/0.122/0.496
#   RTXPRO6000/Qwen3  median 0.074/0.060/0.096  p90 0.201/0.151/0.403
# (without the context and mixed-step terms: median 0.162/0.070/0.427, 0.237/0.047/0.334, 0.216/0.059/0.539).
@pytest.mark.parametrize("name,layers,medians,p90s", [
    ("RTX4090/Llama-3.1-8B", 32, (0.16, 0.08, 0.17), (0.27, 0.20, 0.46)),
    ("RTXPRO6000/Llama-3.1-8B", 32, (0.12, 0.06, 0.15), (0.21, 0.14, 0.52)),
    ("RTXPRO6000/Qwen3-32B", 64, (0.09, 0.07, 0.11), (0.22, 0.17, 0.43))])
def test_attention_fit_quality(name: str, layers: int, medians: tuple[float, float, float],
                               p90s: tuple[float, float, float]) -> None:
    folder = real_profile(name)
    errors = attention_fit_errors(folder, layers)
    assert errors["n_rows"] == len(csv_rows(folder / "tp1" / "attention.csv"))
    assert errors["prefill_rows"] + errors["decode_rows"] + errors["mixed_rows"] == errors["n_rows"]
    for kind, median, p90 in zip(("prefill", "decode", "mixed"), medians, p90s):
        assert errors[f"{kind}_median_ape"] < median, (kind, errors)
        assert errors[f"{kind}_p90_ape"] < p90, (kind, errors)


@pytest.mark.slow
@pytest.mark.parametrize("name,layers", REAL)
def test_context_and_mixed_terms_are_measured(name: str, layers: int) -> None:
    """Small chunks over long context cost about ∝ ctx, and decodes sharing a step with a chunk cost
    more per KV token than pure decodes (1.6-3x here): both terms come out positive."""
    cost = step_cost_from_profile(real_profile(name), layers)
    assert cost.prefill_attn_ps_per_ctx_token > 0
    assert cost.mixed_decode_attn_ns_per_token > cost.decode_attn_ns_per_token / 2
    # a 16-token chunk over >= 4096 cached tokens: within 30% (it was 70-90% low without the ctx term)
    rows = [r for r in attention_fit_rows(real_profile(name), layers) if r[2] == 0 and r[0] == 16 and r[1] >= 4096]
    assert rows and all(abs(r[6]) < 0.3 for r in rows), rows


@pytest.mark.parametrize("name,layers", REAL)
def test_fitted_rows_are_what_the_simulator_charges(name: str, layers: int) -> None:
    """fitted_us x layers is the attention part of StepCost.step_ns for the same step."""
    folder = real_profile(name)
    cost = step_cost_from_profile(folder, layers)
    no_attn = StepCost(fixed_ns=cost.fixed_ns, linear=cost.linear, per_seq=cost.per_seq)
    for c, ctx, n, kv, _, fitted_us, _ in attention_fit_rows(folder, layers)[::97]:
        chunks = [(c, ctx)] if c else []
        attn_ns = cost.step_ns(chunks, n, n * kv) - no_attn.step_ns(chunks, n, n * kv)
        assert fitted_us * layers * 1000 == pytest.approx(attn_ns, abs=1e-6)


# ---------------------------------------------------------------------------- synthetic profiles
# Per-layer attention in ns: prefill 5000 + 20/token + 3/context token + 0.05/pair; decode 8000 +
# 100/seq + 4/KV token; decodes sharing a step with a chunk 50/seq + 2/KV token more.
P_NS, P_PER_TOKEN, P_PER_CTX, P_PER_PAIR = 5000.0, 20.0, 3.0, 0.05
D_NS, D_PER_SEQ, D_PER_TOKEN = 8000.0, 100.0, 4.0
M_PER_SEQ, M_PER_TOKEN = 50.0, 2.0


def synthetic_attention_us(c: int, ctx: int, n: int, kv: int) -> float:
    t = 0.0
    if c:
        t += P_NS + P_PER_TOKEN * c + P_PER_CTX * ctx + P_PER_PAIR * c * (2 * ctx + c + 1) / 2
    if n:
        t += D_NS + D_PER_SEQ * n + D_PER_TOKEN * n * kv
    if c and n:
        t += M_PER_SEQ * n + M_PER_TOKEN * n * kv
    return t / 1000


def make_profile(root: Path, meta: str | None = None) -> Path:
    """A small profile: dense ops in us = base + per-token slope, exact attention rows."""
    (root / "tp1").mkdir(parents=True)
    (root / "meta.yaml").write_text(meta if meta is not None else (
        "# synthetic\nvllm_version: 0.19.0\nhardware: TOYGPU\nmodel: 'toy/model-1B'\n"
        "engine_effective:\n  hf_overrides:\n    num_hidden_layers: 1\ntp_degrees: [1]\n"), encoding="utf-8")
    ops = {"embedding": (1.0, 0.001), "layernorm": (2.0, 0.01), "qkv_proj": (10.0, 0.1),
           "final_layernorm": (3.0, 0.01)}
    lines = ["layer,tokens,time_us"] + [f"{op},{t},{a + b * t:g}" for op, (a, b) in ops.items()
                                        for t in (1, 2, 4, 8, 16, 64, 256, 1024, 2048)]
    (root / "tp1" / "dense.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    per_seq = (("lm_head", 500.0, 0.5), ("sampler", 20.0, 0.2))
    lines = ["layer,sequences,time_us"] + [f"{op},{s},{a + b * s:g}" for op, a, b in per_seq
                                           for s in (1, 2, 8, 64, 256)]
    (root / "tp1" / "per_sequence.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    lines = ["prefill_chunk,kv_prefill,n_decode,kv_decode,time_us"]
    for c in (0, 16, 128, 1024):
        for ctx in ((0,) if c == 0 else (0, 16, 1024)):
            for n in (0, 1, 16, 128):
                for kv in ((0,) if n == 0 else (16, 512, 4096)):
                    if c or n:
                        lines.append(f"{c},{ctx},{n},{kv},{synthetic_attention_us(c, ctx, n, kv):.9g}")
    (root / "tp1" / "attention.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return root


def test_synthetic_profile_recovers_the_model(tmp_path: Path) -> None:
    folder = make_profile(tmp_path / "p")
    cost = step_cost_from_profile(folder, 10, fixed_ns=7)
    assert (cost.gpu, cost.model, cost.fixed_ns) == ("TOYGPU", "toy/model-1B", 7)
    # embedding + 10 x (2 x layernorm + qkv_proj) + final_layernorm at 1 and 2048 tokens
    for t in (1, 2048):
        us = (1 + 0.001 * t) + 10 * (2 * (2 + 0.01 * t) + (10 + 0.1 * t)) + (3 + 0.01 * t)
        assert abs(interpolate(cost.linear, t) - us * 1000) <= 1
    assert interpolate(cost.per_seq, 64) == round((500 + 0.5 * 64 + 20 + 0.2 * 64) * 1000)
    assert (cost.prefill_attn_ns, cost.prefill_attn_ps_per_token, cost.prefill_attn_ps_per_ctx_token,
            cost.prefill_attn_fs_per_pair) == (50_000, 200_000, 30_000, 500_000)
    assert (cost.decode_attn_ns, cost.decode_attn_ns_per_seq, cost.decode_attn_ns_per_token) == (80_000, 1000, 40)
    assert (cost.mixed_decode_attn_ns_per_seq, cost.mixed_decode_attn_ns_per_token) == (500, 20)
    # exact but for StepCost's integer division (pairs x 500_000 fs // 1e6: under 1 ns in >= 50 us)
    errors = attention_fit_errors(folder, 10)
    assert max(errors[f"{k}_p90_ape"] for k in ("prefill", "decode", "mixed")) < 1e-5
    assert all(abs(r[6]) < 1e-5 for r in attention_fit_rows(folder, 10))
    assert errors["prefill_rows"] + errors["decode_rows"] + errors["mixed_rows"] == errors["n_rows"]


def test_an_moe_profile_charges_its_sparse_block_at_the_experts_a_step_activates(tmp_path: Path) -> None:
    """moe.csv (one layer's router + experts at T tokens and A activated experts, LLMServingSim's
    MoE profiles): a step of T tokens pays it at A = E(1 - (1 - k/E)^T). Before, the block was
    left out: an MoE profile priced a step without its MLP."""
    folder = make_profile(tmp_path / "p")
    lines = ["tokens,activated_experts,time_us"]
    for t in (1, 2, 4, 8, 64):
        for a in (8, 16, 32, 64):
            if a <= 8 * t:
                lines.append(f"{t},{a},{10 + 2 * a + 0.5 * t:.9g}")  # 10 us + 2 us an expert + 0.5 us a token
    (folder / "tp1" / "moe.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    table = read_moe(folder)
    assert table is not None and table[1] == [(8, 26500.0)]
    for t in (1, 3, 8, 20, 64):
        active = 64 * (1 - (1 - 8 / 64) ** t)
        assert moe_block_ns(table, t, 64, 8) == pytest.approx((10 + 2 * active + 0.5 * t) * 1000, rel=1e-9)
    dense = step_cost_from_profile(make_profile(tmp_path / "q"), 10)
    cost = step_cost_from_profile(folder, 10, routing=(64, 8))
    for t in (1, 8, 64):
        assert interpolate(cost.linear, t) - interpolate(dense.linear, t) == pytest.approx(
            10 * moe_block_ns(table, t, 64, 8), abs=2)
    with pytest.raises(UserError, match="moe.csv present, but toy/model-1B is a dense model"):
        step_cost_from_profile(folder, 10)
    with pytest.raises(UserError, match="moe.csv missing, but toy/model-1B is an MoE model"):
        step_cost_from_profile(tmp_path / "q", 10, routing=(64, 8))
    # two expert-parallel ranks: each runs its half of the experts both ranks' tokens activate
    active = 64 * (1 - (1 - 8 / 64) ** 16) / 2
    assert moe_block_ns(table, 8, 64, 8, ranks=2) == pytest.approx((10 + 2 * active + 0.5 * 8) * 1000, rel=1e-9)
    (folder / "tp1" / "moe.csv").write_text("tokens,activated_experts,time_us\n4,8,1\n4,8,2\n", encoding="utf-8")
    with pytest.raises(UserError, match="moe.csv:3: duplicate row for tokens=4, activated_experts=8"):
        read_moe(folder)


def test_an_expert_parallel_engine_takes_an_moe_profile_plus_the_token_exchange(tmp_path: Path) -> None:
    """dp = 2 with expert parallelism at tp 1: the profile's block at each rank's share plus the
    exchange of first principles; sharded experts or a dense profile's TP are refused for dp > 1."""
    from llumverify.settings.config import HardwareConfig
    from llumverify.sim import engine_profile
    from llumverify.sim.catalog import get_gpu, get_model
    from llumverify.sim.collectives import moe_exchange_ns

    folder = make_profile(tmp_path / "p", "vllm_version: 0.19.0\nhardware: RTXPRO6000\nmodel: Qwen/Qwen3-30B-A3B\n")
    (folder / "tp1" / "moe.csv").write_text("tokens,activated_experts,time_us\n1,8,50\n64,8,70\n64,128,800\n",
                                            encoding="utf-8")
    qwen = get_model("Qwen3-30B-A3B")
    one = engine_profile.step_cost(HardwareConfig(profile=str(folder)))
    two = engine_profile.step_cost(HardwareConfig(profile=str(folder), dp=2, expert_parallel=True))
    table = read_moe(folder)
    link = get_gpu("RTX PRO 6000").link
    for t in (1, 64, 1024):
        added = interpolate(two.linear, t) - interpolate(one.linear, t)
        assert added == pytest.approx(48 * (moe_block_ns(table, t, 128, 8, 2) - moe_block_ns(table, t, 128, 8))
                                      + moe_exchange_ns(qwen, t, 2, link), abs=3)
    assert "2 expert-parallel ranks, PCIe-host token exchange" in two.source
    with pytest.raises(UserError, match="only with expert parallelism at tp 1"):
        engine_profile.step_cost(HardwareConfig(profile=str(folder), dp=2))


def test_without_mixed_rows_the_mixed_terms_are_zero(tmp_path: Path) -> None:
    folder = make_profile(tmp_path / "p")
    path = folder / "tp1" / "attention.csv"
    lines = path.read_text(encoding="utf-8").splitlines()
    keep = [lines[0]] + [line for line in lines[1:] if line.startswith("0,") or ",0,0," in line]
    path.write_text("\n".join(keep) + "\n", encoding="utf-8")
    cost = step_cost_from_profile(folder, 10)
    assert (cost.mixed_decode_attn_ns_per_seq, cost.mixed_decode_attn_ns_per_token) == (0, 0)
    assert (cost.prefill_attn_ps_per_ctx_token, cost.decode_attn_ns_per_token) == (30_000, 40)
    assert attention_fit_errors(folder, 10)["mixed_rows"] == 0


def test_fit_is_non_negative(tmp_path: Path) -> None:
    """Decode time falling with the batch would fit a negative per-sequence term: it is clipped to 0."""
    folder = make_profile(tmp_path / "p")
    path = folder / "tp1" / "attention.csv"
    lines = path.read_text(encoding="utf-8").splitlines()
    out = [lines[0]]
    for line in lines[1:]:
        c, ctx, n, kv, _ = line.split(",")
        if c == "0":
            line = f"0,0,{n},{kv},{(9000 - 30 * int(n) + 4 * int(n) * int(kv)) / 1000:.9g}"
        out.append(line)
    path.write_text("\n".join(out) + "\n", encoding="utf-8")
    cost = step_cost_from_profile(folder, 1)
    assert cost.decode_attn_ns_per_seq == 0 and cost.decode_attn_ns > 0 and cost.decode_attn_ns_per_token >= 4


def test_profile_meta_reads_flat_keys(tmp_path: Path) -> None:
    folder = make_profile(tmp_path / "p")
    meta = profile_meta(folder)
    assert meta["model"] == "toy/model-1B" and meta["hardware"] == "TOYGPU" and meta["tp_degrees"] == "[1]"
    assert "engine_effective" not in meta and "num_hidden_layers" not in meta


# ---------------------------------------------------------------------------- bad input
def expect_error(match: str, folder: Path, num_layers: int = 32) -> str:
    with pytest.raises(UserError, match=match) as info:
        step_cost_from_profile(folder, num_layers)
    message = str(info.value)
    assert "\n" not in message
    return message


def test_missing_folder_and_files(tmp_path: Path) -> None:
    expect_error("profile folder not found", tmp_path / "nowhere")
    folder = make_profile(tmp_path / "p")
    (folder / "tp1" / "per_sequence.csv").unlink()
    expect_error(r"per_sequence\.csv: file not found", folder)
    (folder / "meta.yaml").unlink()
    expect_error(r"meta\.yaml: file not found", folder)


def test_bad_rows_name_file_and_line(tmp_path: Path) -> None:
    folder = make_profile(tmp_path / "p")
    dense = folder / "tp1" / "dense.csv"
    text = dense.read_text(encoding="utf-8")
    lines = text.splitlines()
    dense.write_text("\n".join(lines[:3] + ["qkv_proj,many,3.0"] + lines[3:]) + "\n", encoding="utf-8")
    expect_error(r"dense\.csv:4: tokens must be an integer, got 'many'", folder)
    dense.write_text("\n".join(lines[:3] + ["qkv_proj,3"] + lines[3:]) + "\n", encoding="utf-8")
    expect_error(r"dense\.csv:4: expected 3 fields, got 2", folder)
    dense.write_text("\n".join(lines[:3] + ["qkv_proj,3,-1"] + lines[3:]) + "\n", encoding="utf-8")
    expect_error(r"dense\.csv:4: time_us must be a number in \[0, 60,000,000\] µs \(a minute\), got '-1'", folder)
    dense.write_text("\n".join(lines[:3] + ["qkv_proj,3,1e18"] + lines[3:]) + "\n", encoding="utf-8")
    expect_error(r"dense\.csv:4: time_us must be a number in \[0, 60,000,000\] µs \(a minute\), got '1e18'", folder)
    dense.write_text(text + "qkv_proj,3,1.0\n", encoding="utf-8")  # 3 tokens measured for one op only
    expect_error(r"dense\.csv: tokens=3 has no row for embedding, final_layernorm, layernorm", folder)
    dense.write_text(text.replace("qkv_proj,4,", "qkv_prj,4,"), encoding="utf-8")  # one row's layer misspelt
    expect_error(r"dense\.csv:\d+: layer 'qkv_prj' is at 1 of the 9 tokens values only \(tokens=4, which lacks "
                 r"'qkv_proj'\): misspelt\?", folder)
    dense.write_text(text.replace("layer,tokens,time_us", "layer,n_tokens,time_us"), encoding="utf-8")
    expect_error(r"dense\.csv:1: missing column 'tokens'", folder)
    dense.write_text(text, encoding="utf-8")
    attention = folder / "tp1" / "attention.csv"
    attention.write_text(attention.read_text(encoding="utf-8") + "16,0,0,x,1.0\n", encoding="utf-8")
    expect_error(r"attention\.csv:\d+: kv_decode must be an integer", folder)


def test_non_utf8_and_empty_files(tmp_path: Path) -> None:
    folder = make_profile(tmp_path / "p")
    attention = folder / "tp1" / "attention.csv"
    attention.write_bytes(b"prefill_chunk,kv_prefill,n_decode,kv_decode,time_us\n16,0,0,0,\xff\xfe\n")
    expect_error(r"attention\.csv: not UTF-8 text", folder)
    attention.write_text("", encoding="utf-8")
    expect_error(r"attention\.csv: empty file", folder)
    attention.write_text("prefill_chunk,kv_prefill,n_decode,kv_decode,time_us\n0,0,1,16,9.0\n", encoding="utf-8")
    expect_error(r"attention\.csv: needs at least 3 prefill-only", folder)
    with pytest.raises(UserError, match=r"meta\.yaml: not UTF-8"):
        (folder / "meta.yaml").write_bytes(b"model: \xc3\x28\n")
        profile_meta(folder)


def test_bad_meta_and_arguments(tmp_path: Path) -> None:
    folder = make_profile(tmp_path / "p", meta="model: toy\nvllm_version: 1\n")
    expect_error(r"meta\.yaml: missing key 'hardware'", folder)
    for n, (meta, why) in enumerate((
            ("hardware: TOYGPU\nmodel: toy\nmodel: other\n", r"meta\.yaml:3: key 'model' given twice"),
            ("hardware: 'TOYGPU\nmodel: toy\n", r"meta\.yaml:1: hardware: unclosed ' in \"'TOYGPU\""),
            ("hardware: [TOYGPU\nmodel: toy\n", r"meta\.yaml:1: hardware: unclosed \["),
            ("hardware TOYGPU\nmodel: toy\n", r"meta\.yaml:1: expected a top-level `key: value` line"))):
        expect_error(why, make_profile(tmp_path / f"meta{n}", meta=meta))
    folder = make_profile(tmp_path / "q")
    expect_error("num_layers must be an integer >= 1", folder, num_layers=0)
    with pytest.raises(UserError, match="fixed_ns must be an integer >= 0"):
        step_cost_from_profile(folder, 4, fixed_ns=-1)
    with pytest.raises(UserError, match="num_layers must be an integer >= 1"):
        attention_fit_errors(folder, 0)


def test_a_profile_measured_on_a_device_the_catalog_lacks_is_read_by_its_label(tmp_path: Path) -> None:
    """The label and the device are compared only where the catalog knows both: a device it lacks (a new
    variant) leaves the label to name the GPU, as before; two known, different GPUs are refused."""
    (tmp_path / "meta.yaml").write_text("hardware: RTX4090\ngpu: NVIDIA GeForce RTX 4090 Mystery Edition\n")
    assert profile_meta(tmp_path)["hardware"] == "RTX4090"
    (tmp_path / "meta.yaml").write_text("hardware: RTX4090\ngpu: NVIDIA H100 80GB HBM3\n")
    with pytest.raises(UserError, match="which GPU was profiled"):
        profile_meta(tmp_path)
