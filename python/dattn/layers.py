"""Hub layer: ``DebertaV2Encoder`` for the ``kernels`` library.

A stateless ``nn.Module`` that satisfies the ``kernels`` layer contract (no ``__init__``,
no members besides ``forward``, ``has_backward`` and ``can_torch_compile``; ``forward`` has
the arity and argument kinds of transformers' ``DebertaV2Encoder.forward``). ``kernelize``
binds its ``forward`` to each transformers encoder instance, so ``self`` below is that
encoder: the layer reads the encoder's own submodules and copies nothing. Everything dattn
does not cover falls back to transformers' forward (see ``dattn.hf``).

Use from a project checkout::

    from kernels import kernelize, Mode, replace_kernel_forward_from_hub, use_kernel_mapping
    from transformers.models.deberta_v2.modeling_deberta_v2 import DebertaV2Encoder
    import dattn.hub

    repo = dattn.hub.build_repository("/tmp/dattn-hub")     # local layer repository
    replace_kernel_forward_from_hub(DebertaV2Encoder, "DebertaV2Encoder")
    with use_kernel_mapping(dattn.hub.kernel_mapping(repo)):
        model = kernelize(model, mode=Mode.INFERENCE)        # or Mode.TRAINING
"""

from torch import nn

__all__ = ["DebertaV2Encoder"]


class DebertaV2Encoder(nn.Module):
    has_backward = True
    can_torch_compile = True

    def forward(self, hidden_states, attention_mask, output_hidden_states=True,
                output_attentions=False, query_states=None, relative_pos=None,
                return_dict=True):
        from dattn.hf import encoder_forward

        return encoder_forward(self, hidden_states, attention_mask, output_hidden_states,
                               output_attentions, query_states, relative_pos, return_dict)
