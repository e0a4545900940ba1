"""The lean projections (dattn/_proj.py): a layer's q / k / v and position projections in
one autograd node, used by hf.py in eager mode.

Pinned here: (1) the node alone against the nn.Linear calls it replaces, in float64
(forward bitwise, gradients to rounding) and under bf16 autocast (forward bitwise;
gradients by SPEC's rule: error against float64 at most 2x that of the module calls,
plus a rounding floor); (2) the patched encoder with the lean path against transformers'
unpatched one in fp32 on the CPU, every parameter's gradient (q / k / v / pos
projections, rel_embeddings, the LayerNorm of rel), for share_att_key on / off, c2p-only,
p2c-only, no relative attention, with and without gradient checkpointing; (3) lean
against the former formulation (DATTN_HF_LEAN=0) with dropout on (the same masks:
pos_dropout keeps its place); (4) hooks / wrappers turn the lean path off.
Fresh random inputs; the seed is printed (pytest header and each test's output)."""

import copy

import pytest
import torch
from torch import nn

from conftest import DEVICES
from dattn import _proj, hf, testing
from test_hf import GRAD_TOL, assert_grads_close
from test_host_path import _OpLog


def _att(kind, dtype=torch.float64, hidden=32, heads=2, buckets=8):
    from transformers.models.deberta_v2.modeling_deberta_v2 import DisentangledSelfAttention

    cfg = testing.config(kind, hidden=hidden, heads=heads, buckets=buckets, max_position=64)
    return DisentangledSelfAttention(cfg).to(dtype), cfg


def _bits(att):
    t = att.pos_att_type or []
    return "c2p" in t, "p2c" in t


def _module_calls(att, h, rel):
    """What hf.py computed before: the nn.Linear modules called one by one."""
    q, k, v = att.query_proj(h), att.key_proj(h), att.value_proj(h)
    c2p, p2c = _bits(att)
    pk = pq = None
    if att.relative_attention:
        if att.share_att_key:
            pk = att.key_proj(rel) if c2p else None
            pq = att.query_proj(rel) if p2c else None
        else:
            pk = att.pos_key_proj(rel) if c2p else None
            pq = att.pos_query_proj(rel) if p2c else None
    return [q.reshape(-1, q.shape[-1]), k.reshape(-1, k.shape[-1]),
            v.reshape(-1, v.shape[-1]), pk, pq]


def _lean(att, h, rel, ones_dtype):
    c2p, p2c = _bits(att)
    plan = _proj.plan_for(att, c2p, p2c, att.relative_attention)
    assert plan is not None and _proj.usable(plan, h, rel)
    rel_c = ones = None
    if rel is not None:
        c = _proj.compute_dtype(h)
        rel_c = rel.detach().to(c)
        ones = torch.ones(rel.shape[0], dtype=c, device=h.device)
    return list(_proj.project(plan, h, rel, rel_c, ones))


def _grads(att, fn, h, rel, gouts):
    """(outputs, {name: grad}) of sum <out_i, g_i> through fn."""
    for p in att.parameters():
        p.grad = None
    hh = h.detach().clone().requires_grad_(True)
    rr = rel.detach().clone().requires_grad_(True) if rel is not None else None
    outs = fn(att, hh, rr)
    loss = sum((o.double() * g).sum() for o, g in zip(outs, gouts) if o is not None)
    loss.backward()
    g = {n: p.grad.double() for n, p in att.named_parameters() if p.grad is not None}
    g["h"] = hh.grad.double()
    if rr is not None and rr.grad is not None:
        g["rel"] = rr.grad.double()
    return outs, g


KINDS = ("v3", "c2p", "p2c", "noshare", "norel")


def _inputs(att, cfg, seed, dtype, shape=(2, 7)):
    g = torch.Generator().manual_seed(seed)
    hid = cfg.hidden_size
    h = torch.randn(*shape, hid, generator=g, dtype=torch.float64).to(dtype)
    rel = None
    if att.relative_attention:
        rel = torch.randn(2 * att.pos_ebd_size, hid, generator=g, dtype=torch.float64).to(dtype)
    return h, rel, g


