"""Exports the compiler tests' models with torch.onnx.export and computes onnxruntime's outputs.

Usage: export_models.py OUT_DIR. Writes OUT_DIR/<model>/{model.onnx, input_<i>.npy, ort_<i>.npy}
for every model, and OUT_DIR/<model>_ext/ with the same model's weights in an external file.
The six tiny transformers architectures of the model tests (scripts/reference/hf_reference.py's
MODELS: llama3, llama2_tied, mistral, qwen2, qwen3, gpt2; random weights, eager attention) are
written as OUT_DIR/hf_<name>/ with transformers' own fp32 logits too (torch_0.npy).
"""
import os
import sys
import warnings

import numpy as np
import onnx
import onnxruntime as ort
import torch

warnings.filterwarnings("ignore")
torch.manual_seed(0)


class Mlp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(12, 32)
        self.norm = torch.nn.LayerNorm(32)
        self.fc2 = torch.nn.Linear(32, 5)

    def forward(self, x):
        h = torch.nn.functional.gelu(self.fc1(x))
        h = self.norm(h)
        h = torch.tanh(h) * torch.sigmoid(h) + torch.sqrt(h * h + 1.0) / 3.0
        return torch.log_softmax(self.fc2(h), dim=-1), torch.softmax(self.fc2(h), dim=-1)


class Cnn(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.conv2 = torch.nn.Conv2d(8, 8, 3, padding=1)
        self.conv3 = torch.nn.Conv2d(8, 16, 3, stride=2, padding=1)
        self.head = torch.nn.Linear(16, 10)

    def forward(self, x):
        h = torch.relu(self.conv1(x))
        h = torch.relu(h + self.conv2(h))  # a residual block
        h = torch.nn.functional.max_pool2d(h, 2)
        h = torch.relu(self.conv3(h))
        h = torch.nn.functional.adaptive_avg_pool2d(h, 1).flatten(1)
        return self.head(h)


class Attention(torch.nn.Module):
    """One pre-norm attention block with an RMSNorm written out (pow, mean, rsqrt pattern)."""

    def __init__(self, dim=16, heads=2):
        super().__init__()
        self.heads = heads
        self.qkv = torch.nn.Linear(dim, 3 * dim, bias=False)
        self.out = torch.nn.Linear(dim, dim, bias=False)
        self.weight = torch.nn.Parameter(torch.rand(dim) + 0.5)

    def forward(self, x):
        b, t, d = x.shape
        norm = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.weight
        q, k, v = self.qkv(norm).split(d, dim=-1)
        q = q.reshape(b, t, self.heads, d // self.heads).transpose(1, 2)
        k = k.reshape(b, t, self.heads, d // self.heads).transpose(1, 2)
        v = v.reshape(b, t, self.heads, d // self.heads).transpose(1, 2)
        scores = q @ k.transpose(-1, -2) / (d // self.heads) ** 0.5
        mask = torch.ones(t, t).tril().bool()
        scores = scores.masked_fill(~mask, float("-inf"))
        y = (scores.softmax(-1) @ v).transpose(1, 2).reshape(b, t, d)
        return x + self.out(y)


def export(module, inputs, names, dynamic, path, opset):
    torch.onnx.export(module.eval(), tuple(inputs), path, input_names=names,
                      dynamic_axes=dynamic, opset_version=opset, dynamo=False)


def tiny_llama():
    import transformers
    config = transformers.LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=48,
                                      num_hidden_layers=2, num_attention_heads=4,
                                      num_key_value_heads=2, max_position_embeddings=64,
                                      use_cache=False, attn_implementation="eager")
    model = transformers.LlamaForCausalLM(config).eval()

    class Logits(torch.nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, ids):
            # An explicit all-ones mask: without one transformers looks for packed sequences
            # (aten::diff, which the exporter lacks).
            mask = torch.ones_like(ids)
            return self.inner(input_ids=ids, attention_mask=mask, use_cache=False).logits

    return Logits(model)


def reference_models():
    """The model tests' transformers architectures, built as hf_reference.py builds them."""
    import transformers
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                    "scripts", "reference"))
    from hf_reference import MODELS
    for index, (name, (config_class, kwargs)) in enumerate(MODELS.items()):
        config = config_class(**dict(kwargs, use_cache=False))
        torch.manual_seed(1000 + index)
        model = transformers.AutoModelForCausalLM.from_config(
            config, dtype=torch.float32, attn_implementation="eager").eval()
        with torch.no_grad():  # random init leaves norms at 1: perturb them (as hf_reference.py)
            for pname, param in model.named_parameters():
                if "norm" in pname or "ln_" in pname:
                    param.add_(0.1 * torch.randn_like(param))

        class Logits(torch.nn.Module):
            def __init__(self, inner):
                super().__init__()
                self.inner = inner

            def forward(self, ids):
                mask = torch.ones_like(ids)  # see tiny_llama
                return self.inner(input_ids=ids, attention_mask=mask, use_cache=False).logits

        yield name, Logits(model), config.vocab_size


def write_case(out_dir, name, module, inputs, names, dynamic, opset, external=False,
               keep_torch=False):
    directory = os.path.join(out_dir, name)
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, "model.onnx")
    export(module, inputs, names, dynamic, path, opset)
    if external:
        model = onnx.load(path)
        onnx.save(model, path, save_as_external_data=True, all_tensors_to_one_file=True,
                  location="weights.bin", size_threshold=0)
    feeds = {}
    for i, (value, input_name) in enumerate(zip(inputs, names)):
        array = value.numpy()
        np.save(os.path.join(directory, f"input_{i}.npy"), array)
        feeds[input_name] = array
    if keep_torch:  # the framework's own fp32 outputs
        with torch.no_grad():
            np.save(os.path.join(directory, "torch_0.npy"), module(*inputs).numpy())
    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    for i, result in enumerate(session.run(None, feeds)):
        np.save(os.path.join(directory, f"ort_{i}.npy"), result)
    ops = sorted({node.op_type for node in onnx.load(path, load_external_data=False).graph.node})
    print(name, " ".join(ops))


def main():
    out_dir = sys.argv[1]
    x = torch.randn(4, 12)
    write_case(out_dir, "mlp", Mlp(), [x], ["x"], {"x": {0: "batch"}}, 17)
    write_case(out_dir, "mlp_opset20", Mlp(), [x], ["x"], {"x": {0: "batch"}}, 20)
    write_case(out_dir, "mlp_ext", Mlp(), [x], ["x"], {"x": {0: "batch"}}, 17, external=True)
    write_case(out_dir, "cnn", Cnn(), [torch.randn(3, 3, 16, 16)], ["image"],
               {"image": {0: "batch"}}, 17)
    write_case(out_dir, "attention", Attention(), [torch.randn(3, 5, 16)], ["x"],
               {"x": {0: "batch"}}, 17)
    try:
        llama = tiny_llama()
    except ImportError:
        llama = None
    if llama is not None:
        ids = torch.randint(0, 64, (2, 7))
        write_case(out_dir, "llama", llama, [ids], ["input_ids"],
                   {"input_ids": {0: "batch", 1: "sequence"}}, 17)
        for name, module, vocab in reference_models():
            ids = torch.randint(0, vocab, (2, 9))
            write_case(out_dir, f"hf_{name}", module, [ids], ["input_ids"],
                       {"input_ids": {0: "batch", 1: "sequence"}}, 17, keep_torch=True)


if __name__ == "__main__":
    main()
