"""ree.reproducible(model): a transformers Llama's logits have the same bits whatever the batch
composition, and ATen is itself again after the context."""

import pytest
import torch

import ree
from conftest import assert_bits_equal

transformers = pytest.importorskip("transformers")


def tiny_llama(seed=0):
    config = transformers.LlamaConfig(
        vocab_size=300, hidden_size=64, intermediate_size=160, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
        rms_norm_eps=1e-5, attn_implementation="sdpa")
    torch.manual_seed(seed)
    return transformers.LlamaForCausalLM(config).eval()


def logits(model, ids):
    with torch.no_grad():
        return model(input_ids=ids, use_cache=False).logits


def test_llama_logits_independent_of_batch_composition():
    model = tiny_llama()
    g = torch.Generator().manual_seed(1)
    a, b, c = (torch.randint(0, 300, (1, 150), generator=g) for _ in range(3))
    with ree.reproducible(model):
        alone = logits(model, a)
        in_pair = logits(model, torch.cat([b, a]))
        in_three = logits(model, torch.cat([a, c, b]))
        again = logits(model, a)
        prefix = logits(model, a[:, :70])  # causal: a prefix's logits are the full run's
    assert_bits_equal(in_pair[1:2], alone, "a after b")
    assert_bits_equal(in_three[0:1], alone, "a before c, b")
    assert_bits_equal(again, alone, "run to run")
    assert_bits_equal(prefix, alone[:, :70], "prefix")
    # Close to transformers' own result (the same model outside the context).
    reference = logits(model, a)
    assert (alone - reference).abs().max().item() < 1e-3
    # ... but computed by REE: ATen's own bits differ (and ATen's prefix run is not the full run's).
    assert not torch.equal(alone, reference)
    assert not torch.equal(logits(model, a[:, :70]), reference[:, :70])
    assert model.config._attn_implementation == "sdpa"


def test_context_restores_aten():
    x = torch.randn(3, 4, dtype=torch.float64)
    with ree.reproducible():
        with pytest.raises(TypeError, match="aten::mm on torch.float64"):
            torch.mm(x, x.t())
        y = torch.mm(x.float(), x.float().t())
    assert torch.equal(y, ree.ops.matmul(x.float(), x.float().t()))
    torch.mm(x, x.t())  # ATen's kernel again
