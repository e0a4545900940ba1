"""The relative-position slot table, bit for bit against transformers' own
make_log_bucket_position (float32 arithmetic, ceil near integers) + clamp, over the grid
position_buckets x max_relative_positions the core issue names, |r| up to 4x the max."""

import pytest
import torch

from dattn import _lib

mdv2 = pytest.importorskip("transformers.models.deberta_v2.modeling_deberta_v2")

BUCKETS = (32, 64, 128, 256, 512)
MAX_REL = (128, 256, 512, 1024, 2048)


def transformers_slots(rel: torch.Tensor, buckets: int, M: int) -> torch.Tensor:
    b = mdv2.make_log_bucket_position(rel, buckets, M).to(torch.long)
    return torch.clamp(b + buckets, 0, 2 * buckets - 1)


@pytest.mark.parametrize("buckets", BUCKETS)
@pytest.mark.parametrize("M", MAX_REL)
def test_slots_bit_identical(buckets, M):
    R = 4 * M
    r = torch.arange(-R, R + 1)
    # 1-D, every relative position once
    want = transformers_slots(r, buckets, M)
    got = torch.tensor(_lib.slots(buckets, M, -R, r.numel()))
    bad = (got != want).nonzero().flatten()
    assert bad.numel() == 0, f"r = {(r[bad[:5]]).tolist()}: dattn {got[bad[:5]].tolist()} " \
                             f"transformers {want[bad[:5]].tolist()}"
    # as transformers evaluates it in the model: on the [L, L] matrix q_ids - k_ids
    # (vectorized main loop and scalar tails see different element positions)
    L = min(R + 1, 2049)
    ids = torch.arange(L)
    rel = ids[:, None] - ids[None, :]
    want2 = transformers_slots(rel, buckets, M)
    assert torch.equal(got[rel + R], want2)
