"""The drop-in encoder: patched models equal unpatched transformers.

fp32: max abs difference <= 1e-5 on valid positions (every position in padded mode), all
parameter gradients within 1e-4 relative (per tensor, to its largest entry). fp16/bf16:
the SPEC rule (error vs a float64 run of transformers at most 2x transformers' own error
in that dtype, plus a rounding floor)."""

import logging
import shutil

import pytest
import torch
from torch import nn
from transformers import DebertaV2ForSequenceClassification, DebertaV2Model

import dattn
from dattn import hf, testing
from conftest import DEVICES, gradients_checkable

OUT_TOL = 1e-5
GRAD_TOL = 1e-4


def build(cls, cfg, device, dtype=torch.float32, num_labels=3):
    if cls is DebertaV2ForSequenceClassification:
        cfg.num_labels = num_labels
    m = cls(cfg).to(device=device, dtype=dtype)
    return m


def inputs(B, L, vocab, lengths, side, device):
    ids = torch.randint(1, vocab, (B, L), device=device)
    mask = testing.lengths_mask(lengths, L, side, device)
    return ids, mask


def run(model, ids, mask, train=False, labels=None, weight=None, valid_only=False, **kw):
    """Forward (+ backward when train): returns (outputs, {param name: grad})."""
    model.zero_grad(set_to_none=True)
    with torch.set_grad_enabled(train):
        out = model(ids, attention_mask=mask, labels=labels, **kw) if labels is not None \
            else model(ids, attention_mask=mask, **kw)
    grads = {}
    if train:
        if labels is not None:
            loss = out.loss
        else:
            h = out.last_hidden_state if hasattr(out, "last_hidden_state") else out[0]
            w = weight.to(h)
            if valid_only:
                w = w * mask[..., None].to(h)
            loss = (h * w).sum()
        loss.backward()
        grads = {n: p.grad.detach().clone() for n, p in model.named_parameters() if p.grad is not None}
    return out, grads


def assert_out_close(a, b, mask, padded_too, tol=OUT_TOL, what="output"):
    v = mask.bool()
    d = (a.float() - b.float()).abs()
    err = d[v].max().item() if v.any() else 0.0
    assert err <= tol, f"{what}: valid positions differ by {err:.3g}"
    if padded_too:
        err = d.max().item()
        assert err <= tol, f"{what}: padded positions differ by {err:.3g}"


def assert_grads_close(g, gr, tol=GRAD_TOL):
    """Per tensor: max |g - gr| <= tol * max |gr|. A gradient that is zero in exact
    arithmetic (e.g. the key bias when only c2p is on: it shifts a whole score row) is
    pure fp32 rounding noise in both runs; for those the scale is floored at 1e-3 of the
    largest gradient of the model (a floor of 1e-7 of it)."""
    assert g.keys() == gr.keys(), set(g) ^ set(gr)
    top = max(v.abs().max().item() for v in gr.values())
    for n in gr:
        scale = max(gr[n].abs().max().item(), 1e-3 * top)
        err = (g[n] - gr[n]).abs().max().item()
        assert err <= tol * scale, f"grad {n}: max diff {err:.3g} vs max {scale:.3g}"


def parity(model, ids, mask, mode, train=True, labels=None, check_hidden=True):
    padded_too = mode == "padded"
    if train and not gradients_checkable(ids.device):
        train = False  # forward parity only (the test is reported skipped for gradients)
    weight = torch.randn(*ids.shape, model.config.hidden_size, device=ids.device)
    kw = dict(labels=labels, weight=weight, valid_only=not padded_too)
    extra = {} if labels is not None else {"output_hidden_states": True}
    ref, gref = run(model, ids, mask, train=train, **kw, **extra)
    dattn.patch(model, mode=mode)
    try:
        out, g = run(model, ids, mask, train=train, **kw, **extra)
        path = hf.last_path
    finally:
        dattn.unpatch(model)
    if labels is not None:
        assert_out_close(out.logits, ref.logits, torch.ones_like(out.logits), True, what="logits")
    else:
        assert_out_close(out.last_hidden_state, ref.last_hidden_state, mask, padded_too)
        if check_hidden:
            assert len(out.hidden_states) == len(ref.hidden_states)
            for i, (a, b) in enumerate(zip(out.hidden_states, ref.hidden_states)):
                assert_out_close(a, b, mask, padded_too, what=f"hidden_states[{i}]")
    if train:
        assert_grads_close(g, gref)
    return path


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("kind", testing.KINDS)
@pytest.mark.parametrize("mode,side", [("padded", "right"), ("padded", "left"),
                                       ("packed", "right"), ("packed", "left")])
