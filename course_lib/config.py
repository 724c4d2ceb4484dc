"""Model configuration and the course's presets; the one check of whole-number settings."""
import math
from dataclasses import dataclass, asdict, replace

import numpy as np

from ._words import one_of

NORMS = ("post", "pre")
ACTIVATIONS = ("relu", "gelu")
POSITIONALS = ("sinusoidal", "learned", "none")
DTYPES = ("float32", "float64")


def is_integer(value, low=1, numpy=True):
    """True for an int >= low (a NumPy integer too, when numpy=True); False for bools, floats and the rest."""
    kinds = (int, np.integer) if numpy else int
    return not isinstance(value, bool) and isinstance(value, kinds) and value >= low


def check_integer(name, value, low=1, numpy=True):
    """ValueError '{name} must be a positive integer, got ...' (or '... an integer >= {low}') unless
    is_integer(value, low, numpy). Every whole-number setting (sizes, epochs, seeds) is checked here."""
    if not is_integer(value, low, numpy):
        wanted = "a positive integer" if low == 1 else f"an integer >= {low}"
        raise ValueError(f"{name} must be {wanted}, got {value!r}")


@dataclass(frozen=True)
class ModelConfig:
    """Sizes and switches of a transformer. Validated on construction.

    The ablation switches (use_attention, use_ffn, use_residual, use_layernorm)
    remove a part of every block; positional="none" removes positions.
    """
    vocab_size: int = 20
    seq_len: int = 8
    d_model: int = 64
    n_heads: int = 4
    n_layers: int = 2
    d_ff: int = 256
    norm: str = "post"
    activation: str = "relu"
    positional: str = "sinusoidal"
    causal: bool = False
    tie_embeddings: bool = False
    attn_bias: bool = False
    head_bias: bool = True
    ln_eps: float = 1e-5
    dtype: str = "float32"
    use_attention: bool = True
    use_ffn: bool = True
    use_residual: bool = True
    use_layernorm: bool = True

    def __post_init__(self):
        for name in ("vocab_size", "seq_len", "d_model", "n_heads", "d_ff", "n_layers"):
            check_integer(f"ModelConfig.{name}", getattr(self, name), low=0 if name == "n_layers" else 1,
                          numpy=False)      # a config is saved as JSON: plain ints only
        if self.d_model % self.n_heads:
            allowed = [h for h in range(1, min(self.d_model, 64) + 1) if self.d_model % h == 0]
            more = f" (or a larger divisor of {self.d_model})" if self.d_model > 64 else ""
            raise ValueError(f"d_model ({self.d_model}) must be divisible by n_heads ({self.n_heads}): "
                             f"n_heads can be {one_of(allowed)}{more}")
        for name, allowed in (("norm", NORMS), ("activation", ACTIVATIONS),
                              ("positional", POSITIONALS), ("dtype", DTYPES)):
            if getattr(self, name) not in allowed:
                raise ValueError(f"ModelConfig.{name}={getattr(self, name)!r} is unknown; "
                                 f"allowed: {', '.join(allowed)}")
        for name in ("causal", "tie_embeddings", "attn_bias", "head_bias",
                     "use_attention", "use_ffn", "use_residual", "use_layernorm"):
            if not isinstance(getattr(self, name), bool):
                raise TypeError(f"ModelConfig.{name} must be True or False, got {getattr(self, name)!r}")
        if not (isinstance(self.ln_eps, (int, float)) and 0 < self.ln_eps < math.inf):
            raise ValueError(f"ModelConfig.ln_eps must be a positive finite number, got {self.ln_eps!r}")

    @property
    def d_head(self):
        return self.d_model // self.n_heads

    def replace(self, **changes):
        """A copy with some fields changed (validated again)."""
        unknown = set(changes) - set(asdict(self))
        if unknown:
            raise TypeError(f"unknown ModelConfig field(s): {', '.join(sorted(unknown))}; "
                            f"allowed: {', '.join(asdict(self))}")
        return replace(self, **changes)

    def to_dict(self):
        return asdict(self)


class presets:
    """Named configurations: `presets.deep_dive()`, `presets.gpt2(**overrides)`."""

    @staticmethod
    def deep_dive(**overrides):
        """The course's model: V=20, T=8, C=64, H=4, L=2, F=256, post-LN, ReLU, sinusoidal."""
        return ModelConfig().replace(**overrides)

    @staticmethod
    def gpt2(**overrides):
        """GPT-2: pre-LN, GELU, learned positions, causal, tied head, attention biases.
        Defaults to GPT-2 small (V=50257, T=1024, C=768, H=12, L=12, F=3072)."""
        base = ModelConfig(vocab_size=50257, seq_len=1024, d_model=768, n_heads=12, n_layers=12,
                           d_ff=3072, norm="pre", activation="gelu", positional="learned",
                           causal=True, tie_embeddings=True, attn_bias=True, head_bias=False)
        return base.replace(**overrides)
