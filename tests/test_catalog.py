"""sim/catalog.py: model and GPU catalogs, their sources, and forgiving name lookups."""

from __future__ import annotations

import re

import pytest

from llumverify.errors import UserError
from llumverify.sim.catalog import get_gpu, get_model, gpus, models, normalize

REQUIRED_MODELS = ("LLaMA-7B", "Llama-2-7B", "Llama-3-8B", "Llama-3.1-8B", "Mistral-7B-v0.1", "Mistral-7B-v0.3",
                   "Qwen2-7B", "Qwen2.5-7B", "Qwen3-32B", "Qwen3-14B", "CodeLlama-34B", "Llama-2-70B", "Llama-3-70B",
                   "Mixtral-8x7B", "Mixtral-8x22B", "Qwen3-30B-A3B", "Llama-4-Scout-17B-16E-Instruct")
REQUIRED_GPUS = ("A10", "A100-40GB", "A100-80GB", "H100", "H200", "GH200", "L40S", "RTX 4090", "RTX PRO 6000",
                 "B200", "MI300X")


def test_required_entries_are_present() -> None:
    assert set(REQUIRED_MODELS) <= {m.name for m in models()}
    assert set(REQUIRED_GPUS) <= {g.name for g in gpus()}


@pytest.mark.parametrize("entry", [*models(), *gpus()], ids=lambda e: e.name)
def test_every_entry_cites_a_source(entry) -> None:
    assert len(entry.source) > 40, f"{entry.name}: source too thin: {entry.source!r}"


@pytest.mark.parametrize("model", models(), ids=lambda m: m.name)
def test_params_match_the_architecture(model) -> None:
    """The catalog total equals the count the shapes imply (embeddings, layers, norms, biases)."""
    assert model.params == model.architecture_params()
    assert model.heads % model.kv_heads == 0 and model.dtype_bytes == 2


def test_kv_bytes_per_token() -> None:
    assert get_model("LLaMA-7B").kv_bytes_per_token() == 512 * 1024  # LLUMNIX.md: about 0.5 MiB a token
    assert get_model("Llama-3.1-8B").kv_bytes_per_token() == 32 * 2 * 8 * 128 * 2
    assert get_model("Llama-3.1-8B").kv_bytes_per_token(tp=2) == 32 * 2 * 4 * 128 * 2
    assert get_model("Qwen2.5-7B").kv_bytes_per_token(tp=8) == 28 * 2 * 1 * 128 * 2  # 4 KV heads: replicated


@pytest.mark.parametrize("gpu", gpus(), ids=lambda g: g.name)
def test_gpu_numbers_are_plausible(gpu) -> None:
    assert 50e12 < gpu.flops < 3e15 and 200e9 <= gpu.mem_bw < 10e12  # L4: 300 GB/s
    assert 16 * 2**30 <= gpu.usable_memory_bytes <= gpu.memory_bytes <= 320 * 2**30  # MI325X: 256 GB
    link = gpu.link
    assert 10e9 <= link.bw <= 1e12 and 0 < link.bw_eff <= 1 and 1_000 <= link.alpha_ns <= 100_000
    assert len(link.source) > 40


@pytest.mark.parametrize("name", ["RTX 4090", "RTX4090", "rtx-4090", "rtx_4090", "NVIDIA GeForce RTX 4090", " 4090 "])
def test_gpu_aliases(name: str) -> None:
    assert get_gpu(name).name == "RTX 4090"


@pytest.mark.parametrize("name,expected", [
    ("RTXPRO6000", "RTX PRO 6000"), ("NVIDIA RTX PRO 6000 Blackwell Server Edition", "RTX PRO 6000"),
    ("h100-sxm", "H100"), ("NVIDIA H100 80GB HBM3", "H100"), ("a100", "A100-80GB"), ("A100-SXM4-40GB", "A100-40GB"),
    ("nvidia a10", "A10"), ("l40s", "L40S"), ("gh200", "GH200"), ("H200", "H200"),
    ("Nvidia GH200 GPU", "GH200"), ("Nvidia H100 GPU", "H100"), ("NVIDIA B200", "B200"),
    ("AMD Instinct MI300X", "MI300X"), ("AMD MI300X GPU", "MI300X"),
    # torch.cuda.get_device_name of parts people serve on (the PCIe parts are not their SXM siblings)
    ("NVIDIA H100 PCIe", "H100-PCIe"), ("NVIDIA H100 NVL", "H100-NVL"), ("NVIDIA H200 NVL", "H200-NVL"),
    ("NVIDIA A100 80GB PCIe", "A100-PCIe-80GB"), ("NVIDIA A100-PCIE-40GB", "A100-PCIe-40GB"), ("NVIDIA L4", "L4"),
    ("NVIDIA A40", "A40"), ("NVIDIA GeForce RTX 3090", "RTX 3090"), ("AMD Instinct MI250X/MI250", "MI250"),
    ("AMD Instinct MI325X", "MI325X"),
])
def test_more_gpu_aliases(name: str, expected: str) -> None:
    assert get_gpu(name).name == expected