def test_model_parity(device, kind, mode, side, seed):
    cfg = testing.config(kind)
    m = build(DebertaV2Model, cfg, device).train()
    B, L = 3, 40
    ids, mask = inputs(B, L, cfg.vocab_size, [L, 23, 7], side, device)
    path = parity(m, ids, mask, mode)
    assert path == mode


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("kind", testing.KINDS)
@pytest.mark.parametrize("mode,side", [("padded", "right"), ("padded", "left"), ("packed", "right")])
def test_sequence_classification_parity(device, kind, mode, side, seed):
    # (packed + left padding is not here: the pooler reads position 0, a padded position
    # there, which packed mode leaves at zero by design)
    cfg = testing.config(kind)
    m = build(DebertaV2ForSequenceClassification, cfg, device).train()
    B, L = 3, 33
    ids, mask = inputs(B, L, cfg.vocab_size, [L, 30, 12], side, device)
    labels = torch.randint(0, 3, (B,), device=device)
    assert parity(m, ids, mask, mode, labels=labels) == mode


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("mode", ["padded", "packed", "auto"])
def test_batch_of_one(device, mode, seed):
    cfg = testing.config("v2xl")
    m = build(DebertaV2Model, cfg, device).train()
    ids, mask = inputs(1, 29, cfg.vocab_size, [29], "right", device)
    # no padding at all: every mode runs padded (packing would gain nothing)
    assert parity(m, ids, mask, mode) == "padded"
    ids, mask = inputs(1, 29, cfg.vocab_size, [17], "right", device)
    assert parity(m, ids, mask, mode) == ("padded" if mode == "padded" else "packed")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("mode", ["padded", "packed", "auto"])
def test_all_padding_rows(device, mode, seed):
    cfg = testing.config("v2xl")
    m = build(DebertaV2Model, cfg, device).train()
    ids, mask = inputs(3, 21, cfg.vocab_size, [21, 0, 9], "right", device)
    path = parity(m, ids, mask, mode)
    # auto never packs a batch with an empty row (its first position would be zero)
    assert path == ("packed" if mode == "packed" else "padded")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("mode", ["padded", "packed"])
def test_long_sequences(device, mode, seed):
    """L > 512 with deberta-v3's real position settings (256 buckets, max 512): the
    saturated log-bucket region is exercised."""
    cfg = testing.config("v3", hidden=32, heads=2, layers=1, buckets=256, max_position=512)
    m = build(DebertaV2Model, cfg, device).train()
    L = 600
    ids, mask = inputs(2, L, cfg.vocab_size, [L, 530], "right", device)
    assert parity(m, ids, mask, mode, check_hidden=False) == mode


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("kind", ["v3", "v2xl"])
@pytest.mark.parametrize("mode", ["padded", "packed"])
def test_low_precision_tolerance_rule(device, dtype, kind, mode, seed):
    cfg = testing.config(kind)
    m = build(DebertaV2Model, cfg, device).eval()
    ids, mask = inputs(3, 40, cfg.vocab_size, [40, 25, 9], "right", device)
    with torch.no_grad():
        m64 = build(DebertaV2Model, cfg, device, torch.float64)
        m64.load_state_dict(m.state_dict())
        m64.eval()
        ref64 = m64(ids, attention_mask=mask).last_hidden_state
        m.to(dtype)
        ref = m(ids, attention_mask=mask).last_hidden_state
        dattn.patch(m, mode=mode)
        out = m(ids, attention_mask=mask).last_hidden_state
        assert hf.last_path == mode
    v = mask.bool()
    e_hf = (ref.double() - ref64)[v].abs().max().item()
    e_d = (out.double() - ref64)[v].abs().max().item()
    floor = torch.finfo(dtype).eps * ref64[v].abs().max().item()
    assert e_d <= 2 * e_hf + floor, f"dattn error {e_d:.3g}, transformers' {e_hf:.3g}"


