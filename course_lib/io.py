"""Save and load models (and optimiser state) as .npz files, without pickle.

Layout: 'format', 'config' and 'extra' (JSON text), 'param/<name>' arrays, and
with an optimiser 'optim' (JSON: type, hyper-parameters, step) and
'optim/<state>/<name>' arrays. A save writes a temporary file beside the target
and renames it, so an interrupted save leaves any earlier file intact.

Loading trusts nothing in the file: every array is checked against the config
the file carries (names, shapes, dtypes, finite values) before a model is built,
so a file that does not fit raises CheckpointError, naming the file and the
problem, instead of reaching the kernels.
"""
import codecs
import json
import os

import numpy as np

from ._files import write_atomic
from ._words import count
from .config import ModelConfig, is_integer
from .model import Transformer
from . import optim as _optim

FORMAT = "course_lib/1"
_OPTIMIZERS = {cls.__name__: cls for cls in _optim.OPTIMIZERS.values()}


class CheckpointError(ValueError):
    """A file that cannot be read as a course_lib checkpoint, or whose contents do not fit its config.
    (A ValueError, so callers that caught ValueError keep working.)"""


def _non_finite(arrays):
    """[(name, count, first index)] of the arrays holding NaN or infinity."""
    out = []
    for name, a in arrays.items():
        bad = ~np.isfinite(a)
        if bad.any():
            first = tuple(int(i) for i in np.unravel_index(int(np.argmax(bad)), a.shape))
            out.append((name, int(bad.sum()), first))
    return out


def describe_non_finite(arrays):
    """'name' holds N NaN or infinite value(s) (first at index I); ... for each such array, or ''."""
    return "; ".join(f"{name!r} holds {count(n, 'NaN or infinite value')} (first at index {i})"
                     for name, n, i in _non_finite(arrays))


def save(model, path, optimizer=None, extra=None):
    """Write model (and optimiser state, and a JSON-able `extra` dict) to exactly `path`.

    Unlike np.savez, no '.npz' is appended: the file is written at the path given.
    Parameters holding NaN or infinity are refused (ValueError): such a model is broken.
    """
    if not isinstance(model, Transformer):
        raise TypeError(f"save expects a Transformer, got {type(model).__name__}")
    path = os.fspath(path)
    bad = describe_non_finite(model.params)
    if bad:
        raise ValueError(f"not saving to {path!r}: parameter {bad}")
    arrays = {"format": np.array(FORMAT), "config": np.array(json.dumps(model.config.to_dict())),
              "extra": np.array(json.dumps(extra or {}))}
    arrays.update({f"param/{k}": v for k, v in model.params.items()})
    if optimizer is not None:
        state = optimizer.state_dict()
        arrays["optim"] = np.array(json.dumps({"type": state["type"], "hparams": state["hparams"], "t": state["t"]}))
        for key, d in state["arrays"].items():
            arrays.update({f"optim/{key}/{k}": v for k, v in d.items()})
    write_atomic(path, lambda f: np.savez(f, **arrays))


_ZIP = (b"PK\x03\x04", b"PK\x05\x06")     # the first bytes of a zip archive (an .npz), of an empty one
_NPY = b"\x93NUMPY"                         # the first bytes of a single NumPy array (.npy)


def _not_npz(head):
    """What a file whose first bytes are `head` is, when it is not a zip archive."""
    if not head:
        return "it is empty"
    if head.startswith(_NPY):
        return "it is a single NumPy array (.npy), not an .npz archive"
    if head[:1] == b"\x80":
        return "it is a Python pickle, not an .npz archive (course_lib never loads pickles: they can run code)"
    try:
        codecs.getincrementaldecoder("utf-8")().decode(head)     # a character cut at the end is fine
        text = b"\x00" not in head
    except UnicodeDecodeError:
        text = False
    return "it is text, not an .npz archive" if text else "it is not an .npz archive"


def _why(error):
    """Why an entry of an untrusted archive could not be read, in words that never suggest loading it
    unsafely (NumPy's refusal of an object array offers allow_pickle: never an option here)."""
    text = " ".join(str(error).split())     # one line
    if "pickle" in text:
        return "holds Python objects (pickled), which course_lib never loads"
    return f"cannot be read ({type(error).__name__}{': ' + text if text else ''})"


