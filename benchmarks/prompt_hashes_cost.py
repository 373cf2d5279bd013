"""What deriving hash_ids from token ids costs (llumverify/files/prompt_hashes.py): memory kept per
distinct block and hashing speed.

    python benchmarks/prompt_hashes_cost.py

Feeds 200 prompts of 32,000 distinct tokens (400,000 distinct 16-token blocks, the worst case:
nothing shared) and prints the bytes held per block after the token lists are gone (tracemalloc:
the digest table plus the returned ids) and the tokens hashed per second (a second pass, untraced).
"""

from __future__ import annotations

import time
import tracemalloc

from llumverify.files.prompt_hashes import PromptHashes

PROMPTS, TOKENS, BLOCK = 200, 32_000, 16


def _feed(hashes: PromptHashes) -> list[tuple[int, ...]]:
    return [hashes.of({"input_tok_ids": list(range(r * TOKENS, (r + 1) * TOKENS))}, "bench", TOKENS)
            for r in range(PROMPTS)]


def main() -> None:
    tracemalloc.start()
    hashes = PromptHashes(BLOCK)
    ids = _feed(hashes)
    held, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    blocks = sum(map(len, ids))
    start = time.perf_counter()
    _feed(PromptHashes(BLOCK))
    seconds = time.perf_counter() - start
    print(f"{blocks:,} distinct blocks: {held / blocks:.0f} B held per block; "
          f"{PROMPTS * TOKENS / seconds / 1e6:.1f} M tokens hashed per second")


if __name__ == "__main__":
    main()
