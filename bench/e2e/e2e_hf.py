"""transformers on the same GPU and weights: eager (attention_implementation "eager", dynamic
cache) and static cache + torch.compile (SDPA attention; generate() compiles the decode forward
when the cache is static; the prefill forward stays uncompiled, as transformers runs it). Each
measurement is one generate() call after a warm-up call of the same shapes (for the compiled
model the warm-up holds the compilation, reported apart as compile_s); a logits processor stamps
the first token, which splits prefill from decode."""
import gc
import time

import torch

import transformers

from e2e_report import GIB, row

SYSTEMS = {"eager": "transformers eager", "compile": "transformers compile"}
DEVICE = "cuda"  # the CPU smoke test sets "cpu"


def _sync():
    if DEVICE == "cuda":
        torch.cuda.synchronize()


class FirstTokenClock(transformers.LogitsProcessor):
    """The time at which the prefill forward's logits are ready (the first token's)."""

    def __init__(self):
        self.first = None

    def __call__(self, input_ids, scores):
        if self.first is None:
            _sync()
            self.first = time.perf_counter()
        return scores


def load(model_dir):
    return transformers.AutoModelForCausalLM.from_pretrained(
        model_dir, dtype=torch.bfloat16, attn_implementation="eager").to(DEVICE).eval()


def use_system(model, system):
    """Switches the loaded model's attention to the one the system runs with."""
    model.set_attn_implementation("eager" if system == "eager" else "sdpa")


def _generate(model, ids, new_tokens, system, compile_mode, clock=None):
    kwargs = dict(max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=False,
                  pad_token_id=0, attention_mask=torch.ones_like(ids))
    if system == "compile":
        config = transformers.CompileConfig(mode=compile_mode)
        if DEVICE != "cuda":
            config._compile_all_devices = True  # else generate() compiles on GPUs only
        kwargs.update(cache_implementation="static", compile_config=config)
    if clock is not None:
        kwargs["logits_processor"] = transformers.LogitsProcessorList([clock])
    with torch.no_grad():
        model.generate(ids, **kwargs)
    _sync()


def _timed(model, ids, new_tokens, system, compile_mode):
    """(seconds to the first token, seconds in all, peak reserved GiB, peak allocated GiB)."""
    if DEVICE == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    clock = FirstTokenClock()
    start = time.perf_counter()
    _generate(model, ids, new_tokens, system, compile_mode, clock)
    total = time.perf_counter() - start
    if DEVICE != "cuda":
        return clock.first - start, total, None, None
    return (clock.first - start, total, torch.cuda.max_memory_reserved() / GIB,
            torch.cuda.max_memory_allocated() / GIB)


def measure(model, system, prompts, new_tokens, compile_mode):
    """Rows (decode and prefill, or only prefill when new_tokens is 1) of one system and batch.
    Out of memory is a row, "OOM", as is any other failure ("error: ...")."""
    label = SYSTEMS[system]
    batch, prompt_len = len(prompts), len(prompts[0])
    phases = ("decode", "prefill") if new_tokens > 1 else ("prefill",)
    common = dict(attention="eager" if system == "eager" else "sdpa",
                  compile_mode=compile_mode if system == "compile" else None)
    try:
        ids = torch.tensor(prompts, device=DEVICE)
        # Warm-up: the same shapes as the measured call (a static cache and a compiled graph are
        # per shape); the eager model needs no more than a few steps.
        warm_tokens = new_tokens if system == "compile" else min(new_tokens, 4)
        start = time.perf_counter()
        _generate(model, ids, warm_tokens, system, compile_mode)
        warm = time.perf_counter() - start
        to_first, total, reserved, allocated = _timed(model, ids, new_tokens, system,
                                                      compile_mode)
    except Exception as e:  # noqa: BLE001 - one system's failure must not end the bench
        oom = isinstance(e, torch.cuda.OutOfMemoryError) or "out of memory" in str(e).lower()
        status = "OOM" if oom else f"error: {type(e).__name__}: {str(e).splitlines()[0][:200]}"
        _recover(system)
        return [row("transformers", label, ph, batch, prompt_len, new_tokens, status=status,
                    **common) for ph in phases]
    common.update(gpu_mem_gib=reserved, gpu_mem_allocated_gib=allocated,
                  mem_source="torch max_memory_reserved", wall_s=total, warmup_s=warm,
                  compile_s=max(0.0, warm - total) if system == "compile" else None,
                  compiled=hasattr(model, "_compiled_call") if system == "compile" else None)
    rows = [row("transformers", label, "prefill", batch, prompt_len, new_tokens,
                tokens_per_s=batch * prompt_len / to_first, **common)]
    if new_tokens > 1:
        rows.insert(0, row("transformers", label, "decode", batch, prompt_len, new_tokens,
                           tokens_per_s=batch * (new_tokens - 1) / (total - to_first), **common))
    return rows


def _recover(system):
    gc.collect()
    if DEVICE == "cuda":
        torch.cuda.empty_cache()
    if system == "compile":
        torch._dynamo.reset()  # a failed compilation leaves nothing half-made for the next batch