@pytest.mark.parametrize("kind", KINDS)
def test_node_equals_module_calls_float64(kind, seed):
    print(f"seed {seed}")
    torch.manual_seed(seed)
    att, cfg = _att(kind)
    h, rel, g = _inputs(att, cfg, seed, torch.float64)
    ref_out = _module_calls(att, h, rel)
    gouts = [torch.randn(o.shape, generator=g, dtype=torch.float64) if o is not None else None
             for o in ref_out]
    ref, gr = _grads(att, _module_calls, h, rel, gouts)
    out, go = _grads(att, lambda a, x, r: _lean(a, x, r, torch.float64), h, rel, gouts)
    for a, b in zip(out, ref):
        assert (a is None) == (b is None)
        if a is not None:
            assert torch.equal(a, b.reshape(a.shape)), "forward differs from the module calls"
    assert gr.keys() == go.keys(), set(gr) ^ set(go)
    for n in gr:
        scale = gr[n].abs().max().item()
        err = (go[n] - gr[n]).abs().max().item()
        assert err <= 1e-12 * max(scale, 1e-30), f"{n}: {err:.3g} vs max {scale:.3g}"


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("shape", [(2, 7), (1, 9), (3, 64)], ids=["padded", "packed", "big"])
def test_node_under_autocast_spec_rule(device, kind, shape, seed):
    """Autocast over fp32 weights (bf16 on the CPU, fp16 on a GPU): the forward is the
    module calls' bit for bit; every gradient's error against float64 is at most 2x the
    module calls' error (plus a floor of 2^-8 of the gradient's size)."""
    print(f"seed {seed}")
    torch.manual_seed(seed)
    amp = torch.bfloat16 if device == "cpu" else torch.float16
    att64, cfg = _att(kind)
    att = copy.deepcopy(att64).float().to(device)
    h64, rel64, g = _inputs(att64, cfg, seed, torch.float64, shape)
    ref_out = _module_calls(att64, h64, rel64)
    gouts = [torch.randn(o.shape, generator=g, dtype=torch.float64) if o is not None else None
             for o in ref_out]
    _, g64 = _grads(att64, _module_calls, h64, rel64, gouts)
    h = h64.float().to(device)
    rel = rel64.float().to(device) if rel64 is not None else None
    gouts = [x.to(device) if x is not None else None for x in gouts]
    with torch.autocast(device, dtype=amp):
        theirs_out, gt = _grads(att, _module_calls, h, rel, gouts)
        ours_out, go = _grads(att, lambda a, x, r: _lean(a, x, r, amp), h, rel, gouts)
    gt = {k: v.cpu() for k, v in gt.items()}
    go = {k: v.cpu() for k, v in go.items()}
    for a, b in zip(ours_out, theirs_out):
        if a is not None:
            assert a.dtype == amp and torch.equal(a, b.reshape(a.shape))
    assert g64.keys() == go.keys() == gt.keys()
    for n in g64:
        scale = g64[n].abs().max().item()
        e_ours = (go[n] - g64[n]).abs().max().item()
        e_theirs = (gt[n] - g64[n]).abs().max().item()
        assert e_ours <= 2 * e_theirs + 2 ** -8 * scale, \
            f"{n}: error {e_ours:.3g} vs the module calls' {e_theirs:.3g} (max {scale:.3g})"


def _count_nodes(monkeypatch):
    """Counts the forwards of the lean projection nodes (_Project, or _LayerAttention:
    the projections and the attention in one node)."""
    calls = []
    for cls in (_proj._Project, _proj._LayerAttention):
        orig = cls.forward

        def forward(*a, orig=orig):
            calls.append(1)
            return orig(*a)

        monkeypatch.setattr(cls, "forward", staticmethod(forward))
    return calls