@pytest.mark.parametrize("name,expected", [
    ("meta-llama/Llama-3.1-8B", "Llama-3.1-8B"), ("Llama-3.1-8B", "Llama-3.1-8B"), ("llama-3.1-8b", "Llama-3.1-8B"),
    ("meta-llama/Meta-Llama-3.1-8B-Instruct", "Llama-3.1-8B"), ("meta-llama/Meta-Llama-3-8B", "Llama-3-8B"),
    ("meta-llama/Llama-2-7b-hf", "Llama-2-7B"), ("mistralai/Mistral-7B-v0.1", "Mistral-7B-v0.1"),
    ("Mistral-7B-v0.3", "Mistral-7B-v0.3"), ("Qwen/Qwen2-7B", "Qwen2-7B"), ("Qwen/Qwen2.5-7B", "Qwen2.5-7B"),
    ("qwen2.5-7b-instruct", "Qwen2.5-7B"), ("Qwen/Qwen3-32B", "Qwen3-32B"), ("huggyllama/llama-7b", "LLaMA-7B"),
    # same config.json shapes under another name: served under that name, simulated as the entry
    ("meta-llama/Llama-3.3-70B-Instruct", "Llama-3-70B"), ("deepseek-ai/DeepSeek-R1-Distill-Llama-8B", "Llama-3.1-8B"),
    ("Qwen/Qwen2.5-72B-Instruct", "Qwen2-72B"), ("deepseek-ai/DeepSeek-R1-Distill-Qwen-32B", "Qwen2.5-32B"),
    ("mistralai/Mistral-Nemo-Instruct-2407", "Mistral-Nemo-12B"), ("meta-llama/Llama-3.2-3B-Instruct", "Llama-3.2-3B"),
    ("mistralai/Mistral-7B-Instruct-v0.2", "Mistral-7B-v0.1"),
    # HF ids serving engineers pass, each resolving to the entry of its own shapes
    ("meta-llama/Llama-2-70b-hf", "Llama-2-70B"), ("Qwen/Qwen3-14B", "Qwen3-14B"), ("01-ai/Yi-34B", "Yi-34B"),
    ("mistralai/Mixtral-8x22B-v0.1", "Mixtral-8x22B"), ("mistralai/Mixtral-8x7B-Instruct-v0.1", "Mixtral-8x7B"),
    # the Instruct model's vocabulary is 32768, the base's 32000: its own entry, not the base's alias
    ("mistralai/Mixtral-8x22B-Instruct-v0.1", "Mixtral-8x22B-Instruct"),
    ("Mixtral-8x22B-Instruct-v0.1", "Mixtral-8x22B-Instruct"),
])
def test_model_aliases(name: str, expected: str) -> None:
    assert get_model(name).name == expected


def test_mixtral_8x22b_instruct_is_the_base_with_the_v3_vocabulary() -> None:
    base, instruct = get_model("Mixtral-8x22B"), get_model("mistralai/Mixtral-8x22B-Instruct-v0.1")
    shapes = ("layers", "hidden", "heads", "kv_heads", "head_dim", "intermediate", "experts", "experts_per_token",
              "moe_intermediate", "tie_embeddings", "dtype_bytes")
    assert [getattr(instruct, f) for f in shapes] == [getattr(base, f) for f in shapes]
    assert (base.vocab, instruct.vocab) == (32000, 32768)
    assert instruct.params - base.params == 2 * 768 * 6144  # embeddings and lm_head (untied)
    assert 2 * base.params == 281_241_268_224  # the base checkpoint's tensor bytes (bf16)


def test_lookup_passes_entries_through() -> None:
    m, g = get_model("Qwen3-32B"), get_gpu("H200")
    assert get_model(m) is m and get_gpu(g) is g


def test_normalize_is_punctuation_and_case_blind() -> None:
    assert normalize("NVIDIA GeForce RTX-4090", "gpu") == "geforcertx4090"
    assert normalize("meta-llama/Llama-3.1-8B", "model") == normalize("LLAMA 3.1 8b", "model") == "llama318b"


