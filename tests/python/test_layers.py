"""The hub layer through the `kernels` library (PyPI): a local layer repository built
by dattn.hub, replace_kernel_forward_from_hub + kernelize, inference and training."""

import inspect

import pytest
import torch

kernels = pytest.importorskip("kernels")

from kernels import Mode, kernelize, replace_kernel_forward_from_hub, use_kernel_mapping  # noqa: E402
from transformers import DebertaV2ForSequenceClassification  # noqa: E402
from transformers.models.deberta_v2 import modeling_deberta_v2 as mdv2  # noqa: E402

import dattn  # noqa: E402
from dattn import hf, hub, layers, testing  # noqa: E402
from conftest import DEVICES, gradients_checkable  # noqa: E402


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    path = hub.build_repository(tmp_path_factory.mktemp("dattn-hub"))
    replace_kernel_forward_from_hub(mdv2.DebertaV2Encoder, "DebertaV2Encoder")
    yield path
    for attr in ("kernel_layer_name", "kernel_condition"):
        if attr in mdv2.DebertaV2Encoder.__dict__:
            delattr(mdv2.DebertaV2Encoder, attr)


def test_layer_contract():
    cls = layers.DebertaV2Encoder
    assert issubclass(cls, torch.nn.Module) and cls.__init__ is torch.nn.Module.__init__
    extra = {n for n, _ in inspect.getmembers(cls)} - {n for n, _ in inspect.getmembers(torch.nn.Module)}
    assert extra == {"has_backward", "can_torch_compile"}
    mine = inspect.signature(cls.forward).parameters.values()
    ref = inspect.signature(mdv2.DebertaV2Encoder.forward).parameters.values()
    assert [(p.name, p.kind, p.default) for p in mine] == [(p.name, p.kind, p.default) for p in ref]


def test_repository_layout(repo):
    from kernels._rust import Metadata

    for backend in ("cpu", "cuda"):
        var = repo / "build" / f"torch-{backend}"
        meta = Metadata.read_from_file(var / "metadata.json")
        assert meta.name.python_name == "dattn"
        assert (var / "__init__.py").is_file() and (var / "layers.py").is_file()


def test_mapping_only_where_validated(monkeypatch, repo):
    monkeypatch.setattr(hub, "VALIDATED_CUDA_CAPABILITIES", ())
    m = hub.kernel_mapping(repo)["DebertaV2Encoder"]
    assert set(m) == {"cpu"}, "no CUDA entry unless the GPU runner has validated one"
    monkeypatch.setattr(hub, "VALIDATED_CUDA_CAPABILITIES", ((80, 90),))
    m = hub.kernel_mapping(repo)["DebertaV2Encoder"]
    cuda = [d for d in m if not isinstance(d, str)]
    assert len(cuda) == 1 and cuda[0].type == "cuda"
    assert (cuda[0].properties.min_capability, cuda[0].properties.max_capability) == (80, 90)


def _model(kind="v2xl"):
    cfg = testing.config(kind)
    cfg.num_labels = 3
    return DebertaV2ForSequenceClassification(cfg)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("mode", ["inference", "training"])
def test_kernelize(repo, device, mode, monkeypatch, seed):
    m = _model().to(device)
    training = mode == "training"
    m.train(training)
    B, L = 3, 26
    ids = torch.randint(1, m.config.vocab_size, (B, L), device=device)
    mask = testing.lengths_mask([L, 19, 4], L, device=device)
    labels = torch.randint(0, 3, (B,), device=device)

    def step():
        m.zero_grad(set_to_none=True)
        with torch.set_grad_enabled(training):
            out = m(ids, attention_mask=mask, labels=labels)
        if training:
            out.loss.backward()
        grads = {n: p.grad.clone() for n, p in m.named_parameters() if p.grad is not None}
        return out.logits.detach(), grads

    ref, gref = step()
    with use_kernel_mapping(hub.kernel_mapping(repo)):
        kernelize(m, mode=Mode.TRAINING if training else Mode.INFERENCE, device=device)
    fwd = m.deberta.encoder.forward
    assert fwd.__func__ is layers.DebertaV2Encoder.forward  # re-exported by the variant
    out, g = step()
    if training and not gradients_checkable(device):
        # no backward on this device yet: the layer itself falls back to transformers
        assert hf.last_path.startswith("fallback")
    else:
        assert hf.last_path in ("padded", "packed")
    assert (out - ref).abs().max().item() <= 1e-5
    top = max(v.abs().max().item() for v in gref.values()) if gref else 0
    for n in gref:
        scale = max(gref[n].abs().max().item(), 1e-3 * top)
        assert (g[n] - gref[n]).abs().max().item() <= 1e-4 * scale, n
    # kernelize for a device the mapping does not list: transformers' forward again
    monkeypatch.setattr(hub, "VALIDATED_CUDA_CAPABILITIES", ())
    with use_kernel_mapping(hub.kernel_mapping(repo)):
        kernelize(m, mode=Mode.INFERENCE, device="cuda")
    assert m.deberta.encoder.forward.__func__ is mdv2.DebertaV2Encoder.forward


def test_hub_layer_falls_back(repo, seed):
    m = _model("v3").eval()
    with use_kernel_mapping(hub.kernel_mapping(repo)):
        kernelize(m, mode=Mode.INFERENCE, device="cpu")
    ids = torch.randint(1, m.config.vocab_size, (2, 10))
    mask = testing.lengths_mask([10, 6], 10)
    with torch.no_grad():
        out = m(ids, attention_mask=mask, output_attentions=True)
    assert hf.last_path.startswith("fallback") and "output_attentions" in hf.last_path
    assert out.attentions is not None and len(out.attentions) == m.config.num_hidden_layers


def test_kernelize_then_compile(repo, seed):
    m = _model("v3").eval()
    with use_kernel_mapping(hub.kernel_mapping(repo)):
        kernelize(m, mode=Mode.INFERENCE | Mode.TORCH_COMPILE, device="cpu")
    assert m.deberta.encoder.forward.__func__ is not mdv2.DebertaV2Encoder.forward
    ids = torch.randint(1, m.config.vocab_size, (2, 10))
    mask = testing.lengths_mask([10, 6], 10)
    with torch.no_grad():
        out = torch.compile(m, fullgraph=True, backend="aot_eager")(ids, attention_mask=mask).logits
        dattn.unpatch(m)
        del m.deberta.encoder.forward
        ref = m(ids, attention_mask=mask).logits
    assert (out - ref).abs().max().item() <= 1e-5
