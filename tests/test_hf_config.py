"""sim/hf_config.py: a model the catalog lacks, priced from its HF config.json, as exactly as the
catalog entry written from the same file; what it cannot price is refused in one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import validation_dir
from test_run_hardware import LLAMA, cli, needs_shared, small_run

from llumverify.errors import UserError
from llumverify.sim.catalog import SHAPES, get_model
from llumverify.sim.roofline import step_cost_first_principles

CONFIGS = Path(__file__).parent / "hf_configs"
# config folder -> the catalog entry written from the same HF config.json
CATALOG = {"codellama-34b-instruct-hf": "CodeLlama-34B", "llama-2-7b-hf": "Llama-2-7B",
           "llama-3.1-70b-instruct": "Llama-3-70B", "llama-3.1-8b-instruct": "Llama-3.1-8B",
           "mistral-nemo-instruct-2407": "Mistral-Nemo-12B", "mixtral-8x7b-v0.1": "Mixtral-8x7B",
           "qwen2.5-7b-instruct": "Qwen2.5-7B", "qwen3-14b": "Qwen3-14B", "qwen3-30b-a3b": "Qwen3-30B-A3B",
           "yi-34b": "Yi-34B"}


@pytest.mark.parametrize("folder", sorted(CATALOG))
def test_a_config_rebuilds_its_catalog_entry(folder: str) -> None:
    """Shapes, biases, norms, experts and the parameter count (which matches the model card) agree,
    so a model priced from its config costs what its catalog entry costs."""
    built, entry = get_model(str(CONFIGS / folder / "config.json")), get_model(CATALOG[folder])
    assert {f: getattr(built, f) for f in (*SHAPES, "params")} == {f: getattr(entry, f) for f in (*SHAPES, "params")}
    a, b = step_cost_first_principles(built, "H100", tp=2), step_cost_first_principles(entry, "H100", tp=2)
    assert a.step_ns([(512, 1024)], 64, 64 * 1024) == b.step_ns([(512, 1024)], 64, 64 * 1024)


def test_a_folder_or_its_config_is_the_model_and_names_stay_the_catalogs(tmp_path: Path) -> None:
    """A config is read only from its path: its name never shadows a catalog name (here a catalog
    model in fp8) and is not a name later lookups know, so what a name means does not depend on
    what else the process has read (a sweep's grid order)."""
    folder = tmp_path / "house-moe"
    folder.mkdir()
    cfg = json.loads((CONFIGS / "qwen3-30b-a3b" / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**cfg, "_name_or_path": "acme/Llama-3.1-8B-FP8",
                                                    "quantization_config": {"quant_method": "fp8"}}))
    model = get_model(str(folder))
    assert model is get_model(str(folder / "config.json")) and model.moe and model.name == "acme/Llama-3.1-8B-FP8"
    assert model.weight_format == "fp8"
    catalog = get_model("Llama-3.1-8B-FP8")
    assert not catalog.moe and catalog.weight_format == "fp8" and catalog.name == "Llama-3.1-8B"
    with pytest.raises(UserError, match="unknown model 'house-moe'"):
        get_model("house-moe")


def test_a_fine_tune_keeping_its_base_name_is_its_own_model(tmp_path: Path) -> None:
    """A fine-tune whose config keeps the base model's name but resized its vocabulary is priced with
    its own shapes; the base name still means the catalog entry."""
    path = _edited(tmp_path, "llama-3.1-8b-instruct", _name_or_path="meta-llama/Llama-3.1-8B", vocab_size=128512)
    tuned, base = get_model(str(path)), get_model("meta-llama/Llama-3.1-8B")
    assert tuned.vocab == 128512 and base.vocab == 128256 and tuned.params == base.params + 2 * 256 * 4096


@pytest.mark.parametrize("folder, why", [("deepseek-v2-lite", "model_type 'deepseek_v2' is not modelled"),
                                         ("glm-5.2-fp8", "model_type 'glm_moe_dsa' is not modelled")])
def test_architectures_the_roofline_does_not_price_are_refused(folder: str, why: str) -> None:
    with pytest.raises(UserError, match=why):
        get_model(str(CONFIGS / folder / "config.json"))