@pytest.mark.parametrize("kind,lookup,known", [("model", get_model, "Llama-3.1-8B"), ("GPU", get_gpu, "RTX 4090")])
def test_unknown_names_list_the_known_ones(kind: str, lookup, known: str) -> None:
    with pytest.raises(UserError, match=f"unknown {kind} 'nope-9000'.*{known}"):
        lookup("nope-9000")


# Published totals (model cards / papers): the catalog's exact counts round to them.
@pytest.mark.parametrize("name,billions", [
    ("Llama-2-70B", 68.98), ("Llama-3-70B", 70.55), ("CodeLlama-34B", 33.74), ("Qwen3-14B", 14.77),
    ("Mixtral-8x7B", 46.70), ("Mixtral-8x22B", 140.62), ("Qwen3-30B-A3B", 30.53),
    ("Llama-3.2-1B", 1.24), ("Llama-3.2-3B", 3.21), ("Qwen2.5-14B", 14.77), ("Qwen2.5-32B", 32.76),
    ("Qwen3-4B", 4.02), ("Qwen3-8B", 8.19), ("Mistral-Nemo-12B", 12.25), ("Yi-34B", 34.39),
    ("Qwen3-235B-A22B", 235.09), ("Llama-3.1-405B", 405.85),
])
def test_new_models_match_published_totals(name: str, billions: float) -> None:
    assert get_model(name).params / 1e9 == pytest.approx(billions, abs=0.01)


def test_moe_models_are_marked_and_dense_ones_not() -> None:
    mixtral, qwen = get_model("mistralai/Mixtral-8x7B-v0.1"), get_model("Qwen/Qwen3-30B-A3B")
    assert mixtral.moe and (mixtral.experts, mixtral.experts_per_token) == (8, 2)
    assert qwen.moe and (qwen.experts, qwen.experts_per_token, qwen.moe_intermediate) == (128, 8, 768)
    assert not get_model("Llama-3.1-70B").moe and get_model("Llama-3.1-70B").name == "Llama-3-70B"


def test_unknown_interconnect_is_a_user_error() -> None:
    from llumverify.sim.catalog import get_interconnect

    assert get_interconnect("nvlink4").bw == 450e9
    with pytest.raises(UserError, match="unknown interconnect 'NVLink9' \\(known: NVLink3"):
        get_interconnect("NVLink9")


def test_a_shared_expert_and_an_fp8_checkpoint_that_keeps_attention_16_bit() -> None:
    """Llama 4 Scout: 16 routed experts (top 1) and one shared expert of 8,192 in every layer; the model
    card's 17B active parameters are the layers' per-token weights plus both embeddings. RedHatAI's
    FP8-dynamic checkpoint stores experts and shared experts in one byte, attention in two."""
    from llumverify.sim.roofline import token_gemm_params

    scout, fp8 = get_model("Llama-4-Scout"), get_model("RedHatAI/Llama-4-Scout-17B-16E-Instruct-FP8-dynamic")
    assert (scout.experts, scout.experts_per_token, scout.shared_intermediate) == (16, 1, 8192)
    active = token_gemm_params(scout) + 2 * scout.vocab * scout.hidden
    assert active / 1e9 == pytest.approx(17.2, abs=0.05)
    assert (fp8.weight_format, fp8.fp8_attention, scout.weight_format) == ("fp8", False, "bf16")
    attn, linear = fp8.attention_params(), fp8.linear_params()
    assert fp8.weight_bytes == (linear - attn) + 2 * attn + 2 * (fp8.params - linear)
    assert scout.weight_bytes == 2 * scout.params
    assert get_model("meta-llama/Llama-4-Scout-17B-16E-Instruct-FP8").fp8_attention  # --quantization fp8: all of it


def _gpu_file(tmp_path, **changes) -> str:
    """A GPU file holding H100's catalog numbers under another name, changed as given (None deletes)."""
    h100 = get_gpu("H100")
    entry = {"name": "H100-twin", "flops": h100.flops, "arch": h100.arch, "mem_bw": h100.mem_bw,
             "memory_bytes": h100.memory_bytes, "memory_type": h100.memory_type, "interconnect": h100.interconnect}
    entry = {k: v for k, v in {**entry, **changes}.items() if v is not None}
    path = tmp_path / "gpu.toml"
    path.write_text("".join(f"{k} = {v!r}\n".replace("'", '"') for k, v in entry.items()))
    return str(path)


def test_a_gpu_file_may_give_its_sms_and_boost_clock(tmp_path) -> None:
    gpu = get_gpu(_gpu_file(tmp_path, sms=132, clock_ghz=1.98))
    assert (gpu.sms, gpu.clock_ghz) == (132, 1.98)