@pytest.mark.parametrize("device", DEVICES)
def test_torch_compile_fullgraph(device, seed):
    cfg = testing.config("v2xl")
    m = build(DebertaV2Model, cfg, device).train()
    ids, mask = inputs(3, 24, cfg.vocab_size, [24, 17, 5], "right", device)
    weight = torch.randn(3, 24, cfg.hidden_size, device=device)
    train = gradients_checkable(device)
    ref, gref = run(m, ids, mask, train=train, weight=weight)
    dattn.patch(m)
    try:
        cm = torch.compile(m, fullgraph=True, backend="aot_eager")
        out, g = run(cm, ids, mask, train=train, weight=weight)
        cm.eval()
        with torch.no_grad():
            out_eval = cm(ids, attention_mask=mask).last_hidden_state
    finally:
        dattn.unpatch(m)
    m.eval()
    with torch.no_grad():
        ref_eval = m(ids, attention_mask=mask).last_hidden_state
    assert_out_close(out.last_hidden_state, ref.last_hidden_state, mask, True)
    assert_out_close(out_eval, ref_eval, mask, True)
    if train:
        assert_grads_close({k.replace("_orig_mod.", ""): v for k, v in g.items()}, gref)


def test_torch_compile_inductor(seed):
    """The default backend (inductor) too, once, inference."""
    cfg = testing.config("v3", layers=1)
    m = build(DebertaV2Model, cfg, "cpu").eval()
    ids, mask = inputs(2, 16, cfg.vocab_size, [16, 9], "right", "cpu")
    with torch.no_grad():
        ref = m(ids, attention_mask=mask).last_hidden_state
        dattn.patch(m)
        out = torch.compile(m, fullgraph=True)(ids, attention_mask=mask).last_hidden_state
    assert_out_close(out, ref, mask, True)


@pytest.mark.skipif(not any(shutil.which(c) for c in ("g++", "c++", "clang++")),
                    reason="inductor's CPU backend needs a C++ compiler")
