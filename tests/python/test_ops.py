"""dattn::fwd / dattn::bwd against an independent float64 reference (SPEC.md)."""

import pytest
import torch

from dattn import _lib, ops
from conftest import DEVICES, gradients_checkable

TERMS = {"both": (True, True), "c2p": (True, False), "p2c": (False, True), "none": (False, False)}


def slot_table(L, buckets, M):
    """slot[i, j] from transformers' own bucket function (independent of libdattn)."""
    from transformers.models.deberta_v2.modeling_deberta_v2 import make_log_bucket_position

    r = torch.arange(L)[:, None] - torch.arange(L)[None, :]
    b = make_log_bucket_position(r, buckets, M).long() if buckets > 0 else r
    S = buckets if buckets > 0 else M
    return torch.clamp(b + S, 0, 2 * S - 1)


def reference(q, k, v, pk, pq, mask, buckets, M, keep=None, p_drop=0.0):
    """float64 padded attention, [B, L, H, D]; mask [B, L] (None = all valid); keep
    [B, H, L, L] dropout keep mask."""
    B, L, H, D = q.shape
    sl = slot_table(L, buckets, M).to(q.device)
    s = torch.einsum("bihd,bjhd->bhij", q, k)
    f = 1
    if pk is not None:
        s = s + torch.einsum("bihd,hijd->bhij", q, pk[:, sl])
        f += 1
    if pq is not None:
        s = s + torch.einsum("bjhd,hijd->bhij", k, pq[:, sl])
        f += 1
    s = s / torch.sqrt(torch.tensor(float(D * f), dtype=torch.float32)).double()
    if mask is not None:
        m = mask.bool()
        mm = m[:, None, :, None] & m[:, None, None, :]
        s = s.masked_fill(~mm, torch.finfo(s.dtype).min)
    p = s.softmax(-1)
    if keep is not None:
        p = p * keep / (1 - p_drop)
    return torch.einsum("bhij,bjhd->bihd", p, v)


def make(B, L, H, D, S, terms, device, dtype=torch.float32):
    c2p, p2c = TERMS[terms]
    q, k, v = (torch.randn(B, L, H, D, dtype=torch.float64) for _ in range(3))
    pk = torch.randn(H, 2 * S, D, dtype=torch.float64) if c2p else None
    pq = torch.randn(H, 2 * S, D, dtype=torch.float64) if p2c else None
    xs = [q, k, v, pk, pq]
    low = [None if t is None else t.to(device, dtype).requires_grad_() for t in xs]
    ref = [None if t is None else t.clone().requires_grad_() for t in xs]
    return low, ref


def grads(ts):
    return [None if t is None else t.grad for t in ts]


def check_close(a, b, atol, what):
    err = (a.double().cpu() - b.double().cpu()).abs().max().item()
    assert err <= atol, f"{what}: max abs error {err:.3g} > {atol:.3g}"


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("terms", list(TERMS))
@pytest.mark.parametrize("pos", [(16, 64), (-1, 24), (256, 512)])
@pytest.mark.parametrize("pad", ["none", "right", "left", "holes", "empty"])
def test_padded_matches_float64(device, terms, pos, pad, seed):
    buckets, M = pos
    S = buckets if buckets > 0 else M
    B, L, H, D = 3, 37, 2, 16
    (q, k, v, pk, pq), ref = make(B, L, H, D, S, terms, device)
    mask = None
    if pad != "none":
        mask = torch.ones(B, L, dtype=torch.uint8)
        if pad == "right":
            mask[1, 20:] = 0
        elif pad == "left":
            mask[1, :17] = 0
        elif pad == "holes":
            mask[1, 3:9] = 0
            mask[2, ::3] = 0
        else:
            mask[2] = 0
    out = ops.attention(q, k, v, pk, pq, mask=None if mask is None else mask.to(device),
                        position_buckets=buckets, max_relative_positions=M)
    r = reference(*ref, mask, buckets, M)
    check_close(out, r, 2e-5, "out")
    if not gradients_checkable(device):
        return
    g = torch.randn_like(r)
    (out * g.to(out)).sum().backward()
    (r * g).sum().backward()
    for name, a, b in zip("q k v pk pq".split(), grads([q, k, v, pk, pq]), grads(ref)):
        if b is not None:
            check_close(a, b, 1e-4 * max(1.0, b.abs().max().item()), "d" + name)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("terms", ["both", "c2p", "p2c"])