def test_a_gpu_the_catalog_lacks_from_a_file_prices_as_its_numbers(tmp_path) -> None:
    from llumverify.sim.roofline import step_cost_first_principles

    gpu = get_gpu(_gpu_file(tmp_path))
    assert gpu.name == "H100-twin" and gpu.config_file.endswith("gpu.toml")
    with pytest.raises(UserError, match="unknown GPU 'H100-twin'"):  # read from its path only: names stay the catalog's
        get_gpu("H100-twin")
    twin, h100 = (step_cost_first_principles("Llama-3.1-8B", g, tp=2) for g in (gpu, "H100"))
    assert twin.step_ns([(512, 0)], 32, 32 * 1000) == h100.step_ns([(512, 0)], 32, 32 * 1000)
    assert twin.gpu == gpu.config_file  # a step-cost file written from it names the file, to be read again


@pytest.mark.parametrize("changes, why", [
    ({"mem_bw": None}, "mem_bw is missing"),
    ({"flops": -1.0}, "flops must be a number in [1e+12, 1e+17]"),
    ({"flops": 989.4}, "flops must be a number in [1e+12, 1e+17] (peak dense BF16/FP16 tensor FLOP/s"),  # TFLOPS slip
    ({"mem_bw": 3350}, "mem_bw must be a number in [1e+10, 1e+14]"),
    ({"memory_bytes": 85899345920.5}, "memory_bytes must be an integer"),
    ({"visible_memory_bytes": 10**15}, "visible_memory_bytes must be an integer in"),
    ({"memory_type": "banana"}, "memory_type 'banana' is not one the efficiency rule knows"),
    ({"arch": 89}, "arch must be a name, got 89"),
    ({"arch": "banana"}, "arch must be a CUDA sm_XY or an AMD gfx target"),
    ({"interconnect": "Carrier-Pigeon"}, "unknown interconnect 'Carrier-Pigeon'"),
    ({"name": "NVIDIA H100"}, "is the catalog's H100"),
    ({"tflops": 1.0}, "unknown keys ['tflops']"),
    ({"aliases": ["x"]}, "unknown keys ['aliases']"),
    ({"sms": 132}, "sms and clock_ghz go together"),
    ({"clock_ghz": 1.98}, "sms and clock_ghz go together"),
    ({"sms": 132.5, "clock_ghz": 1.98}, "sms must be an integer in [1, 1,024]"),
    ({"sms": 132, "clock_ghz": 1980}, "clock_ghz must be a number in [0.1, 5]"),  # MHz for GHz
])
def test_a_gpu_file_that_cannot_be_priced_is_named(tmp_path, changes, why) -> None:
    with pytest.raises(UserError, match=re.escape(why)):
        get_gpu(_gpu_file(tmp_path, **changes))


@pytest.mark.parametrize("text, why", [
    ('[[gpu]]\nname = "a"\n[[gpu]]\nname = "b"\n', "expected one GPU's keys"),
    ('[gpu]\nname = "a"\n', "expected one GPU's keys"),
    ('name = "top"\n[[gpu]]\nname = "a"\n', "expected one GPU's keys"),
    ("a = " + "[" * 100_000 + "]" * 100_000 + "\n", "nested too deeply"),
])
def test_a_gpu_file_of_another_shape_is_named(tmp_path, text, why) -> None:
    path = tmp_path / "g.toml"
    path.write_text(text)
    with pytest.raises(UserError, match=re.escape(why)):
        get_gpu(str(path))


def test_a_gpu_file_may_say_its_gddr_carries_inline_ecc(tmp_path) -> None:
    from llumverify.sim.roofline import kernel_terms, load_efficiency

    base = _gpu_file(tmp_path, memory_type="GDDR6", arch="sm_89", name="Ada-ecc")
    path = tmp_path / "ecc.toml"
    path.write_text(open(base).read() + "inline_ecc = true\n")
    assert kernel_terms(get_gpu(str(path)), load_efficiency()) == kernel_terms(get_gpu("L40S"), load_efficiency())
    bad = tmp_path / "bad.toml"  # another path: a GPU file is read once per path
    bad.write_text(open(base).read() + 'inline_ecc = "yes"\n')
    with pytest.raises(UserError, match=re.escape("inline_ecc must be true or false, got 'yes'")):
        get_gpu(str(bad))
    hbm = tmp_path / "hbm.toml"
    hbm.write_text(open(_gpu_file(tmp_path, name="H100-ecc")).read() + "inline_ecc = true\n")
    with pytest.raises(UserError, match="inline_ecc is for GDDR memory"):
        get_gpu(str(hbm))