def test_torch_compile_inductor_training_step(seed, monkeypatch):
    """A torch.compile'd (inductor) training step of a patched encoder equals the eager
    patched step (loss and every parameter gradient, fp32, dropout 0), and dattn's ops ran
    inside the compiled code: dattn::fwd is a node of the one graph dynamo handed to
    inductor, once per layer (fullgraph: no eager fallback, no transformers attention in
    between), and the library's fwd / bwd entry points were called once per layer per step
    (bwd from the compiled backward), while the eager encoder path never ran."""
    from torch._dynamo.testing import CompileCounterWithBackend

    from dattn import _lib

    cfg = testing.config("v3", layers=2)
    enc = DebertaV2Model(cfg).encoder.train()
    x = torch.randn(2, 16, cfg.hidden_size)
    mask = testing.lengths_mask([16, 11], 16)
    w = torch.randn(2, 16, cfg.hidden_size)
    params = dict(enc.named_parameters())

    def step(m):
        for p in params.values():
            p.grad = None
        out = m(x, mask, output_hidden_states=False, return_dict=True).last_hidden_state
        loss = (out - w).pow(2).mean()  # positive: no cancellation to blur a relative check
        loss.backward()
        return loss.detach(), {n: p.grad.clone() for n, p in params.items() if p.grad is not None}

    calls = {"fwd": 0, "bwd": 0}

    def counted(name, fn):
        def call(p):
            calls[name] += 1
            return fn(p)
        return call

    dattn.patch(enc, mode="padded")  # what the compiled encoder runs (no host sync)
    try:
        ref_loss, ref_grads = step(enc)
        assert hf.last_path == "padded"
        monkeypatch.setattr(_lib, "fwd", counted("fwd", _lib.fwd))
        monkeypatch.setattr(_lib, "bwd", counted("bwd", _lib.bwd))
        torch._dynamo.reset()
        backend = CompileCounterWithBackend("inductor")
        # scalar C++ kernels: this test checks the integration, not vectorisation, and a
        # cold compile of the vectorised kernels costs this 2-core machine ~2x longer
        with torch._inductor.config.patch({"cpp.vec_isa_ok": False, "compile_threads": 1}):
            cm = torch.compile(enc, backend=backend, fullgraph=True)
            hf.last_path = None
            losses, grads = [], []
            for _ in range(2):  # the second step replays the compiled code
                loss, g = step(cm)
                losses.append(loss)
                grads.append(g)
    finally:
        dattn.unpatch(enc)
        torch._dynamo.reset()
    assert backend.frame_count == 1  # one graph, no recompile on the second step
    targets = [n.target for gm in backend.graphs for n in gm.graph.nodes if n.op == "call_function"]
    n_fwd = sum(t in (torch.ops.dattn.fwd, torch.ops.dattn.fwd.default) for t in targets)
    assert n_fwd == cfg.num_hidden_layers, sorted(map(str, targets))
    assert calls == {"fwd": 2 * cfg.num_hidden_layers, "bwd": 2 * cfg.num_hidden_layers}
    assert hf.last_path is None  # the eager encoder path never ran
    for loss, g in zip(losses, grads):
        assert (loss - ref_loss).abs().item() <= 1e-5 * ref_loss.item()
        assert g.keys() == ref_grads.keys()
        for n, r in ref_grads.items():
            err = (g[n] - r).abs().max().item()
            assert err <= 1e-5 * r.abs().max().item() + 1e-7, f"{n}: {err:.3g}"


def test_state_dict_untouched(seed):
    cfg = testing.config("v2xl")
    m = DebertaV2ForSequenceClassification(cfg)
    before = m.state_dict()
    ptrs = {k: v.data_ptr() for k, v in before.items()}
    dattn.patch(m)
    during = m.state_dict()
    assert list(during) == list(before)
    for k in before:
        assert during[k].data_ptr() == ptrs[k] and torch.equal(during[k], before[k]), k
    assert hf.is_patched(m.deberta.encoder)
    dattn.unpatch(m)
    assert not hf.is_patched(m.deberta.encoder)
    assert "forward" not in m.deberta.encoder.__dict__
    after = m.state_dict()
    assert list(after) == list(before)
    for k in before:
        assert after[k].data_ptr() == ptrs[k] and torch.equal(after[k], before[k]), k
    # a checkpoint saved while patched loads into a plain model
    plain = DebertaV2ForSequenceClassification(cfg)
    plain.load_state_dict(during)


