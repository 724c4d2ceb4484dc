"""Save and load models (and optimiser state) as .npz files, without pickle.

Layout: 'config' (JSON text), 'param/<name>' arrays, and with an optimiser
'optim' (JSON: type, hyper-parameters, step) and 'optim/<state>/<name>' arrays.
A save writes a temporary file beside the target and renames it, so an
interrupted save leaves any earlier file intact.
"""
import json
import os
import tempfile

import numpy as np

from .config import ModelConfig
from .model import Transformer
from . import optim as _optim

FORMAT = "course_lib/1"


def save(model, path, optimizer=None, extra=None):
    """Write model (and optimiser state, and a JSON-able `extra` dict) to `path` (.npz)."""
    if not isinstance(model, Transformer):
        raise TypeError(f"save expects a Transformer, got {type(model).__name__}")
    path = os.fspath(path)
    arrays = {"format": np.array(FORMAT), "config": np.array(json.dumps(model.config.to_dict())),
              "extra": np.array(json.dumps(extra or {}))}
    arrays.update({f"param/{k}": v for k, v in model.params.items()})
    if optimizer is not None:
        state = optimizer.state_dict()
        arrays["optim"] = np.array(json.dumps({"type": state["type"], "hparams": state["hparams"], "t": state["t"]}))
        for key, d in state["arrays"].items():
            arrays.update({f"optim/{key}/{k}": v for k, v in d.items()})
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".npz", dir=folder)
    try:
        with os.fdopen(fd, "wb") as f:
            np.savez(f, **arrays)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


def _read(path):
    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"no saved model at {path!r}")
    try:
        with np.load(path, allow_pickle=False) as f:
            data = {k: f[k] for k in f.files}
    except (ValueError, OSError) as e:
        raise ValueError(f"{path!r} is not a course_lib model file ({e})") from None
    if str(data.get("format", "")) != FORMAT:
        raise ValueError(f"{path!r} is not a course_lib model file (format {FORMAT!r} expected)")
    return data


def load_checkpoint(path):
    """-> (model, optimizer or None, extra dict)."""
    data = _read(path)
    config = ModelConfig(**json.loads(str(data["config"])))
    model = Transformer(config)
    for k in model.params:
        if f"param/{k}" not in data:
            raise ValueError(f"{path!r} lacks parameter {k!r}")
        model.params[k] = np.ascontiguousarray(data[f"param/{k}"])
    optimizer = None
    if "optim" in data:
        meta = json.loads(str(data["optim"]))
        cls = getattr(_optim, meta["type"])
        hp = dict(meta["hparams"])
        if "betas" in hp:
            hp["betas"] = tuple(hp["betas"])
        optimizer = cls(model.params, **hp)
        arrays = {}
        for key in data:
            if key.startswith("optim/"):
                _, state, name = key.split("/", 2)
                arrays.setdefault(state, {})[name] = data[key]
        optimizer.load_state_dict({"type": meta["type"], "t": meta["t"], "arrays": arrays})
    return model, optimizer, json.loads(str(data["extra"]))


def load(path):
    """The model saved at `path`."""
    return load_checkpoint(path)[0]
