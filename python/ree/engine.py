"""ree.Engine: the C++ generation engine (models/include/ree/models/engine.h) from Python.

The same engine as ``ree-launch``: the same ids, text, hashes and receipts (docs/receipt.md) for
the same model, prompts and options. Receipts made here verify with ``ree-launch verify``, and
``Engine.verify`` checks receipts made by either.
"""

import json
import os
from dataclasses import dataclass, field
from typing import List, Optional, Sequence, Tuple, Union

from . import _C

Messages = Sequence[dict]
# Set from another thread while Engine.generate runs, it stops that generation (see generate).
StopFlag = _C.StopFlag


@dataclass
class Completion:
    """One request's result."""
    prompt_ids: List[int]
    ids: List[int]                 # generated token ids
    text: str                      # decoded ids (special tokens skipped)
    finish_reason: str             # "eos", "length", or "stop" (Engine.generate's stop flag)
    output_hash: str               # SHA-256 (hex) of ids as little-endian int32
    step_logits_sha256: List[str]  # SHA-256 of each step's fp32 logits
    # With generate(logprobs=n): one TokenLogprobs per generated token, else None.
    logprobs: Optional[List["TokenLogprobs"]] = None


@dataclass
class TokenLogprobs:
    """A generated token's log-probability under the model's distribution (before temperature,
    top-k and top-p) and the n most likely tokens of its step as (token id, log-probability),
    largest first, equal values by lower id. REE's RepOps log_softmax of the fp32 logits row
    that step_logits_sha256 hashes: the same bits on every device in reproducible mode."""
    logprob: float
    top: List[Tuple[int, float]]


@dataclass
class Generation:
    """What Engine.generate returns: one Completion per prompt and the run's receipt (None when
    a stop flag ended a request before its first token: a receipt needs a token per request)."""
    completions: List[Completion]
    receipt_text: Optional[str]    # the receipt file's text (as ree-launch --receipt-path writes)
    receipt: Optional[dict] = field(init=False)

    def __post_init__(self):
        self.receipt = json.loads(self.receipt_text) if self.receipt_text else None

    @property
    def ids(self) -> List[List[int]]:
        return [c.ids for c in self.completions]

    @property
    def text(self) -> List[str]:
        return [c.text for c in self.completions]

    @property
    def output_hash(self) -> List[str]:
        return [c.output_hash for c in self.completions]

    def save_receipt(self, path: Union[str, os.PathLike]) -> None:
        if not self.receipt_text:
            raise ValueError("this generation has no receipt (a request stopped before its "
                             "first token)")
        with open(path, "w", encoding="utf-8") as f:
            f.write(self.receipt_text)


@dataclass
class VerifyReport:
    """Engine.verify's verdict: "verified", "mismatch" or "could-not-verify"."""
    verdict: str
    summary: str
    report: dict

    def __bool__(self) -> bool:
        return self.verdict == "verified"