def test_packed_matches_per_sequence(device, terms, seed):
    buckets, M, H, D = 16, 64, 2, 32
    lens = [5, 0, 33, 1, 20]
    T = sum(lens)
    c2p, p2c = TERMS[terms]
    x = [torch.randn(T, H, D, dtype=torch.float64) for _ in range(3)]
    pk = torch.randn(H, 2 * buckets, D, dtype=torch.float64) if c2p else None
    pq = torch.randn(H, 2 * buckets, D, dtype=torch.float64) if p2c else None
    low = [None if t is None else t.to(device, torch.float32).requires_grad_() for t in x + [pk, pq]]
    ref = [None if t is None else t.clone().requires_grad_() for t in x + [pk, pq]]
    cu = torch.tensor([0] + torch.tensor(lens).cumsum(0).tolist(), dtype=torch.int32, device=device)
    out = ops.attention(*low, cu_seqlens=cu, max_seqlen=max(lens), position_buckets=buckets,
                        max_relative_positions=M)
    assert out.shape == (T, H, D)
    parts, o = [], 0
    for n in lens:
        sl = slice(o, o + n)
        parts.append(reference(ref[0][None, sl], ref[1][None, sl], ref[2][None, sl], ref[3],
                               ref[4], None, buckets, M)[0])
        o += n
    r = torch.cat(parts)
    check_close(out, r, 2e-5, "out")
    if not gradients_checkable(device):
        return
    g = torch.randn_like(r)
    (out * g.to(out)).sum().backward()
    (r * g).sum().backward()
    for name, a, b in zip("q k v pk pq".split(), grads(low), grads(ref)):
        if b is not None:
            check_close(a, b, 1e-4 * max(1.0, b.abs().max().item()), "d" + name)


@pytest.mark.parametrize("device", DEVICES)
def test_strided_inputs(device, seed):
    """q/k/v as views of one projection output and pk/pq as transposed views, as the
    encoder hands them over."""
    B, L, H, D, S = 2, 19, 3, 16, 16
    qkv = torch.randn(B, L, 3, H * D, device=device)
    q, k, v = (qkv[:, :, i].view(B, L, H, D) for i in range(3))
    rel = torch.randn(2 * S, 2, H * D, device=device)
    pk, pq = (rel[:, i].view(2 * S, H, D).transpose(0, 1) for i in range(2))
    out = ops.attention(q, k, v, pk, pq, position_buckets=S, max_relative_positions=64)
    r = reference(*(t.double().cpu() for t in (q, k, v, pk, pq)), None, S, 64)
    check_close(out, r, 2e-5, "out")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_low_precision_tolerance_rule(device, dtype, seed):
    """Error vs float64 at most 2x that of the plain PyTorch composition in the same dtype
    (transformers' way), plus a rounding floor."""
    B, L, H, D, S, M = 2, 48, 2, 32, 16, 64
    (q, k, v, pk, pq), ref = make(B, L, H, D, S, "both", device, dtype)
    mask = torch.ones(B, L, dtype=torch.uint8)
    mask[1, 30:] = 0
    out = ops.attention(q, k, v, pk, pq, mask=mask.to(device), position_buckets=S,
                        max_relative_positions=M)
    r = reference(*ref, mask, S, M)
    eager = reference(*(t.detach() for t in (q, k, v, pk, pq)), mask.to(device), S, M)
    eps = torch.finfo(dtype).eps
    e_d = (out.double().cpu() - r).abs().max().item()
    e_t = (eager.double().cpu() - r).abs().max().item()
    assert e_d <= 2 * e_t + eps * r.abs().max().item(), f"dattn {e_d:.3g} vs eager {e_t:.3g}"


