"""A workload row's prompt as chained block ids: the row's own `hash_ids`, or ids derived from its token ids.

Why: some harnesses (LLMServingSim's workload files) record the prompt's token ids
(`input_tok_ids`) instead of block hashes; a reader that ignores them sees no shared prefix, and
prefix caching is simulated as if there were none. The rule is the shared workloads'
(../shared/validation/README.md): the prompt's full blocks of `block` tokens, block i's id a
function of blocks 0..i, numbered densely from 0 in order of first appearance over the file. One
PromptHashes reads one file row by row and keeps a 16-byte digest per distinct block, never the
token lists (a prompt may hold millions of tokens; the file's size is capped by the reader).
"""

from __future__ import annotations

import hashlib
from array import array

from llumverify.errors import UserError

TOKEN_KEYS = ("input_tok_ids", "output_tok_ids")  # dropped from the row once read
OUTPUT_KEY = "output_hash_ids"


class PromptHashes:
    """The chained block ids of one workload file's prompts, block by block of `block` tokens."""

    def __init__(self, block: int) -> None:
        self.block = block
        self._ids: dict[bytes, int] = {}  # digest of a block and all before it -> its dense id
        self._with_tokens: bool | None = None  # whether the file's rows carry input_tok_ids (its first row says)

    def of(self, row: dict, where: str, prompt: int) -> tuple[int, ...]:
        """The row's block ids (empty if it has neither key); its token lists are removed from `row`.

        At most one id per block of the prompt (the last may be partial); a row with token ids and
        hash_ids must agree; a file gives token ids on every row or none (ids given and ids derived
        would be numbered apart and never match)."""
        given = row.get("hash_ids")
        if given is not None and not (isinstance(given, list)
                                      and all(type(h) is int and h >= 0 for h in given)):
            raise UserError(f"{where}: hash_ids must be a list of non-negative integers")
        blocks = -(-prompt // self.block)  # an id per block, the last may be partial (Mooncake's are)
        if given is not None and len(given) > blocks:  # ids past the prompt: the engine would drop them unread
            raise UserError(f"{where}: {len(given)} hash_ids for a prompt of {prompt} tokens: it has {blocks} "
                            f"block{'' if blocks == 1 else 's'} of {self.block} tokens")
        tokens = row.pop(TOKEN_KEYS[0], None)
        row.pop(TOKEN_KEYS[1], None)
        if self._with_tokens is None:
            self._with_tokens = tokens is not None
        elif self._with_tokens != (tokens is not None):
            state = "missing" if self._with_tokens else "present"
            raise UserError(f"{where}: input_tok_ids {state}, unlike the file's first row "
                            "(give them on every row or none)")
        if tokens is None:
            return tuple(given or ())
        ids = self._derive(tokens, where, prompt)
        if given is not None and tuple(given) != ids:
            at = next((i for i, (a, b) in enumerate(zip(given, ids)) if a != b), min(len(given), len(ids)))
            raise UserError(f"{where}: hash_ids disagree with those of input_tok_ids at block {at} "
                            f"({len(given)} given, {len(ids)} derived with {self.block}-token blocks)")
        return ids

    def output_of(self, row: dict, where: str, prompt: int, output: int, ids: tuple[int, ...]) -> tuple[int, ...]:
        """The row's `output_hash_ids` (empty if it has none): the chain of `ids` continued over the
        blocks its output fills, so ids must be exactly the prompt's full blocks, and at most the
        blocks prompt and output fill may follow."""
        given = row.get(OUTPUT_KEY)
        if given is None:
            return ()
        if not (isinstance(given, list) and all(type(h) is int and h >= 0 for h in given)):
            raise UserError(f"{where}: {OUTPUT_KEY} must be a list of non-negative integers")
        if self._with_tokens:
            raise UserError(f"{where}: {OUTPUT_KEY} with input_tok_ids: derived and given ids are numbered apart")
        full = prompt // self.block
        if len(ids) != full:
            raise UserError(f"{where}: {OUTPUT_KEY} continue the prompt's full blocks, so hash_ids must hold "
                            f"{full} id{'' if full == 1 else 's'} ({prompt} tokens in {self.block}-token blocks), "
                            f"not {len(ids)}")
        room = (prompt + output) // self.block - full
        if len(given) > room:
            raise UserError(f"{where}: {len(given)} {OUTPUT_KEY}, but prompt and output fill only {room} more "
                            f"block{'' if room == 1 else 's'}")
        return tuple(given)

    def _derive(self, tokens: object, where: str, prompt: int) -> tuple[int, ...]:
        if not isinstance(tokens, list) or not all(type(t) is int for t in tokens):
            raise UserError(f"{where}: input_tok_ids must be a list of integers")
        if len(tokens) != prompt:
            raise UserError(f"{where}: {len(tokens)} input_tok_ids for a prompt of {prompt} tokens")
        try:
            packed = array("q", tokens).tobytes()
        except OverflowError:
            raise UserError(f"{where}: input_tok_ids hold a token id beyond 64 bits") from None
        step, prev, ids = self.block * 8, b"", []
        for start in range(0, len(packed) - step + 1, step):
            prev = hashlib.blake2b(prev + packed[start:start + step], digest_size=16).digest()
            ids.append(self._ids.setdefault(prev, len(self._ids)))
        return tuple(ids)
