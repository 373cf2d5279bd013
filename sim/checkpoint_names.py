"""What a checkpoint's name says of its weights: "...-Instruct-FP8", "-AWQ", "-GPTQ-Int4", "-NVFP4".

Engines name checkpoints by their Hugging Face ids, and quantised ones carry their format as a
suffix; catalog.get_model reads such a name as the base model in that format, and hf_config checks a
checkpoint's files against it. A format the simulator does not price is refused by name.
"""

from __future__ import annotations

import re

from llumverify.errors import UserError

# A checkpoint name's trailing format: "-FP8", "-FP8-dynamic", "-fp8-e4m3", "-AWQ", "-GPTQ-Int4", "-NVFP4" ... and the
# formats not modelled (int8, w8a8, MXFP4, bitsandbytes), which split_format refuses by name.
_SUFFIX = re.compile(r"[-_.](?:quantized[-_.])?(fp8(?:[-_](?:dynamic|static|e4m3|e5m2|block|kv))*|awq(?:[-_]int4)?|gptq(?:[-_]int[48])?|int[48]"
                     r"|w4a16|w8a8|w8a16|nvfp4|mxfp4|fp4|bnb[-_]4bit)$", re.I)


def split_format(name: str) -> tuple[str, str]:
    """(base name, weight format) for a checkpoint name ending in a modelled format ("fp8"; "int4"
    for AWQ, GPTQ 4-bit, w4a16, int4; "nvfp4" for NVFP4 or FP4), (name, "") otherwise; another
    format (int8, w8a8, MXFP4, bitsandbytes) is a UserError: priced as 16-bit it would be wrong."""
    m = _SUFFIX.search(name.strip())
    if not m:
        return name, ""
    tag = m.group(1).lower().replace("_", "-")
    fmt = ("fp8" if tag.startswith("fp8") else "nvfp4" if tag in ("nvfp4", "fp4")
           else "int4" if tag in ("awq", "awq-int4", "gptq", "gptq-int4", "w4a16", "int4") else "")
    if not fmt:
        raise UserError(f"model {name!r}: {m.group(1)} weights are not modelled; 16-bit, fp8, 4-bit integer "
                        "(AWQ, GPTQ, w4a16) and NVFP4 are")
    return name.strip()[: m.start()], fmt


# the suffix that names a checkpoint in each modelled weight format (split_format reads each back)
FORMAT_SUFFIX = {"fp8": "FP8", "int4": "w4a16", "nvfp4": "NVFP4"}


def with_format(name: str, fmt: str) -> str:
    """`name` as a checkpoint in weight format `fmt`: the format's suffix added unless the name carries one."""
    suffix = FORMAT_SUFFIX.get(fmt)
    return f"{name}-{suffix}" if suffix and not split_format(name)[1] else name
