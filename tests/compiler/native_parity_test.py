"""A compiled transformers Llama against REE's native engine on the same random checkpoint,
bitwise.

The model tests' llama2_tied (scripts/reference/hf_reference.py's MODELS; random weights, eager
attention) is saved as a safetensors checkpoint and exported with torch.onnx.export. The native
engine (`ree-launch run --operation-set reproducible --json`, greedy) gives the SHA-256 of the fp32
logits of every step; the compiled graph (`ree-launch compile --run`) runs the prompt followed by
the produced tokens, and the rows of its logits from the last prompt position on must hash to
exactly those values. That holds because the compiler fuses what torch writes out op by op into
the RepOps the native model calls (docs/compiler.md, "Fusions"): the RMSNorm chain into rmsNorm
and softmax(Q K^T * scale + causal mask) V into the causal attention RepOp; the matrix products
with constant weights are already the same RepOp linear, SwiGLU's x * sigmoid(x) * up is the
same arithmetic as the native gated activation, and the rotary embedding's graph (pos * inv_freq,
correctly rounded Cos/Sin, q * cos + rotate_half(q) * sin) is rope.md's formula.

One difference is not in the graph but in transformers: it computes the rotary inverse frequencies
with torch's pow, which the exporter bakes into the graph as a constant, where REE uses the
correctly rounded pow (pointwise.md); torch's may be an ulp off. The test sets the module's
inv_freq to the correctly rounded values (float(base ** (2i / d)) in double, then 1 / p in fp32)
before exporting, and says so.

Usage: native_parity_test.py REE_LAUNCH WORK_DIR
"""
import hashlib
import json
import os
import subprocess
import sys

try:
    import numpy as np
    import onnx  # noqa: F401
    import torch
    import transformers
except ImportError as error:  # a visible skip: ctest maps 77 to Skipped
    print(f"skipped: {error} (pip install -r requirements.txt)")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "scripts", "reference"))
from hf_reference import MODELS  # noqa: E402

PROMPT = [1, 17, 250, 3, 99, 42, 7, 300, 128, 64, 5, 11]
STEPS = 8
NATIVE_MODELS = ["llama2_tied", "mistral", "qwen2", "qwen3"]


def correctly_rounded_inv_freq(base, dim):
    """pointwise.md's ropeInvFreq without scaling: e = 2i / d and 1 / p in fp32, p = crPow."""
    out = []
    for i in range(dim // 2):
        e = np.float32(np.float32(2 * i) / np.float32(dim))
        p = np.float32(float(np.float32(base)) ** float(e))  # double pow, rounded once
        out.append(np.float32(np.float32(1.0) / p))
    return torch.tensor(np.array(out, np.float32))


def build(name, work):
    config_class, kwargs = MODELS[name]
    config = config_class(**kwargs)
    torch.manual_seed(1000 + list(MODELS).index(name))
    model = transformers.AutoModelForCausalLM.from_config(
        config, dtype=torch.float32, attn_implementation="eager").eval()
    with torch.no_grad():  # as hf_reference.py
        for pname, param in model.named_parameters():
            if "norm" in pname or "ln_" in pname:
                param.add_(0.1 * torch.randn_like(param))
    directory = os.path.join(work, name)
    model.save_pretrained(directory, safe_serialization=True)
    rotary = model.model.rotary_emb
    head_dim = kwargs.get("head_dim", kwargs["hidden_size"] // kwargs["num_attention_heads"])
    exact = correctly_rounded_inv_freq(kwargs["rope_theta"], head_dim)
    changed = int((rotary.inv_freq != exact).sum())
    print(f"{name}: {changed} of {exact.numel()} inverse frequencies differ from torch's pow")
    rotary.inv_freq = exact
    rotary.original_inv_freq = exact
    return model, directory


class Logits(torch.nn.Module):
    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def forward(self, ids):
        mask = torch.ones_like(ids)  # see export_models.py
        return self.inner(input_ids=ids, attention_mask=mask, use_cache=False).logits


def compare(launch, work, name):
    """The number of steps whose compiled logits differ from the native engine's."""
    model, directory = build(name, work)
    native = subprocess.run(
        [launch, "run", "--model", directory, "--prompt-ids", ",".join(map(str, PROMPT)),
         "--max-new-tokens", str(STEPS), "--temperature", "0", "--operation-set", "reproducible",
         "--json"], capture_output=True, text=True, timeout=300)
    if native.returncode != 0:
        print(f"FAIL: {name}: native run: {native.stderr.strip()}")
        return 1
    result = json.loads(native.stdout.strip().splitlines()[-1])
    produced = result["output_ids"]
    sequence = PROMPT + produced[:-1]
    ids = torch.tensor([sequence])
    onnx_path = os.path.join(work, f"{name}.onnx")
    torch.onnx.export(Logits(model), (ids,), onnx_path, input_names=["input_ids"],
                      dynamic_axes={"input_ids": {0: "batch", 1: "sequence"}}, opset_version=17,
                      dynamo=False)
    ids_path = os.path.join(work, f"{name}_ids.npy")
    np.save(ids_path, ids.numpy())
    out_dir = os.path.join(work, f"{name}_compiled")
    compiled = subprocess.run([launch, "compile", onnx_path, "--run", ids_path, "--output-dir",
                               out_dir], capture_output=True, text=True, timeout=300)
    if compiled.returncode != 0:
        print(f"FAIL: {name}: compile: {compiled.stderr.strip()}")
        return 1
    logits = np.load(os.path.join(out_dir, "output_0.npy"))[0]
    with torch.no_grad():
        reference = Logits(model)(ids).numpy()[0]
    print(f"{name}: max |compiled - transformers| = {float(np.abs(logits - reference).max()):.3g}")
    failures = 0
    for step, want in enumerate(result["step_logits_sha256"]):
        row = np.ascontiguousarray(logits[len(PROMPT) - 1 + step])
        got = hashlib.sha256(row.tobytes()).hexdigest()
        same = got == want
        failures += 0 if same else 1
        print(f"{'ok  ' if same else 'FAIL'} {name} step {step}: compiled {got[:16]} "
              f"native {want[:16]}")
    return failures


def main():
    launch, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    failures = sum(compare(launch, work, name) for name in NATIVE_MODELS)
    print(f"{failures} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