def test_backbone_inside_another_model(seed):
    cfg = testing.config("v3")

    class TwoTowers(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = DebertaV2Model(cfg)
            self.b = DebertaV2Model(cfg)
            self.head = nn.Linear(2 * cfg.hidden_size, 1)

        def forward(self, ids, mask):
            x = self.a(ids, attention_mask=mask).last_hidden_state[:, 0]
            y = self.b(ids, attention_mask=mask).last_hidden_state[:, 0]
            return self.head(torch.cat([x, y], -1))

    m = TwoTowers().eval()
    ids, mask = inputs(2, 20, cfg.vocab_size, [20, 11], "right", "cpu")
    ref = m(ids, mask)
    dattn.patch(m)
    assert hf.is_patched(m.a.encoder) and hf.is_patched(m.b.encoder)
    out = m(ids, mask)
    assert (out - ref).abs().max().item() <= OUT_TOL
    with pytest.raises(ValueError):
        dattn.patch(nn.Linear(2, 2))


@pytest.mark.parametrize("mode", ["padded", "packed"])
def test_encoder_outputs_tuple_and_dict(mode, seed):
    cfg = testing.config("v3")
    m = DebertaV2Model(cfg).eval()
    enc = m.encoder
    B, L = 2, 15
    h = torch.randn(B, L, cfg.hidden_size)
    mask = testing.lengths_mask([L, 8], L)
    h = h * mask[..., None]
    for ohs in (True, False):
        ref_t = enc(h, mask, output_hidden_states=ohs, return_dict=False)
        ref_d = enc(h, mask, output_hidden_states=ohs, return_dict=True)
        dattn.patch(m, mode=mode)
        out_t = enc(h, mask, output_hidden_states=ohs, return_dict=False)
        out_d = enc(h, mask, output_hidden_states=ohs, return_dict=True)
        dattn.unpatch(m)
        assert isinstance(out_t, tuple) and len(out_t) == len(ref_t) == (2 if ohs else 1)
        assert type(out_d) is type(ref_d)
        assert out_d.attentions is None and (out_d.hidden_states is None) == (not ohs)
        assert_out_close(out_t[0], ref_t[0], mask, mode == "padded")
        if ohs:
            assert out_t[1][0] is h  # the input, as transformers returns it
            for a, b in zip(out_d.hidden_states, ref_d.hidden_states):
                assert_out_close(a, b, mask, mode == "padded")


def test_auto_mode_choices(seed):
    cfg = testing.config("v3")
    m = DebertaV2Model(cfg).eval()
    dattn.patch(m)
    L = 12
    cases = {
        "full": (testing.lengths_mask([L, L], L), "padded"),
        "right": (testing.lengths_mask([L, 5], L), "packed"),
        "left": (testing.lengths_mask([L, 5], L, "left"), "padded"),
        "empty row": (testing.lengths_mask([L, 0], L), "padded"),
    }
    holes = torch.ones(2, L, dtype=torch.long)
    holes[1, 3:6] = 0
    cases["holes"] = (holes, "padded")
    ids = torch.randint(1, cfg.vocab_size, (2, L))
    for name, (mask, want) in cases.items():
        with torch.no_grad():
            m(ids, attention_mask=mask)
        assert hf.last_path == want, name
    dattn.patch(m, mode="packed")
    with torch.no_grad():
        ref_mask = holes
        m(ids, attention_mask=ref_mask)
    assert hf.last_path == "padded"  # holes: packing would not be exact


def test_one_layer_walk_per_encoder_call(seed, monkeypatch):
    """The fallback check and the packing decision share one walk over the layers
    (_probe_keys) per encoder call."""
    walks = []
    real = hf._probe_keys
    monkeypatch.setattr(hf, "_probe_keys", lambda *a: walks.append(1) or real(*a))
    cfg = testing.config("v3")
    m = DebertaV2Model(cfg)
    dattn.patch(m)
    ids = torch.randint(1, cfg.vocab_size, (2, 12))
    m(ids, attention_mask=testing.lengths_mask([12, 5], 12)).last_hidden_state.sum().backward()
    assert hf.last_path == "packed" and len(walks) == 1, (hf.last_path, walks)


def test_full_rows_run_without_a_mask(seed, monkeypatch):
    """When the packing decision sees every row full (auto / packed modes), the layers call
    the op without a mask (the kernels' unmasked paths: no key-range / mean-of-V prologue,
    no mask reads); with one padded row, or in padded mode (no decision, no host read), the
    mask is passed. Outputs and gradients equal transformers' either way."""
    from dattn import ops

    seen = []
    real = ops._fwd_impl  # every forward body (eager paths, the op, the fused layer node)

    def spy(*a, **kw):
        seen.append(a[5])  # (q, k, v, pk, pq, mask, ...)
        return real(*a, **kw)

    monkeypatch.setattr(ops, "_fwd_impl", spy)
    cfg = testing.config("v3")
    L = 12
    m = DebertaV2Model(cfg)
    ids = torch.randint(1, cfg.vocab_size, (2, L))
    full = testing.lengths_mask([L, L], L)
    for mode, mask, masked in (("auto", full, False), ("packed", full, False),
                               ("padded", full, True), ("auto", testing.lengths_mask([L, 5], L, "left"), True)):
        seen.clear()
        path = parity(m, ids, mask, mode)  # outputs and gradients vs transformers
        assert path == "padded", (mode, path)
        assert len(seen) == cfg.num_hidden_layers, (mode, len(seen))
        assert all((x is not None) == masked for x in seen), (mode, [x is None for x in seen])


def test_mask_with_holes_parity(seed):
    cfg = testing.config("v2xl")
    m = DebertaV2Model(cfg).train()
    ids = torch.randint(1, cfg.vocab_size, (2, 18))
    mask = torch.ones(2, 18, dtype=torch.long)
    mask[0, 4:7] = 0
    mask[1, ::4] = 0
    for mode in ("auto", "packed", "padded"):
        assert parity(m, ids, mask, mode) == "padded"


def test_three_d_outer_product_mask_uses_dattn(seed):
    cfg = testing.config("v3")
    m = DebertaV2Model(cfg).eval()
    enc = m.encoder
    B, L = 2, 14
    h = torch.randn(B, L, cfg.hidden_size)
    m2 = testing.lengths_mask([L, 6], L)
    m3 = m2[:, :, None] * m2[:, None, :]
    ref = enc(h, m3).last_hidden_state
    dattn.patch(m)
    out = enc(h, m3).last_hidden_state
    assert hf.last_path == "padded"
    assert_out_close(out, ref, m2, True)
    out4 = enc(h, m3[:, None]).last_hidden_state
    assert hf.last_path == "padded"
    ref4 = type(enc).forward(enc, h, m3[:, None]).last_hidden_state
    assert_out_close(out4, ref4, m2, True)


def test_gradient_checkpointing(seed):
    cfg = testing.config("v2xl")
    m = DebertaV2Model(cfg).train()
    m.gradient_checkpointing_enable()
    ids, mask = inputs(2, 20, cfg.vocab_size, [20, 13], "right", "cpu")
    for mode in ("padded", "packed"):
        assert parity(m, ids, mask, mode) == mode


def test_hidden_dropout_training_equals_transformers(seed):
    """Training with hidden dropout (and attention dropout 0): the same modules consume
    torch's generator in the same order, so padded mode equals transformers."""
    cfg = testing.config("v2xl", dropout=0.1, attention_dropout=0.0)
    m = DebertaV2Model(cfg).train()
    ids, mask = inputs(2, 20, cfg.vocab_size, [20, 13], "right", "cpu")
    torch.manual_seed(seed)
    ref = m(ids, attention_mask=mask).last_hidden_state
    dattn.patch(m, mode="padded")
    torch.manual_seed(seed)
    out = m(ids, attention_mask=mask).last_hidden_state
    assert hf.last_path == "padded"
    assert_out_close(out, ref, mask, True)


def test_attention_dropout_on_cpu(seed):
    """Attention dropout in training runs in dattn on the CPU: reproducible under
    torch.manual_seed, different from eval, gradients flow."""
    cfg = testing.config("v3", attention_dropout=0.2)
    m = DebertaV2Model(cfg).train()
    ids, mask = inputs(2, 20, cfg.vocab_size, [20, 13], "right", "cpu")
    dattn.patch(m, mode="padded")
    torch.manual_seed(seed)
    a = m(ids, attention_mask=mask).last_hidden_state
    assert hf.last_path == "padded"
    torch.manual_seed(seed)
    b = m(ids, attention_mask=mask).last_hidden_state
    c = m(ids, attention_mask=mask).last_hidden_state
    assert torch.equal(a, b) and not torch.equal(b, c)
    m.eval()
    with torch.no_grad():
        e = m(ids, attention_mask=mask).last_hidden_state
    assert not torch.allclose(a, e)
    a.sum().backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in m.encoder.parameters())


