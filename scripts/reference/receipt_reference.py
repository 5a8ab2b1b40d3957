#!/usr/bin/env python3
"""Independent recomputation of REE receipt hashes from docs/receipt.md (ree-receipt/1).

Uses only hashlib/json/struct for the hashes (the safetensors package only to write re-sharded
test checkpoints), so that it shares no code with the C++ implementation.

  receipt_reference.py receipt RECEIPT      recompute every internal hash; print a JSON report
  receipt_reference.py identity MODEL_DIR   config/tokenizer/generation-config/chat-template/weights
                                            SHA-256 as the doc defines
  receipt_reference.py manifest MODEL_DIR   print the weights manifest (bytes that are hashed)
  receipt_reference.py gguf-tokenizer FILE  a GGUF file's tokenizer_sha256 (JSON)
  receipt_reference.py hf-files MODEL_DIR   a directory's generation_config_sha256 and
                                            chat_template_sha256 (JSON)
  receipt_reference.py reshard MODEL_DIR OUT  the same tensors in 2 shards (other order) + index
  receipt_reference.py canonical RECEIPT    print the canonical body (what receipt_sha256 covers)

Exit status: 0, or 1 when `receipt` finds a hash that disagrees (the report says which).
"""
import hashlib
import json
import os
import shutil
import struct
import sys

CHAIN_DOMAIN = b"ree-logits-chain/1"
MANIFEST_VERSION = "ree-weights/1"
GGUF_TOKENIZER_VERSION = b"ree-gguf-tokenizer/1\n"
# A model directory's files bound by generation_config_sha256 and chat_template_sha256, in order.
MODEL_FILES = {
    "generation_config_sha256": (b"ree-generation-config/1\n", ["generation_config.json"]),
    "chat_template_sha256": (b"ree-chat-template/1\n",
                             ["tokenizer_config.json", "chat_template.jinja"]),
}
# GGUF metadata value types -> bytes of one value (8 = string, 9 = array: variable).
GGUF_SCALAR_BYTES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}


def sha256_hex(data):
    return hashlib.sha256(data).hexdigest()


def ids_sha256(ids):
    return sha256_hex(struct.pack("<%di" % len(ids), *ids))


def logits_chain(prompt_ids_sha256, steps):
    chain = hashlib.sha256(CHAIN_DOMAIN + bytes.fromhex(prompt_ids_sha256)).digest()
    for step in steps:
        chain = hashlib.sha256(chain + bytes.fromhex(step)).digest()
    return chain.hex()


def canonical(obj):
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def receipt_report(path):
    with open(path, "rb") as f:
        receipt = json.loads(f.read().decode("utf-8"))
    body = {k: v for k, v in receipt.items() if k != "receipt_sha256"}
    report = {"receipt_sha256": sha256_hex(canonical(body)), "requests": []}
    ok = report["receipt_sha256"] == receipt.get("receipt_sha256")
    for r in receipt["requests"]:
        entry = {
            "prompt_ids_sha256": ids_sha256(r["prompt_ids"]),
            "output_ids_sha256": ids_sha256(r["output_ids"]),
            "logits_chain_sha256": logits_chain(ids_sha256(r["prompt_ids"]), r["step_logits_sha256"]),
        }
        for key, value in entry.items():
            ok = ok and r[key] == value
        # Sampling floats: the bits are the value; the decimal is their "%.9g" form.
        for name in ("temperature", "top_p"):
            value = struct.unpack("<f", bytes.fromhex(r["sampling"][name + "_f32"])[::-1])[0]
            entry[name] = "%.9g" % value
            ok = ok and entry[name] == r["sampling"][name]
        report["requests"].append(entry)
    report["ok"] = ok
    return report


def read_safetensors_header(path):
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n).decode("utf-8"))
    return 8 + n, header


def checkpoint_tensors(directory):
    """{name: (file, data_start, dtype, shape, begin, end)} as docs/receipt.md defines the set."""
    single = os.path.join(directory, "model.safetensors")
    if os.path.exists(single):
        files = {"model.safetensors": None}
    else:
        with open(os.path.join(directory, "model.safetensors.index.json")) as f:
            weight_map = json.load(f)["weight_map"]
        files = {}
        for name, file in weight_map.items():
            files.setdefault(file, set()).add(name)
    tensors = {}
    for file, wanted in files.items():
        path = os.path.join(directory, file)
        start, header = read_safetensors_header(path)
        for name, info in header.items():
            if name == "__metadata__" or (wanted is not None and name not in wanted):
                continue
            begin, end = info["data_offsets"]
            tensors[name] = (path, start, info["dtype"], info["shape"], begin, end)
    return tensors


def weights_manifest(directory):
    lines = [MANIFEST_VERSION + "\n"]
    tensors = checkpoint_tensors(directory)
    for name in sorted(tensors, key=lambda n: n.encode("utf-8")):
        path, start, dtype, shape, begin, end = tensors[name]
        with open(path, "rb") as f:
            f.seek(start + begin)
            digest = sha256_hex(f.read(end - begin))
        lines.append("%s\t%s\t%s\t%s\n" % (name, dtype, ",".join(str(d) for d in shape), digest))
    return "".join(lines).encode("utf-8")


def file_sha256(path):
    if not os.path.exists(path):
        return ""
    with open(path, "rb") as f:
        return sha256_hex(f.read())


def model_files_bytes(directory, version, names):
    """docs/receipt.md: the version line, then per file NAME TAB "-" LF when it does not exist
    (symlinks followed), else NAME TAB SIZE LF and its raw bytes."""
    out = version
    for name in names:
        path = os.path.join(directory, name)
        if not os.path.exists(path):
            out += name.encode("utf-8") + b"\t-\n"
            continue
        with open(path, "rb") as f:
            data = f.read()
        out += b"%s\t%d\n" % (name.encode("utf-8"), len(data)) + data
    return out