@pytest.mark.parametrize("kind", ("v3", "c2p", "p2c", "noshare", "norel", "linear"))
@pytest.mark.parametrize("ckpt", [False, True], ids=["plain", "checkpointing"])
@pytest.mark.parametrize("mode", ["padded", "packed"])
def test_encoder_gradients_equal_transformers(kind, ckpt, mode, seed, monkeypatch):
    """Patched encoder (lean path) against transformers' own, fp32, dropout off: every
    parameter's gradient, rel_embeddings and its LayerNorm included."""
    from transformers import DebertaV2Model

    print(f"seed {seed}")
    torch.manual_seed(seed)
    cfg = testing.config(kind, layers=2)
    ref = DebertaV2Model(cfg).train()
    ours = copy.deepcopy(ref)
    if ckpt:
        ref.gradient_checkpointing_enable()
        ours.gradient_checkpointing_enable()
    hf.patch(ours, mode=mode)
    g = torch.Generator().manual_seed(seed)
    B, L = 3, 13
    ids = torch.randint(1, cfg.vocab_size, (B, L), generator=g)
    mask = testing.lengths_mask([L, 9, 5], L, "right")
    w = torch.randn(B, L, cfg.hidden_size, generator=g) * mask[..., None]
    calls = _count_nodes(monkeypatch)
    grads = []
    for m in (ref, ours):
        m.zero_grad(set_to_none=True)
        out = m(ids, attention_mask=mask).last_hidden_state
        (out * w).sum().backward()
        grads.append({n: p.grad.detach().clone() for n, p in m.named_parameters()
                      if p.grad is not None})
    assert hf.last_path == mode
    assert len(calls) >= cfg.num_hidden_layers, "the lean path did not run"
    gr, go = grads
    names = [n for n in gr if "attention.self" in n or "rel_embeddings" in n
             or n == "encoder.LayerNorm.weight"]
    if cfg.relative_attention:
        assert "encoder.rel_embeddings.weight" in gr
    assert any("query_proj.weight" in n for n in names)
    assert_grads_close(go, gr, GRAD_TOL)


def _training_step_inputs(device, seed, dropout=0.0):
    """A two-layer v3-shaped encoder in training mode, patched by dattn (seeded weights;
    hidden dropout as given), an input [2, 11, hidden], its full mask, a loss weight of
    the same shape, and the autocast dtype of the device."""
    from transformers.models.deberta_v2.modeling_deberta_v2 import DebertaV2Encoder

    torch.manual_seed(seed)
    cfg = testing.config("v3", layers=2, dropout=dropout)
    enc = DebertaV2Encoder(cfg).train().to(device)
    hf.patch(enc)
    x = torch.randn(2, 11, cfg.hidden_size, device=device)
    mask = torch.ones(2, 11, dtype=torch.long, device=device)
    w = torch.randn(2, 11, cfg.hidden_size, device=device)
    return enc, x, mask, w, torch.bfloat16 if device == "cpu" else torch.float16


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, "autocast"], ids=["fp32", "autocast"])
def test_lean_equals_former_path_with_dropout(device, dtype, seed):
    """Training with hidden dropout 0.1 (so pos_dropout draws a mask per layer) and
    attention dropout 0.1: lean and module-call formulations consume the generator the
    same way (same outputs, bit for bit) and give the same gradients to rounding."""
    print(f"seed {seed}")
    enc, x, mask, w, amp = _training_step_inputs(device, seed, dropout=0.1)
    res = []
    old = hf.LEAN_PROJECTIONS
    try:
        for lean in (True, False):
            hf.LEAN_PROJECTIONS = lean
            enc.zero_grad(set_to_none=True)
            torch.manual_seed(seed + 1)
            with torch.autocast(device, dtype=amp, enabled=dtype != torch.float32):
                out = enc(x, mask).last_hidden_state
            (out.float() * w).sum().backward()
            res.append((out.detach(), {n: p.grad.clone() for n, p in enc.named_parameters()}))
    finally:
        hf.LEAN_PROJECTIONS = old
    (a, ga), (b, gb) = res
    assert torch.equal(a, b)
    tol = GRAD_TOL if dtype == torch.float32 else 2e-2
    assert_grads_close(ga, gb, tol)


