"""ree.reproducible(model) on the six tiny transformers architectures of REE's model tests
(scripts/reference/hf_reference.py's MODELS: llama3, llama2_tied, mistral, qwen2, qwen3, gpt2;
random fp32 weights, fixed seeds, built here with transformers, nothing downloaded):

- the logits' bits do not depend on the run, the batch composition or padding (right padding, and
  left padding with position ids), and a prefix's logits are the full run's;
- they stay within a stated bound of transformers' own fp32 logits (see TOLERANCE);
- on a GPU machine the same model on cuda:0 gives the CPU's bits (skipped, saying so, without
  one); the SHA-256 of the logits bytes is printed for the log;
- they are the bits of REE's own runtime (ree.Engine, reproducible operation set) on the same
  safetensors checkpoint: every greedy step's logits hash, for all six architectures (see
  docs/python.md for why the computations are the same).
"""

import copy
import hashlib
import sys

import pytest
import torch

import ree
from conftest import REPO, assert_bits_equal

transformers = pytest.importorskip("transformers")
sys.path.insert(0, str(REPO / "scripts" / "reference"))
from hf_reference import MODELS  # noqa: E402

NAMES = list(MODELS)
PROMPT = [1, 17, 250, 3, 99, 42, 7, 300, 128, 64, 5, 11]  # hf_reference.py's prompt
STEPS = 6
# |REE - transformers| <= TOLERANCE * max|transformers logits| elementwise. Both compute in fp32
# with fp32 accumulation; they differ in summation order (REE's 128-element fma chains vs ATen's
# blocked sums), in correctly rounded exp/tanh/rsqrt/sin/cos vs libm's and in the fused RMSNorm
# (a dot product, no rounded squares): a few ulps (2^-24 ~ 6e-8 relative) per value, carried
# through 3 layers of width 64-176. Measured here: at most 5.4e-7 of the largest logit (6 models).
# 1e-5 leaves a ~20x margin and still catches a wrong operator (a wrong mask, rotary angle or norm
# moves the logits by 1e-2 or more).
TOLERANCE = 1e-5


def build(name, **changes):
    """hf_reference.py's model `name`: its config (with `changes`) and seed, norms perturbed."""
    config_class, kwargs = MODELS[name]
    kwargs = dict(kwargs, **changes)
    torch.manual_seed(1000 + NAMES.index(name))
    model = transformers.AutoModelForCausalLM.from_config(
        config_class(**kwargs), dtype=torch.float32, attn_implementation="sdpa").eval()
    with torch.no_grad():
        for pname, param in model.named_parameters():
            if "norm" in pname or "ln_" in pname:
                param.add_(0.1 * torch.randn_like(param))
    return model


_MODELS = {}


def model_for(name):
    if name not in _MODELS:
        _MODELS[name] = build(name)
    return _MODELS[name]


def logits(model, ids, **kwargs):
    with torch.no_grad():
        return model(input_ids=ids, use_cache=False, **kwargs).logits


def token_rows(count, length, seed, vocab):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(3, vocab, (count, length), generator=g)


def sha256(t: torch.Tensor) -> str:
    return hashlib.sha256(t.detach().contiguous().cpu().numpy().tobytes()).hexdigest()


def padded(rows, side):
    """A batch of id lists padded with 0 on `side`: ids, attention mask, position ids."""
    width = max(len(r) for r in rows)
    ids = torch.zeros(len(rows), width, dtype=torch.long)
    mask = torch.zeros(len(rows), width, dtype=torch.long)
    for i, r in enumerate(rows):
        span = slice(0, len(r)) if side == "right" else slice(width - len(r), width)
        ids[i, span] = torch.tensor(r)
        mask[i, span] = 1
    positions = (mask.cumsum(-1) - 1).clamp_min(0)
    return ids, mask, positions


@pytest.mark.parametrize("name", NAMES)
def test_bits_independent_of_run_and_batch(name):
    model = model_for(name)
    a, b, c = token_rows(3, 41, seed=NAMES.index(name), vocab=model.config.vocab_size)[:, None]
    with ree.reproducible(model):
        alone = logits(model, a)
        in_pair = logits(model, torch.cat([b, a]))
        in_three = logits(model, torch.cat([a, c, b]))
        again = logits(model, a)
        prefix = logits(model, a[:, :23])
    assert_bits_equal(again, alone, f"{name}: run to run")
    assert_bits_equal(in_pair[1:2], alone, f"{name}: a after b")
    assert_bits_equal(in_three[0:1], alone, f"{name}: a before c, b")
    assert_bits_equal(in_three[2:3], in_pair[0:1], f"{name}: b in two batches")
    assert_bits_equal(prefix, alone[:, :23], f"{name}: prefix")