def model_files_sha256(directory):
    return {field: sha256_hex(model_files_bytes(directory, version, names))
            for field, (version, names) in MODEL_FILES.items()}


def identity(directory):
    result = {
        "config_sha256": file_sha256(os.path.join(directory, "config.json")),
        "tokenizer_sha256": file_sha256(os.path.join(directory, "tokenizer.json")),
        "weights_sha256": sha256_hex(weights_manifest(directory)),
    }
    result.update(model_files_sha256(directory))
    return result


def gguf_value_end(data, pos, value_type):
    """The offset just past a GGUF value of `value_type` that starts at `pos`."""
    if value_type in GGUF_SCALAR_BYTES:
        return pos + GGUF_SCALAR_BYTES[value_type]
    if value_type == 8:
        (n,) = struct.unpack_from("<Q", data, pos)
        return pos + 8 + n
    if value_type == 9:
        element_type, count = struct.unpack_from("<IQ", data, pos)
        pos += 12
        if element_type in GGUF_SCALAR_BYTES:
            return pos + count * GGUF_SCALAR_BYTES[element_type]
        for _ in range(count):
            pos = gguf_value_end(data, pos, element_type)
        return pos
    raise ValueError("unknown GGUF value type %d at offset %d" % (value_type, pos))


def gguf_metadata_entries(path):
    """{key: the entry's bytes as the file holds them (key length, key, type, value)}."""
    with open(path, "rb") as f:
        data = f.read()
    magic, version, _, n_entries = struct.unpack_from("<4sIQQ", data, 0)
    if magic != b"GGUF" or version not in (2, 3):
        raise ValueError("%s: not a GGUF file of version 2 or 3" % path)
    entries, pos = {}, 24
    for _ in range(n_entries):
        start = pos
        (n,) = struct.unpack_from("<Q", data, pos)
        key = data[pos + 8:pos + 8 + n]
        (value_type,) = struct.unpack_from("<I", data, pos + 8 + n)
        pos = gguf_value_end(data, pos + 12 + n, value_type)
        entries[key] = data[start:pos]
    return entries


def gguf_tokenizer_sha256(path):
    """docs/receipt.md: the entries whose key begins with "tokenizer." and general.architecture,
    in ascending byte order of the keys, after a version line; "" when no key begins with
    "tokenizer.". The entries are the file's own bytes, not re-encoded."""
    entries = gguf_metadata_entries(path)
    keys = [k for k in entries if k.startswith(b"tokenizer.")]
    if not keys:
        return ""
    if b"general.architecture" in entries:
        keys.append(b"general.architecture")
    return sha256_hex(GGUF_TOKENIZER_VERSION + b"".join(entries[k] for k in sorted(keys)))


def write_safetensors_by_hand(path, tensors):
    """tensors: [(name, dtype, shape, bytes)] written in the given order (not sorted)."""
    header, offset = {}, 0
    for name, dtype, shape, data in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for _, _, _, data in tensors:
            f.write(data)


def reshard(directory, out):
    """The same tensors as 2 shards: the first written by the safetensors package, the second by
    hand in reverse name order; plus model.safetensors.index.json and the other files."""
    import torch  # noqa: F401  (safetensors.torch needs it for BF16)
    from safetensors.torch import load_file, save_file

    os.makedirs(out, exist_ok=True)
    for file in os.listdir(directory):
        if not file.endswith(".safetensors") and not file.endswith(".index.json"):
            shutil.copy(os.path.join(directory, file), os.path.join(out, file))
    tensors = checkpoint_tensors(directory)
    names = sorted(tensors)
    first, second = names[1::2], names[0::2]
    loaded = {}
    for name in first:
        path = tensors[name][0]
        loaded.setdefault(path, load_file(path))
    save_file({n: loaded[tensors[n][0]][n].contiguous() for n in first},
              os.path.join(out, "model-00001-of-00002.safetensors"))
    by_hand = []
    for name in reversed(second):
        path, start, dtype, shape, begin, end = tensors[name]
        with open(path, "rb") as f:
            f.seek(start + begin)
            by_hand.append((name, dtype, shape, f.read(end - begin)))
    write_safetensors_by_hand(os.path.join(out, "model-00002-of-00002.safetensors"), by_hand)
    weight_map = {n: "model-00001-of-00002.safetensors" for n in first}
    weight_map.update({n: "model-00002-of-00002.safetensors" for n in second})
    with open(os.path.join(out, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {}, "weight_map": weight_map}, f, indent=2)


def main(argv):
    if len(argv) < 3:
        sys.stderr.write(__doc__)
        return 2
    command = argv[1]
    if command == "receipt":
        report = receipt_report(argv[2])
        print(json.dumps(report, sort_keys=True))
        return 0 if report["ok"] else 1
    if command == "identity":
        print(json.dumps(identity(argv[2]), sort_keys=True))
        return 0
    if command == "gguf-tokenizer":
        print(json.dumps({"tokenizer_sha256": gguf_tokenizer_sha256(argv[2])}))
        return 0
    if command == "hf-files":
        print(json.dumps(model_files_sha256(argv[2]), sort_keys=True))
        return 0
    if command == "manifest":
        sys.stdout.buffer.write(weights_manifest(argv[2]))
        return 0
    if command == "reshard" and len(argv) == 4:
        reshard(argv[2], argv[3])
        return 0
    if command == "canonical":
        with open(argv[2], "rb") as f:
            receipt = json.loads(f.read().decode("utf-8"))
        receipt.pop("receipt_sha256", None)
        sys.stdout.buffer.write(canonical(receipt))
        return 0
    sys.stderr.write(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