# ---- fallbacks ----------------------------------------------------------------------


def _fallback_case(model, call, caplog, expect):
    """call() on the plain and the patched model: bitwise equal, one log line naming
    the reason, and the path recorded as a fallback."""
    torch.manual_seed(1)
    ref = call()
    dattn.patch(model)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="dattn"):
        torch.manual_seed(1)
        out = call()
        torch.manual_seed(1)
        call()  # a second call logs nothing more
    dattn.unpatch(model)
    lines = [r.getMessage() for r in caplog.records if r.name == "dattn"]
    assert len(lines) == 1 and expect in lines[0], lines
    assert hf.last_path.startswith("fallback") and expect in hf.last_path
    ref = ref if isinstance(ref, (tuple, list)) else (ref,)
    out = out if isinstance(out, (tuple, list)) else (out,)
    for a, b in zip(ref, out):
        if isinstance(a, torch.Tensor):
            assert torch.equal(a, b)
        elif isinstance(a, tuple):
            for x, y in zip(a, b):
                assert torch.equal(x, y)


def _small(kind="v3", **kw):
    cfg = testing.config(kind, **kw)
    m = DebertaV2Model(cfg).eval()
    B, L = 2, 12
    ids, mask = inputs(B, L, cfg.vocab_size, [L, 7], "right", "cpu")
    return cfg, m, ids, mask