def _edited(tmp_path: Path, base: str, **changes) -> Path:
    cfg = json.loads((CONFIGS / base / "config.json").read_text())
    cfg.update(changes)
    path = tmp_path / "config.json"
    path.write_text(json.dumps({k: v for k, v in cfg.items() if v != "DELETE"}))
    return path


def test_a_float32_checkpoint_is_served_in_16_bits(tmp_path: Path) -> None:
    """vLLM's dtype "auto" serves a float32 checkpoint in 16 bits (fp16/bf16), so its weights and KV cache take
    2 bytes a value: Llama-3.1-8B's shapes with torch_dtype float32 hold 8,030,261,248 x 2 weight bytes and
    32 layers x (K, V) x 8 KV heads x 128 x 2 bytes of KV a token, as the bf16 checkpoint does."""
    model = get_model(str(_edited(tmp_path, "llama-3.1-8b-instruct", torch_dtype="float32")))
    assert model.dtype_bytes == 2
    assert model.kv_bytes_per_token() == 32 * 2 * 8 * 128 * 2
    assert model.weight_bytes == 8_030_261_248 * 2


@pytest.mark.parametrize("base, changes, why", [
    ("llama-3.1-8b-instruct", {"hidden_act": "gelu"}, "hidden_act 'gelu'"),
    ("llama-3.1-8b-instruct", {"num_hidden_layers": "DELETE"}, "num_hidden_layers is missing"),
    ("llama-3.1-8b-instruct", {"hidden_size": 40.5}, "hidden_size must be a positive integer"),
    ("llama-3.1-8b-instruct", {"num_key_value_heads": 5}, "multiple of num_key_value_heads 5"),
    ("llama-3.1-8b-instruct", {"tie_word_embeddings": "no"}, "tie_word_embeddings must be true or false"),
    ("llama-3.1-8b-instruct", {"quantization_config": {"quant_method": "awq"}}, "quantization quant_method 'awq' is not modelled"),
    ("llama-3.1-8b-instruct", {"quantization_config": {"quant_method": "gptq", "bits": 8}}, "'gptq', bits 8 is not modelled"),
    ("llama-3.1-8b-instruct", {"quantization_config": "fp8"}, "quantization_config of type str"),
    ("llama-3.1-8b-instruct", {"text_config": {}}, "text_config is not read"),
    ("llama-3.1-8b-instruct", {"torch_dtype": "int8"}, "torch_dtype 'int8'"),
    ("qwen3-30b-a3b", {"mlp_only_layers": [0, 1]}, "interleaved are not modelled"),
    ("qwen3-30b-a3b", {"num_experts_per_tok": 129}, "num_experts_per_tok 129 is more than the 128 experts"),
    ("llama-3.1-8b-instruct", {"model_type": ["llama"]}, "model_type \\['llama'\\] is not modelled"),
    ("llama-3.1-8b-instruct", {"architectures": ["Qwen3MoeForCausalLM"]},
     "architectures \\['Qwen3MoeForCausalLM'\\] contradict model_type 'llama'"),
    ("qwen3-30b-a3b", {"architectures": "Qwen3MoeForCausalLM"}, "architectures 'Qwen3MoeForCausalLM' contradict"),
    ("llama-3.1-8b-instruct", {"torch_dtype": ["bfloat16"]}, "torch_dtype \\['bfloat16'\\]"),
    ("llama-3.1-8b-instruct", {"mlp_bias": "false"}, "mlp_bias must be true or false, got 'false'"),
    ("llama-3.1-8b-instruct", {"max_position_embeddings": -5}, "max_position_embeddings must be a positive integer, got -5"),
    ("llama-3.1-8b-instruct", {"max_position_embeddings": "4096"}, "max_position_embeddings must be a positive integer"),
    ("llama-3.1-8b-instruct", {"sliding_window": "abc"}, "sliding_window must be a positive integer, got 'abc'"),
    ("qwen2.5-7b-instruct", {"use_sliding_window": "no"}, "use_sliding_window must be true or false, got 'no'"),
    ("llama-3.1-8b-instruct", {"head_dim": 1}, "head_dim 1: vLLM's attention kernels take a multiple of 8"),
    ("llama-3.1-8b-instruct", {"hidden_size": 4100, "num_attention_heads": 41, "num_key_value_heads": 41},
     "head_dim 100 \\(hidden_size / num_attention_heads\\): vLLM's attention kernels take a multiple of 8"),
])
def test_what_cannot_be_priced_is_named(tmp_path: Path, base: str, changes: dict, why: str) -> None:
    with pytest.raises(UserError, match=why):
        get_model(str(_edited(tmp_path, base, **changes)))