def _arrays(path):
    """Every array of the zip archive at `path` (allow_pickle=False: an object array is refused)."""
    data, key = {}, None
    try:
        with np.load(path, allow_pickle=False) as f:
            for key in f.files:
                data[key] = f[key]
    except Exception as e:  # zipfile, zlib, NumPy's header parser raise many kinds
        why = (f"its entry {key!r} {_why(e)}" if key is not None else
               f"it is a damaged or truncated zip archive ({type(e).__name__})")
        raise CheckpointError(f"{path!r} is not a course_lib model file: {why}") from None
    odd = [k for k, v in data.items() if not isinstance(v, np.ndarray)]
    if odd:
        raise CheckpointError(f"{path!r} is not a course_lib model file: it is a zip archive whose entry {odd[0]!r} "
                              f"is not a NumPy array (not an .npz archive)")
    return data


def _read(path):
    """All arrays of the file at `path`, as a dict. FileNotFoundError if there is none; CheckpointError,
    saying what the file is not, for anything but an .npz archive written by save."""
    if not os.path.exists(path):
        raise FileNotFoundError(f"no saved model at {path!r}")
    if os.path.isdir(path):
        raise CheckpointError(f"{path!r} is a directory, not a saved model")
    try:
        with open(path, "rb") as f:
            head = f.read(512)
    except OSError as e:
        raise CheckpointError(f"{path!r} cannot be read: {e.strerror or e}") from None
    if not head.startswith(_ZIP):   # np.load would try it as a pickle, and its refusal suggests allow_pickle
        raise CheckpointError(f"{path!r} is not a course_lib model file: {_not_npz(head)}")
    data = _arrays(path)
    if _text(data, "format", path, required=False) != FORMAT:
        raise CheckpointError(f"{path!r} is not a course_lib model file: an .npz archive without "
                              f"'format' {FORMAT!r}")
    return data


def _text(data, key, path, required=True):
    """The string stored under `key` (a 0-d text array)."""
    if key not in data:
        if required:
            raise CheckpointError(f"{path!r} lacks {key!r}: not a complete course_lib model file")
        return None
    a = data[key]
    if a.ndim != 0 or a.dtype.kind != "U":
        raise CheckpointError(f"{path!r}: {key!r} should be text, got an array of shape {a.shape} and dtype {a.dtype}")
    return str(a)


def _finite_float(text):
    value = float(text)
    if not np.isfinite(value):
        raise ValueError(f"{text} is not a finite number")
    return value


def _reject_constant(name):
    raise ValueError(f"{name} is not allowed here")


def _json_dict(data, key, path, finite=False):
    """The JSON object stored under `key`; with finite=True, NaN and infinite numbers are refused."""
    text = _text(data, key, path)
    hooks = {"parse_constant": _reject_constant, "parse_float": _finite_float} if finite else {}
    try:
        value = json.loads(text, **hooks)
    except (ValueError, RecursionError) as e:     # JSONDecodeError, the hooks' errors, absurd nesting
        raise CheckpointError(f"{path!r}: {key!r} is not valid JSON ({e})") from None
    if not isinstance(value, dict):
        raise CheckpointError(f"{path!r}: {key!r} should be a JSON object, got {type(value).__name__}")
    return value


def _expected_shapes(cfg):
    """Parameter name -> shape for a config, without allocating (mirrors model.init_params)."""
    C, F, V = cfg.d_model, cfg.d_ff, cfg.vocab_size
    shapes = {"tok_emb": (V, C)}
    if cfg.positional == "learned":
        shapes["pos_emb"] = (cfg.seq_len, C)

    def layernorm(name):
        if cfg.use_layernorm:
            shapes[name + ".gamma"] = shapes[name + ".beta"] = (C,)

    for i in range(cfg.n_layers):
        b = f"blocks.{i}."
        if cfg.use_attention:
            shapes.update({f"{b}attn.w_{w}": (C, C) for w in "qkvo"})
            if cfg.attn_bias:
                shapes.update({f"{b}attn.b_{w}": (C,) for w in "qkvo"})
            layernorm(b + "ln1")
        if cfg.use_ffn:
            shapes.update({b + "ffn.w1": (C, F), b + "ffn.b1": (F,), b + "ffn.w2": (F, C), b + "ffn.b2": (C,)})
            layernorm(b + "ln2")
    if cfg.norm == "pre":
        layernorm("ln_f")
    if not cfg.tie_embeddings:
        shapes["head.w"] = (C, V)
        if cfg.head_bias:
            shapes["head.b"] = (V,)
    return shapes


def _names(names, limit=5):
    names = sorted(names)
    return ", ".join(repr(n) for n in names[:limit]) + (f" and {len(names) - limit} more" if len(names) > limit else "")