@pytest.mark.parametrize("device", DEVICES)
def test_backward_reads_attention_gradients_in_place(device, seed, monkeypatch):
    """In a patched training step the attention backward writes [dq | dk | dv] and
    [dpq | dpk] side by side (ops._fused_qkv / _fused_pos), and this node's backward reads
    them as its G and Gp matrices without stacking them: every layer, both matrices. The
    gradients are bitwise those of the stacked form (the same matrices, the same layout)."""
    from dattn import ops

    enc, x, mask, w, amp = _training_step_inputs(device, seed)
    layers = len(enc.layer)
    monkeypatch.setattr(hf, "FUSED_LAYER", False)  # two nodes: _Project's backward reads them
    real = _proj._side_by_side
    seen = []

    def spy(*a):
        seen.append(real(*a))
        return seen[-1]

    monkeypatch.setattr(_proj, "_side_by_side", spy)
    res = []
    for fused in (True, False):
        if not fused:
            monkeypatch.setattr(ops, "_fused_qkv", lambda *a: False)
            monkeypatch.setattr(ops, "_fused_pos", lambda *a: False)
        seen.clear()
        enc.zero_grad(set_to_none=True)
        with torch.autocast(device, dtype=amp):
            out = enc(x, mask).last_hidden_state
        (out.float() * w).sum().backward()
        res.append({n: p.grad.clone() for n, p in enc.named_parameters()})
        assert seen == [fused] * (2 * layers), (fused, seen)
    for n in res[0]:
        assert torch.equal(res[0][n], res[1][n]), n


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("kind", ("v3", "c2p", "noshare", "norel"))
@pytest.mark.parametrize("case", ["padded", "packed", "dropout", "checkpointing"])
def test_layer_node_equals_two_nodes(device, kind, case, seed, monkeypatch):
    """The fused layer node (_LayerAttention: projections and attention in one node, the
    attention's gradients written into G / Gp) against the two nodes it replaces
    (_Project, then ops' eager autograd path): the same outputs and every parameter's and
    the input's gradient, bit for bit, under autocast; with attention and hidden dropout
    (the same draws), packed, and with activation checkpointing (the saved tensors
    recomputed). The node runs once per layer forward in the fused form (norel: never, see
    hf._self_attention) and never in the other."""
    from transformers import DebertaV2Model

    print(f"seed {seed}")
    drop = 0.1 if case == "dropout" else 0.0
    torch.manual_seed(seed)
    cfg = testing.config(kind, layers=2, dropout=drop, attention_dropout=drop)
    m = DebertaV2Model(cfg).train().to(device)
    if case == "checkpointing":
        m.gradient_checkpointing_enable()
    hf.patch(m, mode="packed" if case == "packed" else "padded")
    g = torch.Generator().manual_seed(seed)
    B, L = 3, 13
    ids = torch.randint(1, cfg.vocab_size, (B, L), generator=g).to(device)
    mask = testing.lengths_mask([L, 9, 5], L, "right").to(device)
    w = torch.randn(B, L, cfg.hidden_size, generator=g).to(device) * mask[..., None]
    amp = torch.bfloat16 if device == "cpu" else torch.float16
    nodes = []
    orig = _proj._LayerAttention.forward
    monkeypatch.setattr(_proj._LayerAttention, "forward",
                        staticmethod(lambda *a: nodes.append(1) or orig(*a)))
    res = []
    for fused in (True, False):
        monkeypatch.setattr(hf, "FUSED_LAYER", fused)
        nodes.clear()
        m.zero_grad(set_to_none=True)
        torch.manual_seed(seed + 1)
        with torch.autocast(device, dtype=amp):
            out = m(ids, attention_mask=mask).last_hidden_state
        (out.float() * w).sum().backward()
        # (norel: no position terms but the scale counts pos_att_type: the two-node path;
        # checkpointing runs each layer's forward twice)
        want = cfg.num_hidden_layers * (2 if case == "checkpointing" else 1)
        assert len(nodes) == (want if fused and kind != "norel" else 0), (fused, len(nodes))
        res.append((out.detach(), {n: p.grad.clone() for n, p in m.named_parameters()
                                   if p.grad is not None}))
    (a, ga), (b, gb) = res
    assert torch.equal(a, b)
    assert ga.keys() == gb.keys()
    for n in ga:
        assert torch.equal(ga[n], gb[n]), n


