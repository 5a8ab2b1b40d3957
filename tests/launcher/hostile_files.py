#!/usr/bin/env python3
"""Builds the hostile files of tests/launcher/hostile_input.sh (standard library only).

  hostile_files.py models BASE_MODEL_DIR OUT_DIR   one model directory per hostile case
  hostile_files.py receipts RECEIPT OUT_DIR REFERENCE_DIR   hostile receipts (re-hashed where the
                                                   case is about a value, not a hash)

Every model directory is BASE_MODEL_DIR (the built-in tiny-llama: 4 Llama layers, bf16) with one
thing changed; unchanged files are hard links, so the whole set costs little disk.
"""
import json
import os
import shutil
import struct
import sys

BF16_NAN = b"\xc0\x7f"
BF16_INF = b"\x80\x7f"


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + n])
    return header, data[8 + n :]


def write_safetensors(path, header, payload, header_text=None, align=8):
    """As the safetensors library writes it: the header padded with spaces so that the data
    starts at a multiple of `align` (align=1: no padding, the data may start at an odd offset)."""
    text = header_text if header_text is not None else json.dumps(header).encode()
    if header_text is None:
        text += b" " * (-(8 + len(text)) % align)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        f.write(payload)


class Models:
    def __init__(self, base, out):
        self.base = base
        self.out = out
        self.config = json.load(open(os.path.join(base, "config.json")))
        self.header, self.payload = read_safetensors(os.path.join(base, "model.safetensors"))
        self.tokenizer = json.load(open(os.path.join(base, "tokenizer.json")))

    def copy(self, name, skip=()):
        """A copy of the base directory (hard links) without the files in `skip`."""
        path = os.path.join(self.out, name)
        os.makedirs(path)
        for entry in os.listdir(self.base):
            if entry not in skip:
                os.link(os.path.join(self.base, entry), os.path.join(path, entry))
        return path

    def config_case(self, name, change=None, text=None):
        path = self.copy(name, skip=("config.json",))
        config = json.loads(json.dumps(self.config))
        if change:
            change(config)
        with open(os.path.join(path, "config.json"), "w") as f:
            f.write(text if text is not None else json.dumps(config, indent=1))

    def file_case(self, name, file, text=None, data=None):
        path = self.copy(name, skip=(file,))
        with open(os.path.join(path, file), "wb") as f:
            f.write(data if data is not None else text.encode())

    def special_case(self, name, file, kind):
        """`file` as a FIFO, a directory, a symlink to /dev/zero or a sparse 2 GiB file."""
        path = self.copy(name, skip=(file,))
        target = os.path.join(path, file)
        if kind == "fifo":
            os.mkfifo(target)
        elif kind == "dir":
            os.mkdir(target)
        elif kind == "zero":
            os.symlink("/dev/zero", target)
        elif kind == "huge":
            with open(target, "wb") as f:
                f.truncate(2 << 30)
        elif kind == "empty":
            open(target, "wb").close()

    def weights_case(self, name, change=None, header_text=None, raw=None, align=8):
        path = self.copy(name, skip=("model.safetensors",))
        header = json.loads(json.dumps(self.header))
        payload = bytearray(self.payload)
        if change:
            payload = change(header, payload) or payload
        target = os.path.join(path, "model.safetensors")
        if raw is not None:
            with open(target, "wb") as f:
                f.write(raw)
        else:
            write_safetensors(target, header, bytes(payload), header_text, align)

    def tokenizer_case(self, name, change=None, text=None):
        tokenizer = json.loads(json.dumps(self.tokenizer))
        if change:
            change(tokenizer)
        self.file_case(name, "tokenizer.json", text if text is not None else json.dumps(tokenizer))

    def sharded_case(self, name, change_index=None, index_text=None):
        """Two shards and an index; `change_index` edits the index."""
        path = self.copy(name, skip=("model.safetensors",))
        names = sorted(k for k in self.header if k != "__metadata__")
        shards = [names[: len(names) // 2], names[len(names) // 2 :]]
        weight_map = {}
        for i, group in enumerate(shards):
            file = "model-%05d-of-00002.safetensors" % (i + 1)
            header, chunks, offset = {}, [], 0
            for tensor in group:
                info = dict(self.header[tensor])
                begin, end = info["data_offsets"]
                chunks.append(self.payload[begin:end])
                info["data_offsets"] = [offset, offset + end - begin]
                offset += end - begin
                header[tensor] = info
                weight_map[tensor] = file
            write_safetensors(os.path.join(path, file), header, b"".join(chunks))
        index = {"metadata": {"total_size": len(self.payload)}, "weight_map": weight_map}
        if change_index:
            change_index(index)
        with open(os.path.join(path, "model.safetensors.index.json"), "w") as f:
            f.write(index_text(index) if index_text else json.dumps(index, indent=1))


def tensor_fill(name, value, count=None):
    def change(header, payload):
        begin, end = header[name]["data_offsets"]
        n = (end - begin) // 2 if count is None else count
        payload[begin : begin + 2 * n] = value * n

    return change


def add_tensor(name, shape=(1,)):
    def change(header, payload):
        size = 2
        for d in shape:
            size *= d
        header[name] = {"dtype": "BF16", "shape": list(shape),
                        "data_offsets": [len(payload), len(payload) + size]}
        return payload + bytearray(size)

    return change


def drop_tensor(name):
    def change(header, payload):
        del header[name]

    return change


def set_field(name, value):
    def change(tensor_header, payload):
        tensor_header["model.layers.0.self_attn.q_proj.weight"][name] = value

    return change


def cfg(key, value):
    return lambda c: c.__setitem__(key, value)


def build_config_cases(m):
    """config.json and generation_config.json."""
    for name, key, value in [
        ("layers-2p31", "num_hidden_layers", 2**31 - 1),
        ("layers-2p40", "num_hidden_layers", 2**40),
        ("layers-0", "num_hidden_layers", 0),
        ("layers-neg", "num_hidden_layers", -1),
        ("layers-string", "num_hidden_layers", "4"),
        ("layers-float", "num_hidden_layers", 4.5),
        ("hidden-2p62", "hidden_size", 2**62),
        ("inter-2p62", "intermediate_size", 2**62),
        ("hidden-0", "hidden_size", 0),
        ("vocab-0", "vocab_size", 0),
        ("vocab-2p40", "vocab_size", 2**40),
        ("heads-0", "num_attention_heads", 0),
        ("heads-2p40", "num_attention_heads", 2**40),
        ("kvheads-3", "num_key_value_heads", 3),
        ("kvheads-0", "num_key_value_heads", 0),
        ("headdim-0", "head_dim", 0),
        ("maxpos-0", "max_position_embeddings", 0),
        ("eps-neg", "rms_norm_eps", -1.0),
        ("eps-huge", "rms_norm_eps", 1e300),
        ("theta-0", "rope_theta", 0.0),
        ("theta-neg", "rope_theta", -5.0),
        ("mamba", "model_type", "mamba"),
        ("act-relu6", "hidden_act", "relu6"),
        ("rope-weird", "rope_scaling", {"rope_type": "weird", "factor": 2.0}),
        ("vocab-300", "vocab_size", 300),
        ("eos-beyond", "eos_token_id", 1000000),
        ("eps-double", "rms_norm_eps", 2e-5),  # not hostile: another model, for the MPI case
    ]:
        m.config_case("cfg-" + name, cfg(key, value))
    m.config_case("cfg-no-type", lambda c: (c.pop("model_type"), c.pop("architectures")))
    m.config_case("cfg-layers-3", cfg("num_hidden_layers", 3))  # 4-layer checkpoint: extra tensors
    m.config_case("cfg-layers-5", cfg("num_hidden_layers", 5))  # missing tensors

    def mistral(c):
        c.update(model_type="mistral", architectures=["MistralForCausalLM"], sliding_window=4)
        c.pop("rope_scaling", None)

    m.config_case("cfg-mistral-sw4", mistral)
    text = json.dumps(m.config)
    m.config_case("cfg-dup-key", text='{"num_hidden_layers": 2, ' + text[1:])
    m.config_case("cfg-truncated", text=text[:100])
    m.config_case("cfg-array", text="[1, 2, 3]")
    m.config_case("cfg-deep", text='{"a": ' + "[" * 100000 + "]" * 100000 + "}")
    m.config_case("cfg-nan", text=text.replace('"rms_norm_eps": 1e-05', '"rms_norm_eps": NaN'))
    for kind in ("fifo", "dir", "zero", "huge", "empty"):
        m.special_case("cfg-" + kind, "config.json", kind)

    gen = {"bos_token_id": 256, "eos_token_id": 257}
    for name, value in [("neg", -1), ("string", "x"), ("2p40", 2**40), ("list-bad", [257, -4])]:
        m.file_case("gen-eos-" + name, "generation_config.json",
                    json.dumps(dict(gen, eos_token_id=value)))
    m.file_case("gen-dup-key", "generation_config.json",
                '{"eos_token_id": 5, "bos_token_id": 256, "eos_token_id": 257}')
    m.file_case("gen-bad-json", "generation_config.json", '{"eos_token_id": ')
    for kind in ("fifo", "dir", "zero", "huge"):
        m.special_case("gen-" + kind, "generation_config.json", kind)



def build_weight_cases(m, base):
    """model.safetensors."""
    st = os.path.join(base, "model.safetensors")
    raw = open(st, "rb").read()
    m.weights_case("st-truncated", raw=raw[:100000])
    m.weights_case("st-short-header", raw=raw[:4])
    m.weights_case("st-header-2p63", raw=struct.pack("<Q", 2**63) + raw[8:])
    m.weights_case("st-header-past-end", raw=struct.pack("<Q", len(raw)) + raw[8:])
    m.weights_case("st-header-0", raw=struct.pack("<Q", 0) + raw[8:])
    m.weights_case("st-header-not-json", raw=struct.pack("<Q", 8) + b"not json" + raw[8:])
    m.weights_case("st-header-array", header_text=b"[1,2]")
    header_text = json.dumps(m.header).encode()
    m.weights_case("st-dup-tensor", header_text=b'{"lm_head.weight": {"dtype": "BF16", "shape": '
                   b'[1], "data_offsets": [0, 2]}, ' + header_text[1:])
    m.weights_case("st-offsets-past-end", set_field("data_offsets", [0, 1 << 40]))
    m.weights_case("st-offsets-reversed", set_field("data_offsets", [263680, 132608]))
    m.weights_case("st-dtype-q4", set_field("dtype", "Q4"))
    m.weights_case("st-shape-neg", set_field("shape", [-256, -256]))
    m.weights_case("st-shape-overflow", set_field("shape", [2**40, 2**40]))
    m.weights_case("st-shape-wrong", set_field("shape", [128, 512]))
    m.weights_case("st-shape-data-mismatch", set_field("shape", [256, 255]))
    m.weights_case("st-nan-embed", tensor_fill("model.embed_tokens.weight", BF16_NAN))
    m.weights_case("st-inf-qproj", tensor_fill("model.layers.0.self_attn.q_proj.weight", BF16_INF))
    m.weights_case("st-nan-norm", tensor_fill("model.norm.weight", BF16_NAN, 1))
    m.weights_case("st-inf-lmhead", tensor_fill("lm_head.weight", BF16_INF, 1))
    m.weights_case("st-extra-99", add_tensor("model.layers.99.extra.weight"))
    m.weights_case("st-extra-ctrl", add_tensor("bad\x01name\x1b[31m"))
    m.weights_case("st-missing-norm", drop_tensor("model.norm.weight"))
    # Legal (the padding is optional) but every tensor starts at an odd address once mapped.
    def odd_header(header, payload):
        header["__metadata__"]["pad"] = ""
        header["__metadata__"]["pad"] = "x" * (1 - len(json.dumps(header)) % 2)

    m.weights_case("st-unaligned-data", odd_header, align=1)
    m.weights_case("st-metadata-array", lambda h, p: h.__setitem__("__metadata__", [1, 2]))

    def many_tensors(header, payload):
        end = len(payload)
        for i in range(100000):
            header["extra.%d" % i] = {"dtype": "BF16", "shape": [0], "data_offsets": [end, end]}

    m.weights_case("st-100k-tensors", many_tensors)
    for kind in ("fifo", "dir", "zero", "huge", "empty"):
        m.special_case("st-" + kind, "model.safetensors", kind)



def build_index_cases(m, out):
    """model.safetensors.index.json (sharded checkpoints)."""
    m.sharded_case("idx-ok")
    m.sharded_case("idx-bad-json", index_text=lambda i: json.dumps(i)[:50])
    m.sharded_case("idx-missing-shard",
                   lambda i: i["weight_map"].__setitem__("model.norm.weight", "model-00009-of-00009.safetensors"))
    m.sharded_case("idx-traversal",
                   lambda i: i["weight_map"].__setitem__("model.norm.weight", "../../../etc/passwd"))
    m.sharded_case("idx-absolute",
                   lambda i: i["weight_map"].__setitem__("model.norm.weight", "/etc/passwd"))
    m.sharded_case("idx-tensor-not-in-shard",
                   lambda i: i["weight_map"].__setitem__("model.layers.0.ghost.weight",
                                                        "model-00001-of-00002.safetensors"))
    m.sharded_case("idx-map-array", lambda i: i.__setitem__("weight_map", [1, 2]))
    m.sharded_case("idx-no-map", lambda i: i.pop("weight_map"))
    m.sharded_case("idx-dup-key", index_text=lambda i: json.dumps(i).replace(
        '"weight_map": {', '"weight_map": {"model.norm.weight": "x.safetensors", ', 1))
    m.sharded_case("idx-100k-metadata", lambda i: i["metadata"].update(
        {"m%d" % k: {} for k in range(100000)}))
    for kind in ("fifo", "dir", "huge"):
        m.sharded_case("idx-" + kind)
        target = os.path.join(out, "idx-" + kind, "model.safetensors.index.json")
        os.remove(target)
        if kind == "fifo":
            os.mkfifo(target)
        elif kind == "dir":
            os.mkdir(target)
        else:
            with open(target, "wb") as f:
                f.truncate(2 << 30)



def build_tokenizer_cases(m):
    """tokenizer.json."""
    def added(token_id, content="<|evil|>"):
        return lambda t: t["added_tokens"].append(
            {"content": content, "id": token_id, "lstrip": False, "normalized": False,
             "rstrip": False, "single_word": False, "special": True})

    m.tokenizer_case("tok-added-beyond", added(99999))
    m.tokenizer_case("tok-added-neg", added(-1))
    m.tokenizer_case("tok-vocab-beyond", lambda t: t["model"]["vocab"].__setitem__("zzz", 100000))
    m.tokenizer_case("tok-unigram", lambda t: t["model"].__setitem__("type", "Unigram"))
    m.tokenizer_case("tok-normalizer", lambda t: t.__setitem__("normalizer", {"type": "Bogus"}))

    def split(pattern, behavior="Isolated"):
        return lambda t: t.__setitem__("pre_tokenizer", {
            "type": "Split", "pattern": {"Regex": pattern}, "behavior": behavior, "invert": False})

    m.tokenizer_case("tok-regex-catastrophic", split("(a+)+$"))
    m.tokenizer_case("tok-regex-invalid", split("(unclosed"))
    m.tokenizer_case("tok-regex-empty", split("x*"))
    text = json.dumps(m.tokenizer)
    m.tokenizer_case("tok-dup-key", text='{"added_tokens": [], ' + text[1:])
    m.tokenizer_case("tok-bad-json", text=text[:200])
    m.tokenizer_case("tok-deep", text='{"x": ' + "[" * 100000 + "]" * 100000 + "}")
    for kind in ("fifo", "dir", "zero", "huge"):
        m.special_case("tok-" + kind, "tokenizer.json", kind)


CHAT_TEMPLATE = ("{% for m in messages %}<|{{ m.role }}|>{{ m.content }}{{ eos_token }}{% endfor %}"
                 "{% if add_generation_prompt %}<|assistant|>{% endif %}")


def build_chat_cases(m):
    """The chat template (--chat): chat_template.jinja and tokenizer_config.json."""
    config = json.dumps({"bos_token": "<s>", "eos_token": "</s>"})
    m.file_case("chat-ok", "chat_template.jinja", CHAT_TEMPLATE)
    for kind in ("fifo", "dir", "zero", "huge"):
        m.special_case("chat-jinja-" + kind, "chat_template.jinja", kind)
        m.special_case("chat-config-" + kind, "tokenizer_config.json", kind)
    m.file_case("chat-config-dup-key", "tokenizer_config.json",
                '{"chat_template": "{{ 1 }}", "chat_template": "{{ 2 }}"}')
    m.file_case("chat-config-array", "tokenizer_config.json", "[1]")
    m.file_case("chat-config-template-number", "tokenizer_config.json",
                json.dumps({"chat_template": 5}))
    m.file_case("chat-config-no-default", "tokenizer_config.json",
                json.dumps({"chat_template": [{"name": "tool_use", "template": "x"}]}))
    for name, template in [
        ("syntax", "{% for m in messages %}{{ m.content }"),
        ("unknown-tag", "{% include 'x.jinja' %}"),
        ("raise", "{{ raise_exception('no system role here') }}"),
        ("output", "{% set s = namespace(t='x') %}{% for i in range(64) %}"
                   "{% set s.t = s.t ~ s.t %}{% endfor %}{{ s.t }}"),
        ("nesting", "{{ " + "(" * 5000 + "1" + ")" * 5000 + " }}"),
        ("macro-recursion", "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}"),
    ]:
        m.file_case("chat-" + name, "chat_template.jinja", template)
        with open(os.path.join(m.out, "chat-" + name, "tokenizer_config.json"), "w") as f:
            f.write(config)


def build_models(base, out):
    m = Models(base, out)
    build_config_cases(m)
    build_weight_cases(m, base)
    build_index_cases(m, out)
    build_tokenizer_cases(m)
    build_chat_cases(m)


def build_receipts(receipt_path, out, reference_dir):
    sys.path.insert(0, reference_dir)
    import receipt_reference as ref

    base_text = open(receipt_path, encoding="utf-8").read()
    base = json.loads(base_text)
    os.makedirs(out, exist_ok=True)

    def write(name, receipt=None, text=None, rehash=False):
        if receipt is not None and rehash:
            for q in receipt["requests"]:
                q["output_ids_sha256"] = ref.ids_sha256(q["output_ids"])
                q["prompt_ids_sha256"] = ref.ids_sha256(q["prompt_ids"])
                q["logits_chain_sha256"] = ref.logits_chain(q["prompt_ids_sha256"],
                                                            q["step_logits_sha256"])
            body = {k: v for k, v in receipt.items() if k != "receipt_sha256"}
            receipt["receipt_sha256"] = ref.sha256_hex(ref.canonical(body))
        if text is None:
            text = json.dumps(receipt, ensure_ascii=False, indent=1)
        with open(os.path.join(out, name + ".json"), "w", encoding="utf-8") as f:
            f.write(text)

    def edited(change):
        r = json.loads(base_text)
        change(r)
        return r

    def sampling(key, value, bits=None):
        def change(r):
            r["requests"][0]["sampling"][key] = value
            if bits is not None:
                r["requests"][0]["sampling"][key + "_f32"] = bits

        return change

    for name, key, value, bits in [
        ("temp-nan", "temperature", "nan", "7fc00000"),
        ("temp-inf", "temperature", "inf", "7f800000"),
        ("temp-neg", "temperature", "-1", "bf800000"),
        ("topp-0", "top_p", "0", "00000000"),
        ("topp-2", "top_p", "2", "40000000"),
        ("topp-nan", "top_p", "nan", "7fc00000"),
        ("topk-neg", "top_k", -5, None),
        ("seed-neg", "seed", "-1", None),
        ("seed-zeros", "seed", "007", None),
    ]:
        write("r-" + name, edited(sampling(key, value, bits)), rehash=True)
    # A forged "text" placed before the real one: readers keeping the first value would show it.
    forged = base_text.replace('"text":', '"text": "FORGED", "text":', 1)
    write("r-dup-text", text=forged)
    write("r-dup-format", text=base_text.replace("{", '{"format": "ree-receipt/1", ', 1))
    write("r-unknown-key", edited(lambda r: r.__setitem__("extra", 1)), rehash=True)
    # Not re-hashed: 2^31 is no int32, so the hash of it is undefined; the range check comes first.
    write("r-output-2p31", edited(lambda r: r["requests"][0]["output_ids"].__setitem__(0, 2**31)))
    write("r-output-empty", edited(lambda r: r["requests"][0].update(output_ids=[],
                                                                      step_logits_sha256=[])),
          rehash=True)
    write("r-steps-short", edited(lambda r: r["requests"][0]["step_logits_sha256"].pop()),
          rehash=True)
    write("r-deep", text='{"format": ' + "[" * 100000 + "]" * 100000 + "}")
    write("r-truncated", text=base_text[: len(base_text) // 2])
    write("r-not-object", text="[]")
    write("r-max-context-huge", edited(lambda r: r["run"].__setitem__("max_context", 2**40)),
          rehash=True)
    # Informational fields do not decide a verdict (docs/receipt.md): this one still verifies.
    write("ok-plan-layer-1e9", edited(lambda r: r["execution"]["plan"][0].__setitem__(
        "end_layer", 1000000000)), rehash=True)


def main():
    if sys.argv[1] == "models":
        build_models(sys.argv[2], sys.argv[3])
    elif sys.argv[1] == "receipts":
        build_receipts(sys.argv[2], sys.argv[3], sys.argv[4])
    else:
        sys.exit("usage: hostile_files.py models BASE OUT | receipts RECEIPT OUT REFERENCE_DIR")


if __name__ == "__main__":
    main()
