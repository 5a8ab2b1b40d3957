"""Runs ree-launch on a prompt batch and measures it: throughput from its --json timing, the KV
cache pool and preemptions from its info log, and the process's peak GPU memory by polling
nvidia-smi (the launcher reports no peak of its own)."""
import json
import os
import re
import subprocess
import threading
import time

from e2e_model import prompt
from e2e_report import row


def prompt_warmup(length):
    """A prompt of `length` tokens unlike every measured one (no prefix-cache hit)."""
    return prompt(length, seed=1_000_003)

# The REE configurations measured: (label, --operation-set, --repops-spec or None, extra flags).
# "lookahead" is the reproducible set with --decode-lookahead (the next decode step queued with the
# tokens the GPU selected), beside the plain one in the same run.
CONFIGS = [("ree reproducible", "reproducible", "repops-1", ()),
           ("ree lookahead", "reproducible", "repops-1", ("--decode-lookahead",)),
           ("ree repops-2", "reproducible", "repops-2", ()),
           ("ree repops-3", "reproducible", "repops-3", ()),
           ("ree deterministic", "deterministic", None, ()),
           ("ree default", "default", None, ())]


def _nvidia_smi(*query):
    try:
        out = subprocess.run(["nvidia-smi", *query, "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return []
    if out.returncode != 0:
        return []
    return [line.split(", ") for line in out.stdout.splitlines() if line.strip()]


class GpuMemorySampler:
    """Peak GPU memory of one process, polled twice a second: its own line of
    nvidia-smi's compute apps when the pid is visible (not inside every container's pid
    namespace), else the whole GPU's memory.used less its value before the process started."""

    def __init__(self, gpu_index=0):
        self.gpu = str(gpu_index)
        self.pid = None
        self.process_peak_mib = None
        self.device_peak_mib = None
        self.device_before_mib = self._device_used()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def _device_used(self):
        lines = _nvidia_smi("--query-gpu=memory.used", "-i", self.gpu)
        return float(lines[0][0]) if lines else None

    def _poll(self):
        while not self._stop.is_set():
            for pid, used in _nvidia_smi("--query-compute-apps=pid,used_memory", "-i", self.gpu):
                if self.pid is not None and pid == str(self.pid):
                    self.process_peak_mib = max(self.process_peak_mib or 0.0, float(used))
            device = self._device_used()
            if device is not None:
                self.device_peak_mib = max(self.device_peak_mib or 0.0, device)
            self._stop.wait(0.5)

    def start(self, pid):
        self.pid = pid
        self._thread.start()

    def stop(self):
        """Returns (peak GiB or None, how it was measured)."""
        self._stop.set()
        self._thread.join()
        if self.process_peak_mib is not None:
            return self.process_peak_mib / 1024.0, "nvidia-smi process peak"
        if self.device_peak_mib is not None and self.device_before_mib is not None:
            return ((self.device_peak_mib - self.device_before_mib) / 1024.0,
                    "nvidia-smi GPU memory.used peak less before")
        return None, None


def max_context_for(prompt_len, new_tokens, override):
    """Each sequence's context: prompt + output rounded up to 16 positions, so the KV pool (and
    the ATen sets' one block per sequence) holds the batch whole, not --max-batch x 4096."""
    if override:
        return override
    return (prompt_len + new_tokens + 15) // 16 * 16


def run(ree, model, opset, spec, prompts, new_tokens, work, max_context, extra=(), timeout=None,
        max_batch=None):
    """One ree-launch process over prompts (all decoded together unless max_batch is smaller).
    Returns (results, info) where info holds wall_s, gpu_mem_gib, mem_source, kv_pool_gib,
    preemptions."""
    path = os.path.join(work, "prompts.jsonl")
    with open(path, "w") as f:
        for p in prompts:
            f.write(json.dumps({"prompt_ids": p}) + "\n")
    cmd = [ree, "--model", model, "--prompt-file", path, "--max-new-tokens", str(new_tokens),
           "--operation-set", opset, "--device", "cuda:0", "--json", "--max-batch",
           str(max_batch or len(prompts)), "--max-context", str(max_context)]
    cmd += (["--repops-spec", spec] if spec else []) + list(extra)
    sampler = GpuMemorySampler()
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, REE_LOG_LEVEL="info"))
    sampler.start(proc.pid)
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        sampler.stop()
        raise RuntimeError(f"timeout: ree-launch ran past {timeout:.1f} s (--time-limit)")
    finally:
        wall = time.perf_counter() - start
    mem, source = sampler.stop()
    if proc.returncode != 0:
        raise RuntimeError(_last_line(stderr) or f"ree-launch exited {proc.returncode}")
    results = [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]
    return results, dict(wall_s=wall, gpu_mem_gib=mem, mem_source=source, **_log_facts(stderr))