class Engine:
    """A loaded model ready to generate.

    model: a Hugging Face model directory, a .gguf file or "builtin:tiny-llama".
    operation_set: "reproducible" (RepOps: the same bits on every CPU and GPU, any batch),
        "deterministic" or "default" (ATen; need a build against LibTorch).
    repops_spec: "repops-1" (default), "repops-2" or "repops-3" (the reproducible set's
        arithmetic; ree.repops_spec_versions lists them; others raise ValueError).
    device: "cpu", "cuda" or "cuda:N". n_partitions: pipeline stages (in this process).

    Scheduling options (keyword only) never change results, as ree-launch's flags of the same
    names (docs/usage.md): prefix_caching (reuse the KV blocks of an equal prompt prefix; the
    reproducible set), prefill_chunk (at most this many prompt tokens per step, 0: whole prompts),
    decode_lookahead (queue a greedy decode step before the host has read the last one's tokens;
    engines of one process) and kv_blocks (the KV pool's size in blocks, 0: from free memory).
    """

    def __init__(self, model: str, operation_set: str = "reproducible", n_partitions: int = 1,
                 device: str = "cpu", repops_spec: str = "repops-1", max_batch: int = 8,
                 max_context: int = 0, weight_dtype: str = "auto", *,
                 prefix_caching: bool = True, prefill_chunk: int = 0,
                 decode_lookahead: bool = False, kv_blocks: int = 0):
        self.model = model
        scheduling = (bool(prefix_caching), int(prefill_chunk), bool(decode_lookahead),
                      int(kv_blocks))
        self._engine = _C.Engine(model, operation_set, repops_spec, str(device), n_partitions,
                                 max_batch, max_context, weight_dtype, scheduling)

    @property
    def max_context(self) -> int:
        return self._engine.max_context

    @property
    def stats(self) -> dict:
        """Counters over the engine's life: kv_cache_blocks, kv_block_size, kv_cache_blocks_used,
        kv_preemptions, kv_prefix_hit_tokens (prompt positions read from the prefix cache) and
        lookahead_steps (decode steps queued ahead of their tokens)."""
        return dict(self._engine.stats)

    def chat_prompt(self, messages: Messages) -> str:
        """The model's chat template applied to messages ({"role", "content"} dicts), ending with
        the assistant's turn header (as ree-launch --chat)."""
        pairs = []
        for i, message in enumerate(messages):
            if not isinstance(message, dict) or "role" not in message or "content" not in message:
                raise ValueError(f"messages[{i}] must be a dict with 'role' and 'content'")
            pairs.append((str(message["role"]), str(message["content"])))
        return self._engine.render_chat(pairs)

    def generate(self, prompts: Union[str, Sequence[str], Sequence[Sequence[int]], None] = None,
                 *, messages: Union[Messages, Sequence[Messages], None] = None,
                 max_new_tokens: int = 64, temperature: float = 0.0, top_p: float = 1.0,
                 top_k: int = 0, seed: int = 0, add_special_tokens: bool = True,
                 stop: Optional["StopFlag"] = None,
                 logprobs: Optional[int] = None) -> Generation:
        """Generates for every prompt (a text, a list of texts, or lists of token ids) or every
        conversation (`messages`: one list of {"role", "content"} dicts, or a list of them).
        Request i draws with the key (seed, i, step): the same tokens as ree-launch's i-th prompt.
        stop: a ree.StopFlag; its set() from another thread (or before the call) ends every request
        after the token it is producing, with finish_reason "stop" and the tokens so far (a prefix
        of what it would have generated).
        logprobs: None (default, no cost) or n in [0, 20]: every generated token's
        log-probability and the n most likely tokens of its step (Completion.logprobs).
        """
        requests = self._requests(prompts, messages, add_special_tokens)
        if not 0 <= seed < 2**64:
            raise ValueError(f"seed must be in [0, 2^64), got {seed}")
        if logprobs is not None and (isinstance(logprobs, bool) or not isinstance(logprobs, int)
                                     or not 0 <= logprobs <= 20):
            raise ValueError(f"logprobs must be None or an integer in [0, 20], got {logprobs!r}")
        top_logprobs = -1 if logprobs is None else logprobs
        tuples = [(text, ids, int(max_new_tokens), float(temperature), int(top_k), float(top_p),
                   int(seed), special, top_logprobs) for text, ids, special in requests]
        results, receipt_text = self._engine.generate(tuples, stop)
        completions = [
            Completion(prompt_ids=list(r["prompt_ids"]), ids=list(r["output_ids"]), text=r["text"],
                       finish_reason=r["finish_reason"], output_hash=r["output_ids_sha256"],
                       step_logits_sha256=list(r["step_logits_sha256"]),
                       logprobs=None if logprobs is None else [
                           TokenLogprobs(logprob=lp, top=[tuple(t) for t in top])
                           for lp, top in r["token_logprobs"]]) for r in results]
        return Generation(completions=completions, receipt_text=receipt_text or None)

    def verify(self, receipt: Union[dict, str, os.PathLike, Generation]) -> VerifyReport:
        """Re-executes a receipt (a dict, its JSON text, a file path or a Generation) on this
        engine's model and device with the receipt's own options, as `ree-launch verify`."""
        if isinstance(receipt, Generation):
            text = receipt.receipt_text
        elif isinstance(receipt, dict):
            text = json.dumps(receipt, ensure_ascii=False)
        elif isinstance(receipt, str) and receipt.lstrip().startswith("{"):
            text = receipt
        else:
            with open(receipt, encoding="utf-8") as f:
                text = f.read()
        verdict, summary, report = self._engine.verify(text)
        return VerifyReport(verdict=verdict, summary=summary, report=json.loads(report))

    def _requests(self, prompts, messages, add_special_tokens):
        if (prompts is None) == (messages is None):
            raise ValueError("give exactly one of prompts and messages")
        if messages is not None:
            conversations = [messages] if messages and isinstance(messages[0], dict) else messages
            # The template writes the special tokens, so the prompt is encoded without them.
            return [(self.chat_prompt(conversation), [], False) for conversation in conversations]
        if isinstance(prompts, str):
            prompts = [prompts]
        requests = []
        for i, prompt in enumerate(prompts):
            if isinstance(prompt, str):
                requests.append((prompt, [], add_special_tokens))
            elif all(isinstance(t, int) and not isinstance(t, bool) for t in prompt) and prompt:
                requests.append((None, [int(t) for t in prompt], add_special_tokens))
            else:
                raise ValueError(f"prompts[{i}] must be a string or a non-empty list of token ids")
        return requests