def test_a_gpu_file_takes_real_arch_names(tmp_path) -> None:
    assert get_gpu(_gpu_file(tmp_path, arch="sm_90a")).arch == "sm_90a"
    with pytest.raises(UserError, match="no such user's home folder"):
        get_gpu("~no-such-user-here/g.toml")


def test_dense_peaks_agree_across_boards_of_one_chip() -> None:
    """The catalog holds dense BF16 peaks (sparsity doubles a datasheet's headline figure): L40S and RTX 6000 Ada are
    both AD102 with 142 SMs at about 2.5 GHz (datasheets: 362.05 and 364.2 TFLOPS dense), so within 1 %; H100 SXM,
    H200 and GH200 are one GH100 SXM part (989.4 dense). Guards a board entered at its sparse figure."""
    assert get_gpu("L40S").flops / get_gpu("RTX 6000 Ada").flops == pytest.approx(1.0, abs=0.01)
    assert get_gpu("H100").flops == get_gpu("H200").flops == get_gpu("GH200").flops


# GPUs serving engineers deploy today: each name torch / nvidia-smi / rocminfo prints resolves to its entry.
NEW_GPU_NAMES = {
    "H20": ("NVIDIA H20", "h20"), "H800": ("NVIDIA H800", "H800-SXM5-80GB"),
    "A800-80GB": ("NVIDIA A800-SXM4-80GB", "a800 80gb"), "A10G": ("NVIDIA A10G", "a10g"), "L20": ("NVIDIA L20", "L20"),
    "GB200": ("NVIDIA GB200", "gb200"), "B300": ("NVIDIA B300 SXM6 AC", "b300"), "GB300": ("NVIDIA GB300", "GB300"),
    "MI355X": ("AMD Instinct MI355X", "mi355x"),
}


@pytest.mark.parametrize("name,expected", [(n, g) for g, names in NEW_GPU_NAMES.items() for n in names])
def test_new_gpu_aliases(name: str, expected: str) -> None:
    assert get_gpu(name).name == expected


def test_new_gpus_take_their_generations_arch_and_link() -> None:
    """The China variants keep their generation's arch (so its measured GEMM kernels and attention backends) and
    differ in the link; the Blackwell Ultra parts are compute capability 10.3, MI355X is CDNA4 (gfx950)."""
    arch = {g: get_gpu(g).arch for g in NEW_GPU_NAMES}
    assert arch == {"H20": "sm_90", "H800": "sm_90", "A800-80GB": "sm_80", "A10G": "sm_86", "L20": "sm_89",
                    "GB200": "sm_100", "B300": "sm_103", "GB300": "sm_103", "MI355X": "gfx950"}
    h800, a800 = get_gpu("H800").link, get_gpu("A800-80GB").link
    assert (h800.bw, a800.bw) == (200e9, 200e9)  # 400 GB/s NVLink, bidirectional
    assert (h800.alpha_ns, h800.bw_eff) == (get_gpu("H100").link.alpha_ns, get_gpu("H100").link.bw_eff)
    assert (a800.alpha_ns, a800.bw_eff) == (get_gpu("A100-80GB").link.alpha_ns, get_gpu("A100-80GB").link.bw_eff)
    assert get_gpu("A10G").inline_ecc and get_gpu("L20").inline_ecc and get_gpu("MI355X").vendor == "amd"


def test_a_short_run_on_each_new_gpu(capsys: pytest.CaptureFixture[str]) -> None:
    """`llumverify simulate --gpu NAME --model Llama-3.1-8B-Instruct` runs on every new GPU (10 requests each)."""
    from llumverify import cli

    for gpu in NEW_GPU_NAMES:
        with pytest.raises(SystemExit) as info:
            cli.main(["simulate", "--gpu", gpu, "--model", "Llama-3.1-8B-Instruct", "--requests", "10",
                      "--policy", "round-robin"])
        out, err = capsys.readouterr()
        assert info.value.code == 0, (gpu, err)
        assert f"{gpu} / Llama-3.1-8B" in out, (gpu, out)


def test_a_gpu_file_on_pcie_is_either_vendors(tmp_path) -> None:
    """PCIe links GPUs of both vendors: an AMD GPU file (gfx arch) on PCIe is read, as an NVIDIA one is."""
    amd = get_gpu(_gpu_file(tmp_path, name="MI-pcie", arch="gfx942", interconnect="PCIe4"))
    assert amd.vendor == "amd" and amd.link.name == "PCIe4"