def test_opcheck(seed):
    """torch.library's own consistency checks: schema, fake tensors, autograd registration."""
    B, L, H, D, S = 2, 9, 2, 16, 8
    q, k, v = (torch.randn(B, L, H, D, requires_grad=True) for _ in range(3))
    pk, pq = (torch.randn(H, 2 * S, D, requires_grad=True) for _ in range(2))
    mask = torch.ones(B, L, dtype=torch.uint8)
    mask[1, 5:] = 0
    torch.library.opcheck(torch.ops.dattn.fwd, (q, k, v, pk, pq, mask, None, None, L, S, 64, 0, 0.0))
    cu = torch.tensor([0, 4, 9], dtype=torch.int32)
    qp, kp, vp = (torch.randn(9, H, D, requires_grad=True) for _ in range(3))
    torch.library.opcheck(torch.ops.dattn.fwd, (qp, kp, vp, None, pq, None, cu, None, 5, S, 64, 0, 0.0))


def test_compile_fullgraph_op(seed):
    B, L, H, D, S = 2, 11, 2, 16, 8
    q, k, v = (torch.randn(B, L, H, D, requires_grad=True) for _ in range(3))
    pk = torch.randn(H, 2 * S, D, requires_grad=True)

    def f(q, k, v, pk):
        return ops.attention(q, k, v, pk, None, position_buckets=S, max_relative_positions=32)

    cf = torch.compile(f, fullgraph=True, backend="aot_eager")
    a = cf(q, k, v, pk)
    b = f(q, k, v, pk)
    assert torch.equal(a, b)
    ga = torch.autograd.grad(a.sum(), (q, k, v, pk))
    gb = torch.autograd.grad(b.sum(), (q, k, v, pk))
    for x, y in zip(ga, gb):
        assert torch.equal(x, y)


# ---- dropout ------------------------------------------------------------------------


def keep_mask(rng, p, B, H, L):
    seed, offset = rng.tolist()
    keep = torch.zeros(B, H, L, L, dtype=torch.float64)
    for b in range(B):
        for h in range(H):
            for i in range(L):
                for j in range(L):
                    keep[b, h, i, j] = _lib.dropout_keep(seed, offset, p, b, h, H, i, j)
    return keep


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("packed", [False, True])
def test_dropout_matches_its_definition(device, packed, seed):
    """With the keep mask rebuilt from dattn_dropout_keep, forward and backward equal the
    float64 reference with that mask applied, on every backend (the same mask on each)."""
    B, L, H, D, S, p = 2, 13, 2, 16, 8, 0.3
    (q, k, v, pk, pq), ref = make(B, L, H, D, S, "both", device)
    rng = ops.new_rng()
    keep = keep_mask(rng, p, B, H, L)
    assert 0.5 < keep.mean().item() < 0.9
    if packed:
        cu = torch.tensor([0, L, 2 * L], dtype=torch.int32, device=device)
        out = ops.attention(*(t.reshape(B * L, H, D) for t in (q, k, v)), pk, pq, cu_seqlens=cu,
                            max_seqlen=L, position_buckets=S, max_relative_positions=32,
                            dropout_p=p, rng=rng).view(B, L, H, D)
    else:
        out = ops.attention(q, k, v, pk, pq, position_buckets=S, max_relative_positions=32,
                            dropout_p=p, rng=rng)
    r = reference(*ref, None, S, 32, keep=keep, p_drop=p)
    check_close(out, r, 2e-5, "out")
    if not gradients_checkable(device):
        return
    g = torch.randn_like(r)
    (out * g.to(out)).sum().backward()
    (r * g).sum().backward()
    for name, a, b in zip("q k v pk pq".split(), grads([q, k, v, pk, pq]), grads(ref)):
        check_close(a, b, 1e-4 * max(1.0, b.abs().max().item()), "d" + name)


def test_dropout_reproducible_and_unbiased(seed):
    B, L, H, D, S = 1, 16, 2, 16, 8
    q, k, v = (torch.randn(B, L, H, D) for _ in range(3))
    pk = torch.randn(H, 2 * S, D)

    def run(p):
        return ops.attention(q, k, v, pk, None, position_buckets=S, max_relative_positions=32,
                             dropout_p=p)

    torch.manual_seed(seed)
    a = run(0.2)
    torch.manual_seed(seed)
    b = run(0.2)
    c = run(0.2)
    assert torch.equal(a, b), "same torch seed, same dropout mask"
    assert not torch.equal(b, c), "the generator advances between calls"
    clean = run(0.0)
    mean = torch.stack([run(0.2) for _ in range(400)]).mean(0)
    # E[dropout(p) v] = p v: the mean of 400 draws is within a few standard errors
    assert (mean - clean).abs().max().item() < 0.15