@pytest.mark.parametrize("side", ["right", "left"])
@pytest.mark.parametrize("name", NAMES)
def test_bits_independent_of_padding(name, side):
    """Sequences of 41, 17 and 30 tokens padded to one batch: each one's real positions have the
    bits of the sequence run alone (left padding passes position ids, as generate() does)."""
    model = model_for(name)
    g = torch.Generator().manual_seed(50 + NAMES.index(name))
    rows = [torch.randint(3, model.config.vocab_size, (n,), generator=g).tolist()
            for n in (41, 17, 30)]
    ids, mask, positions = padded(rows, side)
    with ree.reproducible(model):
        batch = logits(model, ids, attention_mask=mask, position_ids=positions)
        for i, r in enumerate(rows):
            alone = logits(model, torch.tensor([r]))
            real = batch[i, :len(r)] if side == "right" else batch[i, ids.shape[1] - len(r):]
            assert_bits_equal(real[None], alone, f"{name}: row {i} ({len(r)} tokens, {side} "
                                                 "padding) vs alone")


@pytest.mark.parametrize("name", NAMES)
def test_close_to_transformers(name):
    model = model_for(name)
    ids = token_rows(2, 41, seed=7, vocab=model.config.vocab_size)
    with ree.reproducible(model):
        ours = logits(model, ids)
    reference = logits(model, ids)  # transformers' own fp32 logits, the same weights
    scale = reference.abs().max().item()
    error = (ours - reference).abs().max().item()
    print(f"{name}: max |REE - transformers| = {error:.3g} ({error / scale:.3g} of the largest "
          f"logit {scale:.3g})")
    assert error <= TOLERANCE * scale, f"{name}: {error:.3g} > {TOLERANCE} * {scale:.3g}"
    assert not torch.equal(ours, reference), f"{name}: REE's logits are ATen's bits"
    assert model.config._attn_implementation == "sdpa"  # restored


def native_run(directory):
    """REE's runtime on the checkpoint: greedy ids and the SHA-256 of each step's fp32 logits."""
    engine = ree.Engine(str(directory), operation_set="reproducible", device="cpu")
    out = engine.generate([PROMPT], max_new_tokens=STEPS).completions[0]
    assert len(out.step_logits_sha256) == len(out.ids) > 0
    return out.ids, out.step_logits_sha256


def assert_same_bits_as_ree_runtime(name, model, directory):
    """The prompt and the native run's greedy tokens in one forward pass under ree.reproducible:
    the rows from the prompt's last position on hash to the native per-step logits hashes (the
    native run computes them by prefill then decode steps over its KV cache)."""
    model.save_pretrained(directory, safe_serialization=True)
    produced, native = native_run(directory)
    ids = torch.tensor([PROMPT + produced[:-1]])
    with ree.reproducible(model):
        ours = logits(model, ids)[0, len(PROMPT) - 1:]
    hashes = [sha256(row) for row in ours]
    for step, (got, want) in enumerate(zip(hashes, native)):
        print(f"{name} step {step}: ree.reproducible {got[:16]} runtime {want[:16]}")
    assert hashes == native, f"{name}: logits differ from REE's runtime"
    assert int(ours[-1].argmax()) == produced[-1]


