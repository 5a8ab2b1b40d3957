"""ree.Engine: the C++ generation engine (models/include/ree/models/engine.h) from Python.

The same engine as ``ree-launch``: the same ids, text, hashes and receipts (docs/receipt.md) for
the same model, prompts and options. Receipts made here verify with ``ree-launch verify``, and
``Engine.verify`` checks receipts made by either.
"""

import json
import os
import queue
import threading
from dataclasses import dataclass, field
from typing import Callable, Iterator, List, NamedTuple, Optional, Sequence, Tuple, Union

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
    engines of one process), kv_blocks (the KV pool's size in blocks, 0: from free memory) and
    cuda_graphs (GPU: replay the layers of a step as CUDA graphs recorded per step size; False is
    ree-launch --no-cuda-graphs).
    """

    def __init__(self, model: str, operation_set: str = "reproducible", n_partitions: int = 1,
                 device: str = "cpu", repops_spec: str = "repops-1", max_batch: int = 8,
                 max_context: int = 0, weight_dtype: str = "auto", *,
                 prefix_caching: bool = True, prefill_chunk: int = 0,
                 decode_lookahead: bool = False, kv_blocks: int = 0, cuda_graphs: bool = True):
        self.model = model
        # One generation at a time: the C++ engine is not re-entrant (see generate).
        self._busy = threading.Lock()
        scheduling = (bool(prefix_caching), int(prefill_chunk), bool(decode_lookahead),
                      int(kv_blocks), bool(cuda_graphs))
        self._engine = _C.Engine(model, operation_set, repops_spec, str(device), n_partitions,
                                 max_batch, max_context, weight_dtype, scheduling)

    @property
    def max_context(self) -> int:
        return self._engine.max_context

    @property
    def stats(self) -> dict:
        """Counters over the engine's life: kv_cache_blocks, kv_block_size, kv_cache_blocks_used,
        kv_preemptions, kv_prefix_hit_tokens (prompt positions read from the prefix cache),
        lookahead_steps (decode steps queued ahead of their tokens) and graph_steps (steps whose
        layers ran from CUDA graphs)."""
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
                 logprobs: Optional[int] = None,
                 on_token: Optional[Callable[[int, int, str], None]] = None) -> Generation:
        """Generates for every prompt (a text, a list of texts, or lists of token ids) or every
        conversation (`messages`: one list of {"role", "content"} dicts, or a list of them).
        Request i draws with the key (seed, i, step): the same tokens as ree-launch's i-th prompt.
        stop: a ree.StopFlag; its set() from another thread (or before the call) ends every request
        after the token it is producing, with finish_reason "stop" and the tokens so far (a prefix
        of what it would have generated).
        logprobs: None (default, no cost) or n in [0, 20]: every generated token's
        log-probability and the n most likely tokens of its step (Completion.logprobs).
        on_token(index, token, text): called as each token comes (index: the request's position
        in the list; text: the characters it completed, possibly ""), on this thread. If it
        raises, every request stops (stop, if given, is set) and generate raises that exception.
        An Engine runs one generation at a time: a call while another runs (another thread, an
        open stream) raises RuntimeError.
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
        if on_token is not None and not callable(on_token):
            raise TypeError("on_token must be callable")
        if not self._busy.acquire(blocking=False):
            raise RuntimeError("this Engine is already generating (on another thread, or an open "
                               "stream): one generation at a time; close the stream first")
        try:
            results, receipt_text = self._engine.generate(tuples, stop, on_token)
        finally:
            self._busy.release()
        completions = [
            Completion(prompt_ids=list(r["prompt_ids"]), ids=list(r["output_ids"]), text=r["text"],
                       finish_reason=r["finish_reason"], output_hash=r["output_ids_sha256"],
                       step_logits_sha256=list(r["step_logits_sha256"]),
                       logprobs=None if logprobs is None else [
                           TokenLogprobs(logprob=lp, top=[tuple(t) for t in top])
                           for lp, top in r["token_logprobs"]]) for r in results]
        return Generation(completions=completions, receipt_text=receipt_text or None)

    def stream(self, prompts: Union[str, Sequence[str], Sequence[Sequence[int]], None] = None,
               buffer: int = 64, **options) -> "GenerationStream":
        """generate() on a background thread, its tokens as they come: iterate the returned
        GenerationStream for TokenEvent(index, token, text) items; its `result` is the
        Generation once iteration has ended. At most `buffer` events wait to be read: a reader
        that falls behind holds the engine back. Leaving early (close(), a `with` block's end)
        stops the requests and waits for the engine. Takes generate()'s arguments except
        on_token; stop may be given (close() sets it)."""
        if "on_token" in options:
            raise TypeError("stream() reports tokens itself; use generate() for on_token")
        if isinstance(buffer, bool) or not isinstance(buffer, int) or buffer < 1:
            raise ValueError(f"buffer must be an integer >= 1, got {buffer!r}")
        return GenerationStream(self, prompts, buffer, options)

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


class TokenEvent(NamedTuple):
    """A token as it comes: the request's index, the token id and the text it completed."""
    index: int
    token: int
    text: str


class GenerationStream:
    """Engine.stream's result: an iterator of TokenEvent while the engine generates on a
    background thread; `result` is the Generation after the last event. Closing it before the
    end (close(), leaving a `with` block, dropping a half-read stream) stops the requests, as a
    stop flag does, and waits for the engine: their completions then end with "stop"."""

    _END = object()

    def __init__(self, engine: Engine, prompts, buffer: int, options: dict):
        self._stop = options.pop("stop", None) or StopFlag()
        self._events: "queue.Queue" = queue.Queue(maxsize=buffer)
        self._outcome: dict = {}  # "result" or "error", set by the engine thread
        self._done = False
        # The thread holds the queue and the outcome, never this object, so that dropping a
        # half-read stream reaches __del__ (which stops and drains it).
        self._thread = threading.Thread(
            target=GenerationStream._run,
            args=(engine, prompts, options, self._stop, self._events, self._outcome),
            name="ree-stream", daemon=True)
        self._thread.start()

    @staticmethod
    def _run(engine, prompts, options, stop, events, outcome):
        try:
            outcome["result"] = engine.generate(
                prompts, stop=stop, on_token=lambda i, t, text: events.put(TokenEvent(i, t, text)),
                **options)
        except BaseException as error:  # noqa: B902 - handed to the reading thread
            outcome["error"] = error
        finally:
            events.put(GenerationStream._END)

    def __iter__(self) -> Iterator[TokenEvent]:
        return self

    def __next__(self) -> TokenEvent:
        if self._done:
            raise StopIteration
        event = self._events.get()
        if event is self._END:
            self._done = True
            self._thread.join()
            if "error" in self._outcome:
                raise self._outcome["error"]
            raise StopIteration
        return event

    @property
    def result(self) -> Generation:
        """The Generation, once every event has been read (or after close())."""
        if not self._done:
            raise RuntimeError("the stream has not ended: read it to the end or close() it")
        if "error" in self._outcome:
            raise self._outcome["error"]
        return self._outcome["result"]

    def close(self) -> None:
        """Stops the requests (after the tokens being produced) and waits for the engine."""
        if self._done:
            return
        self._stop.set()
        while self._events.get() is not self._END:  # the engine may wait for room to put
            pass
        self._thread.join()
        self._done = True

    def __enter__(self) -> "GenerationStream":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self):
        if not getattr(self, "_done", True):
            self.close()
