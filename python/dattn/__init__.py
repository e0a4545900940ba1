"""dattn: exact, fused DeBERTa-v2/v3 disentangled attention for PyTorch and transformers.

    import dattn
    dattn.patch(model)          # every DebertaV2Encoder in `model` now runs dattn
    dattn.unpatch(model)        # back to transformers

See dattn.ops (the custom ops), dattn.hf (the encoder), dattn.layers (the hub layer).
"""

from ._lib import DattnError, DattnUnsupported, build_info, version  # noqa: F401

__version__ = "0.1.0"


def patch(model, mode: str = "auto", cuda_graphs: bool = False):
    """Switch every DebertaV2Encoder inside `model` to dattn, in place (returns `model`).
    mode: "auto" (default), "padded" or "packed" (see dattn.hf). cuda_graphs: replay CUDA
    graphs for packed inference batches on a GPU (see dattn.hf.patch)."""
    from .hf import patch as _patch

    return _patch(model, mode=mode, cuda_graphs=cuda_graphs)


def unpatch(model):
    """Undo patch(): transformers' forward again on every encoder of `model`."""
    from .hf import unpatch as _unpatch

    return _unpatch(model)


def attention(*args, **kwargs):
    """dattn.ops.attention (imports torch on first use)."""
    from .ops import attention as _attention

    return _attention(*args, **kwargs)