def test_fallback_output_attentions(caplog, seed):
    cfg, m, ids, mask = _small()
    _fallback_case(m, lambda: m(ids, attention_mask=mask, output_attentions=True).attentions,
                   caplog, "output_attentions")


def test_fallback_query_states(caplog, seed):
    cfg, m, ids, mask = _small()
    h = torch.randn(2, 12, cfg.hidden_size)
    qs = torch.randn(2, 12, cfg.hidden_size)
    _fallback_case(m, lambda: m.encoder(h, mask, query_states=qs).last_hidden_state, caplog,
                   "query_states")


def test_fallback_custom_relative_pos(caplog, seed):
    cfg, m, ids, mask = _small()
    h = torch.randn(2, 12, cfg.hidden_size)
    rp = m.encoder.get_rel_pos(h)
    _fallback_case(m, lambda: m.encoder(h, mask, relative_pos=rp).last_hidden_state, caplog,
                   "relative_pos")


def test_fallback_non_outer_product_mask(caplog, seed):
    cfg, m, ids, mask = _small()
    h = torch.randn(2, 12, cfg.hidden_size)
    m3 = torch.tril(torch.ones(2, 12, 12, dtype=torch.long))  # causal: no padding mask
    _fallback_case(m, lambda: m.encoder(h, m3).last_hidden_state, caplog, "outer product")


def test_fallback_unsupported_dtype(caplog, seed):
    cfg, m, ids, mask = _small()
    m.double()
    _fallback_case(m, lambda: m(ids, attention_mask=mask).last_hidden_state, caplog,
                   "torch.float64")


def test_fallback_unsupported_head_dim(caplog, seed):
    # head_dim 272 > 256: the CPU backend reports UNSUPPORTED
    cfg, m, ids, mask = _small(hidden=272, heads=1, layers=1)
    _fallback_case(m, lambda: m(ids, attention_mask=mask).last_hidden_state, caplog, "head_dim")


def test_fallback_attention_dropout_without_backend_dropout(caplog, monkeypatch, seed):
    cfg, m, ids, mask = _small(attention_dropout=0.1)
    m.train()
    monkeypatch.setattr(hf, "DROPOUT_DEVICES", frozenset())
    _fallback_case(m, lambda: m(ids, attention_mask=mask).last_hidden_state, caplog,
                   "attention dropout")