@pytest.mark.parametrize("device", DEVICES)
def test_layer_node_backward_under_a_mode_takes_the_op(device, seed, monkeypatch):
    """A backward run under a dispatch mode (e.g. an op recorder) computes the attention
    gradients through the dattn::bwd op and stacks them: the same gradients, bitwise."""
    enc, x, mask, w, amp = _training_step_inputs(device, seed)
    nodes = []
    orig = _proj._LayerAttention.forward
    monkeypatch.setattr(_proj._LayerAttention, "forward",
                        staticmethod(lambda *a: nodes.append(1) or orig(*a)))
    res = []
    for mode in (None, _OpLog()):
        enc.zero_grad(set_to_none=True)
        nodes.clear()
        with torch.autocast(device, dtype=amp):
            out = enc(x, mask).last_hidden_state
        assert len(nodes) == len(enc.layer)  # (the forward ran without the mode)
        loss = (out.float() * w).sum()
        if mode is None:
            loss.backward()
        else:
            with mode:
                loss.backward()
            assert mode.names.count("dattn.bwd.default") == len(enc.layer), mode.names
        res.append({n: p.grad.clone() for n, p in enc.named_parameters()})
    for n in res[0]:
        assert torch.equal(res[0][n], res[1][n]), n


def _patched_v3_layer(seed):
    """A one-layer v3-shaped encoder in training mode, patched by dattn (seeded weights)."""
    from transformers.models.deberta_v2.modeling_deberta_v2 import DebertaV2Encoder

    torch.manual_seed(seed)
    cfg = testing.config("v3", layers=1)
    enc = DebertaV2Encoder(cfg).train()
    hf.patch(enc)
    return cfg, enc


def test_gradients_accumulate_over_two_backwards(seed):
    """Parameter gradients are views of one buffer: a second backward adds into them."""
    cfg, enc = _patched_v3_layer(seed)
    x = torch.randn(2, 9, cfg.hidden_size)
    mask = torch.ones(2, 9, dtype=torch.long)
    enc(x, mask).last_hidden_state.pow(3).sum().backward()
    once = {n: p.grad.clone() for n, p in enc.named_parameters()}
    enc(x, mask).last_hidden_state.pow(3).sum().backward()
    for n, p in enc.named_parameters():
        assert torch.allclose(p.grad, 2 * once[n], rtol=1e-5, atol=1e-6), n


def test_hooks_and_wrappers_turn_the_lean_path_off(seed, monkeypatch):
    """A forward hook on a projection (or a projection that is not a plain nn.Linear)
    must see its calls: the modules are then called one by one."""
    cfg, enc = _patched_v3_layer(seed)
    x = torch.randn(1, 6, cfg.hidden_size)
    mask = torch.ones(1, 6, dtype=torch.long)
    seen = []
    att = enc.layer[0].attention.self
    hnd = att.key_proj.register_forward_hook(lambda m, i, o: seen.append(i[0].shape))
    calls = _count_nodes(monkeypatch)
    enc(x, mask).last_hidden_state.sum().backward()
    hnd.remove()
    assert not calls and len(seen) == 2  # key_proj(h) and key_proj(rel)

    class Wrapped(nn.Linear):
        pass

    w = Wrapped(att.query_proj.in_features, att.query_proj.out_features)
    w.load_state_dict(att.query_proj.state_dict())
    att.query_proj = w
    enc(x, mask).last_hidden_state.sum().backward()
    assert not calls


def test_rel_cast_once_per_pass_when_dropout_is_identity(seed):
    """eval (pos_dropout the identity): every layer sees the same rel, cast once."""
    from torch.utils._python_dispatch import TorchDispatchMode
    from transformers.models.deberta_v2.modeling_deberta_v2 import DebertaV2Encoder

    torch.manual_seed(seed)
    cfg = testing.config("v3", layers=3)
    enc = DebertaV2Encoder(cfg).eval()
    hf.patch(enc)
    S2 = 2 * cfg.position_buckets

    class Casts(TorchDispatchMode):
        n = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if func.overloadpacket.__name__ == "_to_copy" and tuple(args[0].shape) == (
                    S2, cfg.hidden_size):
                Casts.n += 1
            return func(*args, **(kwargs or {}))

    x = torch.randn(1, 5, cfg.hidden_size)
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16), Casts():
        enc(x, torch.ones(1, 5, dtype=torch.long))
    assert Casts.n == 1