def test_not_json_and_not_found_are_one_line(tmp_path: Path) -> None:
    (tmp_path / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(UserError, match="nested too deeply"):
        get_model(str(tmp_path / "deep.json"))
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(UserError, match="not a JSON file"):
        get_model(str(tmp_path / "bad.json"))
    with pytest.raises(UserError, match="missing.json: model config.json not found"):
        get_model(str(tmp_path / "missing.json"))
    with pytest.raises(UserError, match="no config.json there, and no catalog model of that name"):
        get_model(str(tmp_path / "missing"))  # a folder without a config.json is not a catalog name either
    # vLLM runs name local checkpoints by path: without a config.json there, the folder's name is looked up
    assert get_model(str(tmp_path / "models" / "Llama-3.1-8B")).name == "Llama-3.1-8B"
    (tmp_path / "Llama-3.1-8B").mkdir()  # a folder in the working directory does not capture a bare catalog name
    assert get_model("Llama-3.1-8B").name == "Llama-3.1-8B"
    with pytest.raises(UserError, match="give the path of its HF config.json"):
        get_model("google/gemma-2-9b")


@needs_shared
def test_validate_a_run_of_a_model_the_catalog_lacks(tmp_path: Path, capsys) -> None:
    """A run of an unlisted model replays from its config.json exactly as the catalog entry does, and
    without any step-cost option validate prices the run's own GPU and model from first principles."""
    known, workload = small_run(tmp_path / "known")
    assert cli("validate", str(known), "--workload", str(workload)) == 0
    default = capsys.readouterr().out
    assert "step costs: first principles (sim/roofline.py): RTX 4090 datasheet peaks, Llama-3.1-8B shapes" in default
    unknown, _ = small_run(tmp_path / "unknown", model="acme/house-llama-8b")
    assert cli("validate", str(unknown), "--workload", str(workload)) == 2
    assert "unknown model 'acme/house-llama-8b'" in capsys.readouterr().err
    config = str(CONFIGS / "llama-3.1-8b-instruct")
    assert cli("validate", str(unknown), "--workload", str(workload), "--model", config) == 0
    tables = capsys.readouterr().out
    assert tables.split("all requests")[1] == default.split("all requests")[1]
    assert cli("validate", str(known), "--workload", str(workload), "--model", str(CONFIGS / "qwen3-14b")) == 2
    assert "ran meta-llama/Llama-3.1-8B" in capsys.readouterr().err
    assert cli("validate", str(known), "--workload", str(workload), "--profile", str(LLAMA), "--model", config) == 0


def test_static_batches_of_a_model_the_catalog_lacks(tmp_path: Path, capsys) -> None:
    """Rows naming an unlisted model are priced from the config.json --model gives (its folder's name
    is the model's), exactly as rows of the catalog model with its shapes; --model alone picks them."""
    head = "Hardware,Num of Hardware,Framework,Model,Input Output Length,Batch Size,Latency,Throughput\n"
    rows = "".join(f"Nvidia A100 GPU,1,vLLM,{{m}},{n},{b},{0.01 * n},1\n" for n, b in ((128, 1), (256, 16), (1024, 64)))
    folder = tmp_path / "house-llama-8b"
    folder.mkdir()
    (folder / "config.json").write_text((CONFIGS / "llama-3.1-8b-instruct" / "config.json").read_text())
    sims = []
    for name, model in (("acme/house-llama-8b", str(folder)), ("meta-llama/Llama-3.1-8B", "Llama-3.1-8B")):
        csv = tmp_path / f"{model.replace('/', '_')}.csv"
        csv.write_text(head + rows.format(m=name))
        out = tmp_path / f"out-{len(sims)}"
        assert cli("validate", "--static-batch", str(csv), "--model", model, "--out", str(out)) == 0
        sims.append([r["sim_s"] for r in json.loads((out / "validation.json").read_text())["rows"]])
    assert len(sims[0]) == 3 and sims[0] == sims[1]
    capsys.readouterr()


@pytest.mark.skipif(not (validation_dir() / "argonne").is_dir(), reason=f"no shared validation data at {validation_dir()}")
def test_a_model_no_catalog_holds_is_priced_from_its_config_within_the_bar(tmp_path: Path) -> None:
    """Qwen1.5-7B (MHA, q/k/v biases) is in no catalog entry; the shared static batches have one H100 row
    of it. From its config.json alone it is priced within 10 % (the bar of #28), with the parameter
    count of its model card (7.7B)."""
    model = get_model(str(CONFIGS / "qwen1.5-7b"))
    assert round(model.params / 1e9, 1) == 7.7 and model.qkv_bias and model.kv_heads == model.heads == 32
    csv = validation_dir() / "argonne" / "vllm_static_batch_a100_h100.csv"
    assert cli("validate", "--static-batch", str(csv), "--model", str(CONFIGS / "qwen1.5-7b"),
               "--out", str(tmp_path / "v")) == 0
    (row,) = json.loads((tmp_path / "v" / "validation.json").read_text())["rows"]
    assert row["ape"] < 0.10


def test_static_batch_rows_of_a_catalog_model_match_its_config(tmp_path: Path) -> None:
    """--model given as the config.json of a catalog model picks that model's rows (names differ,
    shapes agree), as --model with its catalog name does."""
    head = "Hardware,Num of Hardware,Framework,Model,Input Output Length,Batch Size,Latency,Throughput\n"
    csv = tmp_path / "rows.csv"
    csv.write_text(head + "Nvidia A100 GPU,1,vLLM,meta-llama/Llama-2-7b-hf,128,1,1.65,1\n"
                   "Nvidia A100 GPU,1,vLLM,meta-llama/Meta-Llama-3-8B,128,1,1.8,1\n")
    for model in (str(CONFIGS / "llama-2-7b-hf"), "Llama-2-7B"):
        out = tmp_path / f"out-{len(model)}"
        assert cli("validate", "--static-batch", str(csv), "--model", model, "--out", str(out)) == 0
        assert [r["line"] for r in json.loads((out / "validation.json").read_text())["rows"]] == [2]


def test_static_batch_rows_naming_a_config_or_its_path(tmp_path: Path, capsys) -> None:
    """A Model cell that is a config's path is priced from it (40 layers cost more than the catalog's
    32); --model as a config whose name is a catalog model's with other shapes is refused per row,
    as validate RUN --model refuses it."""
    deep = tmp_path / "deep-llama"
    deep.mkdir()
    cfg = json.loads((CONFIGS / "llama-2-7b-hf" / "config.json").read_text())
    (deep / "config.json").write_text(json.dumps({**cfg, "num_hidden_layers": 40}))
    head = "Hardware,Num of Hardware,Framework,Model,Input Output Length,Batch Size,Latency,Throughput\n"
    csv = tmp_path / "rows.csv"
    csv.write_text(head + f"Nvidia A100 GPU,1,vLLM,{deep},128,1,1.65,1\nNvidia A100 GPU,1,vLLM,meta-llama/Llama-2-7b-hf,128,1,1.65,1\n")
    assert cli("validate", "--static-batch", str(csv), "--out", str(tmp_path / "a")) == 0
    rows = json.loads((tmp_path / "a" / "validation.json").read_text())["rows"]
    assert [r["line"] for r in rows] == [2, 3] and rows[0]["sim_s"] > 1.1 * rows[1]["sim_s"]
    named = tmp_path / "named"  # another folder: a config is read once per path in a process
    named.mkdir()
    (named / "config.json").write_text(json.dumps({**cfg, "num_hidden_layers": 40, "_name_or_path": "meta-llama/Llama-2-7b-hf"}))
    csv.write_text(head + f"Nvidia A100 GPU,1,vLLM,{named},128,1,1.65,1\nNvidia A100 GPU,1,vLLM,meta-llama/Llama-2-7b-hf,128,1,1.65,1\n")
    assert cli("validate", "--static-batch", str(csv), "--model", str(named), "--out", str(tmp_path / "b")) == 0
    doc = json.loads((tmp_path / "b" / "validation.json").read_text())
    assert [r["line"] for r in doc["rows"]] == [2] and doc["skipped"][0]["line"] == 3
    assert "shapes differ from the catalog's Llama-2-7B" in doc["skipped"][0]["why"]
    capsys.readouterr()


def test_paths_the_way_people_write_them(tmp_path: Path, monkeypatch) -> None:
    """A Hugging Face cache's snapshot names its model; a trailing slash and "." work; an unknown
    user's home is one line."""
    blob = tmp_path / "hub" / "models--acme--house-7b" / "blobs" / "0f9e8d"
    blob.parent.mkdir(parents=True)
    blob.write_text((CONFIGS / "llama-2-7b-hf" / "config.json").read_text())
    snapshot = tmp_path / "hub" / "models--acme--house-7b" / "snapshots" / "abc123"
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").symlink_to(blob)
    assert get_model(str(snapshot)).name == "acme/house-7b"
    assert get_model("/models/Llama-3.1-8B/").name == "Llama-3.1-8B"
    monkeypatch.chdir(snapshot)
    assert get_model(".").name == "acme/house-7b"
    with pytest.raises(UserError, match="no such user's home folder"):
        get_model("~no-such-user-here/x")


@pytest.mark.parametrize(("quant", "fmt", "attention"), [
    ({"quant_method": "awq", "bits": 4, "group_size": 128, "modules_to_not_convert": None}, "int4", True),
    ({"quant_method": "gptq", "bits": 4}, "int4", True),
    ({"quant_method": "modelopt", "quant_algo": "NVFP4"}, "nvfp4", True),
    ({"quant_method": "compressed-tensors", "ignore": ["lm_head", "re:.*self_attn.*"],
      "config_groups": {"group_0": {"weights": {"type": "float", "num_bits": 8}}}}, "fp8", False),
    ({"quant_method": "compressed-tensors", "config_groups": {"g": {"weights": {"type": "int", "num_bits": 4}}}}, "int4", True),
    ({"quant_method": "fp8", "activation_scheme": "dynamic"}, "fp8", True),
    ({"quant_method": "modelopt", "quant_algo": "fp8"}, "fp8", True),
    ({"quant_method": "compressed-tensors", "config_groups": {"g": {
        "weights": {"type": "float", "num_bits": 4, "group_size": 16},
        "input_activations": {"type": "float", "num_bits": 4, "group_size": 16}}}}, "nvfp4", True),
])
def test_a_quantised_checkpoint_is_priced_in_its_format(tmp_path: Path, quant: dict, fmt: str, attention: bool) -> None:
    """A checkpoint's config.json names its weight format; read as 16-bit it would be priced up to 4x too slow."""
    model = get_model(str(_edited(tmp_path, "llama-3.1-8b-instruct", quantization_config=quant)))
    assert (model.weight_format, model.fp8_attention) == (fmt, attention)


W4 = {"type": "float", "num_bits": 4, "group_size": 16}


@pytest.mark.parametrize(("quant", "why"), [
    ({"quant_method": "compressed-tensors", "config_groups": {"g": {"weights": W4}}}, "compressed-tensors"),  # NVFP4A16
    ({"quant_method": "compressed-tensors", "config_groups": {"g": {"weights": {**W4, "group_size": 32},
                                                                    "input_activations": W4}}}, "compressed-tensors"),
    ({"quant_method": "compressed-tensors", "config_groups": {"g": {"weights": {"type": "int", "num_bits": 4},
                                                                    "input_activations": {"type": "int", "num_bits": 8}}}},
     "compressed-tensors"),  # W4A8
    ({"quant_method": "compressed-tensors", "config_groups": {"a": {"weights": {"type": "float", "num_bits": 8}},
                                                              "b": {"weights": {"type": "int", "num_bits": 4}}}},
     "compressed-tensors"),  # mixed
    ({"quant_method": "modelopt", "quant_algo": "W4A16_NVFP4"}, "quant_algo 'W4A16_NVFP4'"),
    ({"quant_method": "bitsandbytes"}, "'bitsandbytes' is not modelled"),
])
def test_quantisation_schemes_priced_otherwise_than_they_run_are_refused(tmp_path: Path, quant: dict, why: str) -> None:
    with pytest.raises(UserError, match=why):
        get_model(str(_edited(tmp_path, "llama-3.1-8b-instruct", quantization_config=quant)))


def test_the_side_files_vllm_reads_say_the_format_and_a_name_the_files_contradict_is_refused(tmp_path: Path) -> None:
    """ModelOpt exports keep the format in hf_quant_config.json (and an fp8 KV cache that vLLM's `auto`
    then uses); AutoGPTQ in quantize_config.json; a folder named -FP4 with neither is not priced 16-bit."""
    cfg = json.loads((CONFIGS / "llama-3.1-8b-instruct" / "config.json").read_text())
    for sub, side, body, fmt, kv in (
            ("fp4", "hf_quant_config.json", {"quantization": {"quant_algo": "NVFP4", "kv_cache_quant_algo": "FP8",
                                                              "exclude_modules": ["lm_head"]}}, "nvfp4", "fp8"),
            ("gptq", "quantize_config.json", {"bits": 4, "group_size": 128}, "int4", "bf16")):
        folder = tmp_path / sub
        folder.mkdir()
        (folder / "config.json").write_text(json.dumps({**cfg, "_name_or_path": f"acme/Llama-{sub}"}))
        (folder / side).write_text(json.dumps(body))
        model = get_model(str(folder))
        assert (model.weight_format, model.kv_format, model.fp8_attention) == (fmt, kv, True)
    bare = tmp_path / "bare"
    bare.mkdir()
    (bare / "config.json").write_text(json.dumps({**cfg, "_name_or_path": "nvidia/Llama-3.1-8B-Instruct-FP4"}))
    with pytest.raises(UserError, match="named nvidia/Llama-3.1-8B-Instruct-FP4 \\(nvfp4 weights\\), but neither"):
        get_model(str(bare))


def test_where_a_checkpoint_keeps_its_scheme_and_kv_scales(tmp_path: Path) -> None:
    """config.json wins over a side file; older compressed-tensors exports say compression_config; AutoAWQ's
    quant_config.json says w_bit; ModelOpt's layout may sit inside config.json; KV scales alone (a
    KV-only export) make the cache fp8 with 16-bit weights, which doubles the KV capacity; `--kv-cache-dtype
    bf16` asks for 16 bits anyway; a side file counts only beside a config.json."""
    from llumverify.sim.quantization import with_formats
    from llumverify.sim.roofline import kv_capacity_blocks

    cfg = json.loads((CONFIGS / "llama-3.1-8b-instruct" / "config.json").read_text())
    cases = {
        "wins": ({"quantization_config": {"quant_method": "fp8"}}, ("quant_config.json", {"w_bit": 4}), ("fp8", "bf16")),
        "older": ({"compression_config": {"quant_method": "compressed-tensors", "kv_cache_scheme": {"num_bits": 8},
                                          "config_groups": {"g": {"weights": {"type": "int", "num_bits": 4}}}}},
                  None, ("int4", "fp8")),
        "autoawq": ({}, ("quant_config.json", {"w_bit": 4, "q_group_size": 128}), ("int4", "bf16")),
        "inline": ({"quantization_config": {"producer": {"name": "modelopt"}, "quantization": {"quant_algo": "NVFP4"}}},
                   None, ("nvfp4", "bf16")),
        "kvonly": ({}, ("hf_quant_config.json", {"quantization": {"quant_algo": None, "kv_cache_quant_algo": "FP8"}}),
                   ("bf16", "fp8")),
    }
    for sub, (extra, side, expected) in cases.items():
        folder = tmp_path / sub
        folder.mkdir()
        (folder / "config.json").write_text(json.dumps({**cfg, "_name_or_path": f"acme/x-{sub}", **extra}))
        if side:
            (folder / side[0]).write_text(json.dumps(side[1]))
        model = get_model(str(folder))
        assert (model.weight_format, model.kv_format) == expected, sub
    kv8 = get_model(str(tmp_path / "kvonly"))
    assert kv_capacity_blocks(kv8, "H100") > 1.9 * kv_capacity_blocks(with_formats(kv8, "", "bf16"), "H100")
    (tmp_path / "loose").mkdir()
    (tmp_path / "loose" / "llama.json").write_text(json.dumps({**cfg, "_name_or_path": "acme/loose"}))
    (tmp_path / "loose" / "quant_config.json").write_text(json.dumps({"w_bit": 4}))
    assert get_model(str(tmp_path / "loose" / "llama.json")).weight_format == "bf16"