def test_fallback_when_library_says_unsupported_at_run_time(caplog, monkeypatch, seed):
    cfg, m, ids, mask = _small()
    from dattn import _lib

    def refuse(p):
        raise _lib.DattnUnsupported(_lib.UNSUPPORTED, "simulated refusal", "fwd")

    monkeypatch.setattr(_lib, "fwd", refuse)
    _fallback_case(m, lambda: m(ids, attention_mask=mask).last_hidden_state, caplog,
                   "simulated refusal")


def _cuda_state():
    from dattn import _lib

    if not torch.cuda.is_available():
        return "none"
    return "supported" if _lib.device_supported(_lib.DEVICE_CUDA, -1)[0] else "unsupported"


@pytest.mark.skipif(_cuda_state() != "unsupported", reason="needs a GPU that libdattn does not support")
def test_fallback_unsupported_device(caplog, seed):
    cfg, m, ids, mask = _small()
    m.cuda()
    ids, mask = ids.cuda(), mask.cuda()
    _fallback_case(m, lambda: m(ids, attention_mask=mask).last_hidden_state, caplog,
                   "cannot run on cuda")


@pytest.mark.skipif(_cuda_state() != "supported", reason="needs a GPU that libdattn supports")
@pytest.mark.parametrize("kind", ["v3", "v2xl"])
@pytest.mark.parametrize("grad_mode", ["no_grad", "inference_mode"])
def test_cuda_graphs_packed_inference(kind, grad_mode, seed):
    """patch(cuda_graphs=True): packed inference batches replay captured graphs; outputs
    equal transformers on valid positions, are zero on padded ones, and never alias the
    graphs' buffers (an earlier result survives later calls)."""
    cfg = testing.config(kind, layers=3)
    m = build(DebertaV2Model, cfg, "cuda").eval()
    L = 40
    batches = [[40, 17, 5], [33, 30, 12], [40, 40, 39], [3, 2, 1]]  # T: 62, 75, 119, 6
    ctx = torch.no_grad if grad_mode == "no_grad" else torch.inference_mode
    data = [inputs(3, L, cfg.vocab_size, lens, "right", "cuda") for lens in batches]
    with ctx():
        refs = [m(ids, attention_mask=mask, output_hidden_states=True) for ids, mask in data]
    dattn.patch(m, mode="packed", cuda_graphs=True)
    try:
        kept = None
        for rep in range(2):
            for (ids, mask), ref in zip(data, refs):
                with ctx():
                    out = m(ids, attention_mask=mask, output_hidden_states=True)
                assert hf.last_path == "packed"
                pad = ~mask.bool()
                for i, (a, b) in enumerate(zip(out.hidden_states, ref.hidden_states)):
                    assert_out_close(a, b, mask, False, what=f"hidden_states[{i}]")
                    if i > 0:
                        assert a[pad].abs().max().item() == 0 if pad.any() else True
                if kept is None:
                    kept = (out.last_hidden_state, out.last_hidden_state.clone())
        assert torch.equal(kept[0], kept[1]), "an earlier output was overwritten"
        enc = m.encoder
        # T 62 and 6 -> 64 tokens, 75 and 119 -> 128: two graph keys
        assert len(enc._dattn_graphs) == 2
    finally:
        dattn.unpatch(m)
    assert "_dattn_graphs" not in m.encoder.__dict__


def test_cuda_graphs_flag_is_inert_on_cpu(seed):
    """cuda_graphs=True on a CPU model: the packed path runs as usual."""
    cfg = testing.config("v3")
    m = build(DebertaV2Model, cfg, "cpu").eval()
    ids, mask = inputs(3, 24, cfg.vocab_size, [24, 10, 3], "right", "cpu")
    with torch.no_grad():
        ref = m(ids, attention_mask=mask).last_hidden_state
        dattn.patch(m, mode="packed", cuda_graphs=True)
        try:
            out = m(ids, attention_mask=mask).last_hidden_state
            assert hf.last_path == "packed"
            assert m.encoder._dattn_graphs == {}
        finally:
            dattn.unpatch(m)
    assert_out_close(out, ref, mask, False)
