"""Model configurations and input makers shared by the test suite and the CLI.

Every configuration kind mirrors a family of public DeBERTa-v2/v3 checkpoints in small
(random weights, no downloads):

  v3        share_att_key, log buckets, LayerNorm'd rel embeddings, c2p|p2c (deberta-v3)
  v2xl      as v3 plus the conv layer (conv_kernel_size 3, gelu) of deberta-v2-xlarge
  c2p       only the content-to-position term
  p2c       only the position-to-content term
  noshare   share_att_key false: pos_key_proj / pos_query_proj
  linear    position_buckets <= 0 (linear relative positions, clamped at max_relative)
  norel     relative_attention false (pos_att_type still counted in the scale)
"""

from __future__ import annotations

import torch

KINDS = ("v3", "v2xl", "c2p", "p2c", "noshare", "linear", "norel")


def config(kind: str = "v3", *, hidden: int = 64, heads: int = 2, layers: int = 2,
           intermediate: int | None = None, vocab: int = 128, max_position: int = 128,
           buckets: int = 16, max_relative: int = -1, dropout: float = 0.0,
           attention_dropout: float | None = None, **overrides):
    """A DebertaV2Config of the given kind (small by default)."""
    from transformers import DebertaV2Config

    base = dict(
        vocab_size=vocab, hidden_size=hidden, num_hidden_layers=layers,
        num_attention_heads=heads, intermediate_size=intermediate or 2 * hidden,
        max_position_embeddings=max_position, type_vocab_size=0,
        hidden_dropout_prob=dropout,
        attention_probs_dropout_prob=dropout if attention_dropout is None else attention_dropout,
        relative_attention=True, position_buckets=buckets, max_relative_positions=max_relative,
        pos_att_type=["p2c", "c2p"], norm_rel_ebd="layer_norm", share_att_key=True,
        position_biased_input=False, layer_norm_eps=1e-7, hidden_act="gelu",
        pooler_hidden_size=hidden, pooler_dropout=0.0, pooler_hidden_act="gelu",
    )
    if kind == "v3":
        pass
    elif kind == "v2xl":
        base.update(conv_kernel_size=3, conv_act="gelu")
    elif kind == "c2p":
        base.update(pos_att_type=["c2p"], position_biased_input=True)
    elif kind == "p2c":
        base.update(pos_att_type=["p2c"])
    elif kind == "noshare":
        base.update(share_att_key=False, norm_rel_ebd="none")
    elif kind == "linear":
        base.update(position_buckets=-1, max_relative_positions=32 if max_relative < 1 else max_relative)
    elif kind == "norel":
        base.update(relative_attention=False, position_biased_input=True)
    else:
        raise ValueError(f"unknown config kind {kind!r}; one of {KINDS}")
    base.update(overrides)
    return DebertaV2Config(**base)


def v3_base(layers: int = 12, vocab: int = 1000, **overrides):
    """deberta-v3-base's encoder shape (hidden 768, 12 heads of 64, FFN 3072, buckets 256,
    max_position 512, share_att_key, LayerNorm'd rel embeddings); a small vocabulary, since
    the embedding table plays no part in the encoder."""
    return config("v3", hidden=768, heads=12, layers=layers, intermediate=3072, vocab=vocab,
                  max_position=512, buckets=256, max_relative=-1, **overrides)


def lengths_mask(lengths, L: int, side: str = "right", device=None) -> torch.Tensor:
    """[B, L] int64 padding mask with the given lengths, padded on the right or left."""
    B = len(lengths)
    m = torch.zeros(B, L, dtype=torch.long, device=device)
    for b, n in enumerate(lengths):
        n = int(n)
        if n == 0:
            continue
        if side == "right":
            m[b, :n] = 1
        else:
            m[b, L - n:] = 1
    return m


def random_lengths(B: int, L: int, generator=None, min_len: int = 1):
    n = torch.randint(min_len, L + 1, (B,), generator=generator).tolist()
    n[0] = L  # keep one full row so that L is the padded length of the batch
    return n
