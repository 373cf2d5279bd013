"""benchmarks/h100_kernel_check.py: on a profile timed at exactly twice first principles, every op and
the MoE block read -50.0 % (units, sign and the shapes priced per TP all line up); bad input is exit 2."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import benchmark_script

from llumverify.sim.catalog import get_gpu
from llumverify.sim.roofline import (decode_attn_ns, gemm_ns, lm_head_ns, load_efficiency, mixed_extra_ns,
                                     prefill_attn_ns, sampler_ns, small_op_ns)

CONFIG = {"num_hidden_layers": 4, "hidden_size": 256, "num_attention_heads": 8, "num_key_value_heads": 2,
          "head_dim": 64, "vocab_size": 1000, "tie_word_embeddings": False, "num_experts": 16,
          "num_experts_per_tok": 2, "moe_intermediate_size": 64, "shared_expert_intermediate_size": 64}


def _write(path: Path, header: str, rows: list[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join([header, *rows]) + "\n")


def _twice_first_principles(script, root: Path) -> None:
    (root / script.CONFIG).parent.mkdir(parents=True)
    (root / script.CONFIG).write_text(json.dumps(CONFIG))
    model, gpu, eff = script.full_attention_model(CONFIG), get_gpu("H100"), load_efficiency()
    for tp in (1, 8):
        folder = root / script.PROFILE / f"tp{tp}"
        q, kv = model.q_dim // tp, max(1, model.kv_heads // tp) * model.head_dim
        gemms = {"qkv_proj": model.hidden * (2 * q + 2 * kv), "o_proj": q * model.hidden}
        dense = [f"{op},{t},{2 * gemm_ns(p, t, 2, gpu, eff) / 1e3}" for op, p in gemms.items() for t in (1, 16, 512)]
        dense += [f"{op},{t},{2 * small_op_ns(model, op, t, gpu, eff, tp) / 1e3}"
                  for op in ("layernorm", "rotary_emb", "qk_norm", "embedding") for t in (1, 16, 512)]
        _write(folder / "dense.csv", "layer,tokens,time_us", dense)
        _write(folder / "per_sequence.csv", "layer,sequences,time_us",
               [f"lm_head,{s},{2 * lm_head_ns(model, s, gpu, eff, tp) / 1e3}" for s in (1, 300)]
               + [f"sampler,{s},{2 * sampler_ns(model, s, gpu, eff) / 1e3}" for s in (1, 300)])
        _write(folder / "attention.csv", "prefill_chunk,kv_prefill,n_decode,kv_decode,time_us",
               [f"0,0,{n},{kv_},{2 * decode_attn_ns(model, n, n * kv_, gpu, eff, tp) / 1e3}" for n, kv_ in ((1, 16), (256, 1024))]
               + [f"{c},{k},0,0,{2 * prefill_attn_ns(model, c, k, gpu, eff, tp) / 1e3}" for c, k in ((16, 0), (512, 64))]
               # mixed rows: decode-only + chunk-only + exactly the RTX-fitted surcharge (read by mixed_summary)
               + [f"{c},{k},{n},{kv_},{(2 * prefill_attn_ns(model, c, k, gpu, eff, tp) + 2 * decode_attn_ns(model, n, n * kv_, gpu, eff, tp) + mixed_extra_ns(model, n, n * kv_, gpu, eff, tp)) / 1e3}"
                  for c, k, n, kv_ in ((16, 0, 1, 16), (512, 64, 256, 1024), (16, 0, 256, 1024))])
    # the MoE block (router, experts, shared expert, the fixed time) as moe_kernel_check.block_ns prices it
    block = benchmark_script("moe_kernel_check").block_ns
    _write(root / script.PROFILE / "tp1" / "moe.csv", "tokens,activated_experts,time_us",
           [f"{t},{a},{2 * block(model, gpu, eff, t, active=a, shared=True) / 1e3}" for t, a in ((1, 2), (512, 16))])


def test_twice_first_principles_reads_minus_fifty_percent_on_every_op(tmp_path: Path, capsys) -> None:
    script = benchmark_script("h100_kernel_check")
    _twice_first_principles(script, tmp_path)
    assert script.main(tmp_path) == 0
    out = capsys.readouterr().out
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in out.splitlines()[2:] if line.startswith("|")]
    ops = [r for r in rows if not r[1].startswith("MoE")]
    assert len(ops) == 2 * 10  # per TP: 2 GEMMs, 4 small ops, lm_head, sampler, decode and prefill attention
    assert all(r[3].startswith("-50.0 %") for r in ops), ops
    moe = {r[1]: r[3] for r in rows if r[1].startswith("MoE")}
    assert moe == {"MoE block, uniform routing": "-50.0 % (2)", "MoE block, all experts": "-50.0 % (1)"}, moe


def test_a_missing_profile_or_a_bad_config_is_exit_2(tmp_path: Path, capsys) -> None:
    script = benchmark_script("h100_kernel_check")
    assert script.main(tmp_path) == 2
    assert "not found" in capsys.readouterr().err
    _twice_first_principles(script, tmp_path)
    (tmp_path / script.CONFIG).write_text("{not json")
    assert script.main(tmp_path) == 2
    assert "not JSON" in capsys.readouterr().err
    (tmp_path / script.CONFIG).write_text(json.dumps({k: v for k, v in CONFIG.items() if k != "head_dim"}))
    assert script.main(tmp_path) == 2
    assert "missing 'head_dim'" in capsys.readouterr().err


def test_mixed_rows_are_read_against_their_decode_and_chunk_rows(tmp_path: Path, capsys) -> None:
    """Extra = mixed - decode-only - chunk-only; on a profile that pays exactly the RTX-fitted surcharge the
    slope of one on the other is 1 and the large rows' medians agree; the rule says it is left out on H100."""
    script = benchmark_script("h100_kernel_check")
    _twice_first_principles(script, tmp_path)
    assert script.main(tmp_path) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("- tp")]
    assert len(lines) == 2, lines
    model, gpu, eff = script.full_attention_model(CONFIG), get_gpu("H100"), load_efficiency()
    big = mixed_extra_ns(model, 256, 256 * 1024, gpu, eff, 1) / 1e3
    assert big > script.LARGE_EXTRA_US > mixed_extra_ns(model, 1, 16, gpu, eff, 1) / 1e3
    assert lines[0].startswith("- tp1: 3 mixed rows, 0 at or below decode-only + chunk-only; measured extra median "
                               f"{big:+.1f} us; slope on the RTX-fitted surcharge +1.000 (1 if it were paid); where that "
                               f"surcharge exceeds 20 us (2 rows, median {big:.1f} us) the measured extra is median "
                               f"{big:+.1f} us; left out on H100"), lines[0]


def test_mixed_step_without_its_profiles_is_one_line_and_exit_2(tmp_path: Path) -> None:
    """benchmarks/mixed_step.py (which prints the RTX profiles' mixed_summary) names the missing folder."""
    import os
    import subprocess
    import sys

    script = Path(__file__).resolve().parents[1] / "benchmarks" / "mixed_step.py"
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "LLUMVERIFY_VALIDATION": str(tmp_path)})
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip().splitlines() == [f"mixed_step: error: {tmp_path}/llmservingsim/profiles/RTX4090/"
                                                "Llama-3.1-8B: profile folder not found"]