def _check_arrays(path, what, arrays, shapes, dtype):
    """Raise CheckpointError unless `arrays` has exactly the names of `shapes`, those shapes, `dtype`
    and finite values."""
    missing, unexpected = shapes.keys() - arrays.keys(), arrays.keys() - shapes.keys()
    if missing or unexpected:
        parts = ([f"missing {_names(missing)}"] if missing else []) + \
                ([f"unexpected {_names(unexpected)}"] if unexpected else [])
        raise CheckpointError(f"{path!r}: its {what} do not fit its config: {'; '.join(parts)}")
    for name, shape in shapes.items():
        a = arrays[name]
        if a.shape != shape:
            raise CheckpointError(f"{path!r}: {what[:-1]} {name!r} has shape {a.shape}, its config needs {shape}")
        if a.dtype != dtype:
            raise CheckpointError(f"{path!r}: {what[:-1]} {name!r} has dtype {a.dtype}, "
                                  f"its config needs {dtype} (not converted: the file does not fit its config)")
    bad = describe_non_finite(arrays)
    if bad:
        raise CheckpointError(f"{path!r}: {what[:-1]} {bad}")


def load_checkpoint(path):
    """-> (model, optimizer or None, extra dict).

    Raises FileNotFoundError if there is no file, CheckpointError (a ValueError) naming the file
    and the problem if it is not a course_lib model file or its arrays do not fit its config.
    """
    path = os.fspath(path)
    data = _read(path)
    settings = _json_dict(data, "config", path, finite=True)
    try:
        config = ModelConfig(**settings)
    except (TypeError, ValueError) as e:
        raise CheckpointError(f"{path!r}: its config is not a valid ModelConfig ({e})") from None
    extra = _json_dict(data, "extra", path)
    params = {k[len("param/"):]: v for k, v in data.items() if k.startswith("param/")}
    if config.n_layers > len(params):   # a corrupt n_layers must not make us enumerate millions of names
        raise CheckpointError(f"{path!r}: its config has n_layers={config.n_layers} but the file holds "
                              f"only {count(len(params), 'parameter')}")
    dtype = np.dtype(config.dtype)
    shapes = _expected_shapes(config)
    _check_arrays(path, "parameters", params, shapes, dtype)
    unknown = [k for k in data if k not in ("format", "config", "extra", "optim")
               and not k.startswith(("param/", "optim/"))]
    if unknown:
        raise CheckpointError(f"{path!r}: unexpected array(s) {_names(unknown)}")
    state = {}
    for key in data:
        if key.startswith("optim/"):
            _, kind, name = (key.split("/", 2) + [""])[:3]
            state.setdefault(kind, {})[name] = data[key]
    if state and "optim" not in data:
        raise CheckpointError(f"{path!r}: optimiser state {_names(state)} without 'optim' (its type and settings)")

    model = Transformer(config)
    model.params.update({k: np.ascontiguousarray(v) for k, v in params.items()})
    optimizer = None
    if "optim" in data:
        optimizer = _load_optimizer(path, _json_dict(data, "optim", path, finite=True), state, model, shapes, dtype)
    return model, optimizer, extra


def _load_optimizer(path, meta, state, model, shapes, dtype):
    cls = _OPTIMIZERS.get(meta.get("type"))
    if cls is None:
        raise CheckpointError(f"{path!r}: unknown optimiser type {meta.get('type')!r}; "
                              f"known: {', '.join(_OPTIMIZERS)}")
    hp, t = meta.get("hparams"), meta.get("t")
    if not isinstance(hp, dict) or not is_integer(t, low=0, numpy=False):
        raise CheckpointError(f"{path!r}: 'optim' needs 'hparams' (an object) and 't' (an integer >= 0), "
                              f"got {meta!r}")
    hp = dict(hp)
    if isinstance(hp.get("betas"), list):
        hp["betas"] = tuple(hp["betas"])
    try:
        optimizer = cls(model.params, **hp)
    except (TypeError, ValueError) as e:
        raise CheckpointError(f"{path!r}: its {cls.__name__} settings are invalid ({e})") from None
    kinds = optimizer.state_arrays()
    if state.keys() != kinds.keys():
        raise CheckpointError(f"{path!r}: {cls.__name__} state should hold {_names(kinds) or 'nothing'}, "
                              f"the file has {_names(state) or 'nothing'}")
    for kind, arrays in state.items():
        _check_arrays(path, f"optimiser {kind} arrays", arrays, shapes, dtype)
    optimizer.load_state_dict({"type": cls.__name__, "t": t, "arrays": state})
    return optimizer


def load(path):
    """The model saved at `path`."""
    return load_checkpoint(path)[0]