def test_engine_logprobs_are_transformers_log_softmax(tmp_path):
    """ree.Engine's logprobs (REE's fp32 log_softmax of each step's logits row) against torch's
    float64 log_softmax of transformers' own fp32 logits (within the logits' TOLERANCE, doubled:
    a log-probability is a logit less the log-sum-exp) and of the runtime's own rows (the same
    logits bits: within 4 fp32 ulps), for a greedy and a sampled run; the top alternatives are
    the largest, largest first."""
    model = model_for("llama3")
    directory = tmp_path / "llama3"
    model.save_pretrained(directory, safe_serialization=True)
    engine = ree.Engine(str(directory), operation_set="reproducible", device="cpu")
    for sampling in (dict(), dict(temperature=0.9, top_k=20, seed=5)):
        out = engine.generate([PROMPT], max_new_tokens=STEPS, logprobs=5, **sampling)
        completion = out.completions[0]
        assert len(completion.logprobs) == len(completion.ids) == STEPS
        ids = torch.tensor([PROMPT + completion.ids[:-1]])
        reference = logits(model, ids)[0, len(PROMPT) - 1:].double()
        with ree.reproducible(model):
            runtime_rows = logits(model, ids)[0, len(PROMPT) - 1:]
        assert [sha256(row) for row in runtime_rows] == completion.step_logits_sha256
        want = torch.log_softmax(reference, dim=-1)
        exact = torch.log_softmax(runtime_rows.double(), dim=-1)
        bound = 2 * TOLERANCE * reference.abs().max().item()
        for step, (token, got) in enumerate(zip(completion.ids, completion.logprobs)):
            assert abs(got.logprob - want[step, token].item()) <= bound, (step, got.logprob)
            assert abs(got.logprob - exact[step, token].item()) <= \
                4 * 2**-24 * max(1.0, abs(got.logprob)), (step, got.logprob)
            assert len(got.top) == 5
            values = [value for _, value in got.top]
            assert values == sorted(values, reverse=True)
            assert got.top[0][0] == int(runtime_rows[step].argmax())
            assert {t for t, _ in got.top} == set(exact[step].topk(5).indices.tolist())
            for alternative, value in got.top:
                assert abs(value - exact[step, alternative].item()) <= \
                    4 * 2**-24 * max(1.0, abs(value))
        if not sampling:
            assert all(got.logprob == got.top[0][1] for got in completion.logprobs)
    plain = engine.generate([PROMPT], max_new_tokens=2)
    assert plain.completions[0].logprobs is None
    assert [len(s.top) for s in engine.generate([PROMPT], max_new_tokens=2,
                                                logprobs=0).completions[0].logprobs] == [0, 0]
    for bad in (21, -1, True, 2.0):
        with pytest.raises(ValueError, match="logprobs must be None or an integer in"):
            engine.generate([PROMPT], max_new_tokens=1, logprobs=bad)


@pytest.mark.parametrize("name", NAMES)
def test_same_bits_as_ree_runtime(name, tmp_path):
    assert_same_bits_as_ree_runtime(name, model_for(name), tmp_path / name)


def test_rope_inverse_frequencies_are_ree_s(tmp_path):
    """Qwen3 with Qwen's real head_dim 128 and rope_theta 1e6: torch's pow gives one of the 64
    inverse frequencies an ulp away from the correctly rounded one that REE's runtime uses, which
    changes the logits; ree.reproducible swaps them in, and the bits are the runtime's again."""
    model = build("qwen3", head_dim=128)
    exact = ree.ops.rope_inv_freq(128, 1e6)
    assert int((model.model.rotary_emb.inv_freq != exact).sum()) >= 1
    assert_same_bits_as_ree_runtime("qwen3", model, tmp_path / "qwen3_head_dim_128")


cuda = pytest.mark.skipif(not (torch.cuda.is_available() and ree._C.has_cuda),
                          reason="needs a CUDA GPU and the package built with CUDA kernels")


@cuda
@pytest.mark.parametrize("name", NAMES)
def test_cuda_same_bits_as_cpu(name):
    model = model_for(name)
    rows = [r.tolist() for r in token_rows(3, 41, seed=90, vocab=model.config.vocab_size)]
    rows[1] = rows[1][:19]  # a padded row too
    ids, mask, positions = padded(rows, "right")
    with ree.reproducible(model):
        cpu = logits(model, ids, attention_mask=mask, position_ids=positions)
    gpu_model = copy.deepcopy(model).to("cuda:0")
    with ree.reproducible(gpu_model):
        gpu = logits(gpu_model, ids.cuda(), attention_mask=mask.cuda(),
                     position_ids=positions.cuda())
    print(f"{name}: logits SHA-256 CPU {sha256(cpu)} CUDA {sha256(gpu)} "
          f"({torch.cuda.get_device_name(0)})")
    assert_bits_equal(gpu.cpu(), cpu, f"{name}: CUDA vs CPU")