def _last_line(text):
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1].strip()[:300] if lines else ""


def _log_facts(stderr):
    pool = re.search(r"KV cache: (\d+) blocks of (\d+) tokens \((\d+) tokens, ([0-9.]+) GiB\)",
                     stderr)
    preempted = sum(int(n) for n in re.findall(r"KV cache full: (\d+) preemptions", stderr))
    return dict(kv_pool_gib=float(pool.group(4)) if pool else None,
                kv_pool_tokens=int(pool.group(3)) if pool else None, preemptions=preempted)


def decode_tps(results):
    """Every prompt of the batch decodes together: decode tokens over the longest decode."""
    tokens = sum(r["timing"]["generated_tokens"] - 1 for r in results)
    seconds = max(r["timing"]["decode_seconds"] for r in results)
    return tokens / seconds


def prefill_tps(results):
    """Prompt tokens over the longest request-start-to-first-token (the prompts start together)."""
    tokens = sum(len(r["prompt_ids"]) for r in results)
    return tokens / max(r["timing"]["prefill_seconds"] for r in results)


def measure(config, prompts, new_tokens, args, timeout):
    """Rows of one REE configuration on one batch: decode and prefill (one run), or only prefill
    when new_tokens is 1. config = (ree binary, label, operation set, spec, extra flags)."""
    ree, label, opset, spec, flags = config
    prompt_len = len(prompts[0])
    common = dict(operation_set=opset, spec=spec, binary=ree)
    max_context = max_context_for(prompt_len, new_tokens, args.max_context)
    # A prompt prefilled alone is timed warm: another prompt of the same length runs first in the
    # same process (--max-batch 1, so the measured one starts after it), as transformers' warm-up
    # call does, so that one-time costs (CUDA module loading, cuBLAS(Lt) handles and algorithm
    # choices, memory pools) are not counted as prefill time.
    warm = new_tokens == 1 and len(prompts) == 1
    runs = [prompt_warmup(prompt_len)] + prompts if warm else prompts
    try:
        results, info = run(ree, args.model_dir, opset, spec, runs, new_tokens, args.work,
                            max_context, list(flags) + list(args.ree_extra), timeout,
                            max_batch=1 if warm else None)
        if warm:
            results = results[1:]
    except RuntimeError as e:
        status = "OOM" if "out of memory" in str(e).lower() else f"error: {e}"
        phases = ("decode", "prefill") if new_tokens > 1 else ("prefill",)
        return [row("ree", label, ph, len(prompts), prompt_len, new_tokens, status=status,
                    **common) for ph in phases]
    common.update(info, max_context=max_context,
                  output_ids_sha256=results[0]["output_ids_sha256"] if len(prompts) == 1 else None)
    rows = [row("ree", label, "prefill", len(prompts), prompt_len, new_tokens,
                tokens_per_s=prefill_tps(results), **common)]
    if new_tokens > 1:
        rows.insert(0, row("ree", label, "decode", len(prompts), prompt_len, new_tokens,
                           tokens_per_s=decode_tps(results), **common))
    return rows
