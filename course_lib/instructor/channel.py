"""The data-only channel between the grader's judge and the sandbox that runs a learner's code.

A message is one JSON document and the raw bytes of the arrays it names (frames.py): nothing
that crosses can run code when it is read.

A value is a JSON number, string, boolean or null, or a tagged object:

    {"nd": i}                    the i-th array                    {"tuple": [...]}, {"list": [...]}
    {"scalar": i}                a NumPy scalar (a 0-d array)      {"dict": [[key, value], ...]}
    {"fn": h, "name", "params", "uses"}    a function that stays on the side that sent it, called
                                 through the channel by handle h ("uses": the functions of its
                                 notebook that it calls, by name)
    {"obj": class, "ref": h, "state": {...}}   an object of a class both sides know (OBJECTS),
                                 sent as its attributes; h names the sender's object, so that
                                 it comes back as itself
    {"rng": state}               a numpy.random.Generator, as its bit generator's state

Both sides use the same code; what comes from the sandbox is read with limits (size, depth)
and any value that breaks them is a ChannelError, never a crash or a slow read.
"""
from __future__ import annotations

import numpy as np

from .frames import PLAIN_DTYPE, ChannelError, read_frame, write_frame

__all__ = ["ChannelError", "Side", "Peer", "Raised", "read_frame", "write_frame", "update", "exception"]

MAX_DEPTH = 32
OBJECTS = {"Transformer": ("course_lib.model", "Transformer"),
           "ModelConfig": ("course_lib.config", "ModelConfig"),
           "Node": ("course_lib.gradcheck", "Node")}      # notebook 09's graph, parents and all


class Side:
    """One end of the channel: encodes and decodes values, keeping the handles of what it sent
    (its functions and objects) and the proxies of what it received.

    make_proxy(handle, name, params, uses) -> a callable that calls the other side's function.
    """

    def __init__(self, make_proxy):
        self.make_proxy = make_proxy
        self.sent = {}            # handle -> this side's function or object
        self.received = {}        # handle -> the proxy or object made for the other side's one
        self._theirs = {}         # id(proxy or object) -> the other side's handle

    # ----- encoding ------------------------------------------------------------------------
    def encode(self, value, arrays: list, depth=0):
        if depth > MAX_DEPTH:
            raise ChannelError("a value nested too deeply")
        if value is None or isinstance(value, (bool, int, float, str)) and type(value) in (bool, int, float, str):
            return value
        if isinstance(value, np.ndarray):
            if not PLAIN_DTYPE.match(value.dtype.str):
                raise ChannelError(f"an array of dtype {value.dtype} (only numbers and booleans cross)")
            arrays.append(value)
            return {"nd": len(arrays) - 1}
        if isinstance(value, np.generic):
            if not PLAIN_DTYPE.match(value.dtype.str):
                raise ChannelError(f"a NumPy scalar of dtype {value.dtype}")
            arrays.append(np.asarray(value))
            return {"scalar": len(arrays) - 1}
        if type(value) in (tuple, list):
            return {type(value).__name__: [self.encode(v, arrays, depth + 1) for v in value]}
        if type(value) is dict:
            return {"dict": [[self.encode(k, arrays, depth + 1), self.encode(v, arrays, depth + 1)]
                             for k, v in value.items()]}
        if isinstance(value, np.random.Generator):
            return {"rng": value.bit_generator.state}
        name = type(value).__name__
        theirs = self._theirs.get(id(value))
        if name in OBJECTS and (type(value).__module__, name) == OBJECTS[name]:
            state = self.encode(dict(vars(value)), arrays, depth + 1)
            if theirs is not None:       # the other side's object, going back with its new state
                return {"obj": name, "ref": theirs, "theirs": True, "state": state}
            return {"obj": name, "ref": self.keep(value), "state": state}
        if callable(value) and not isinstance(value, type):
            if theirs is not None:
                return {"fn": theirs, "theirs": True}
            return {"fn": self.keep(value), **describe(value)}
        raise ChannelError(f"a value of type {type(value).__name__}")

    def keep(self, value) -> int:
        for handle, kept in self.sent.items():
            if kept is value:
                return handle
        handle = len(self.sent) + 1
        self.sent[handle] = value
        return handle

    # ----- decoding ------------------------------------------------------------------------
    def decode(self, node, arrays: list, depth=0):
        if depth > MAX_DEPTH:
            raise ChannelError("a value nested too deeply")
        if node is None or type(node) in (bool, int, float, str):
            return node
        if not isinstance(node, dict) or len(node) == 0:
            raise ChannelError("a value of unknown form")
        try:
            if "nd" in node:
                return arrays[node["nd"]]
            if "scalar" in node:
                return arrays[node["scalar"]][()]
            if "tuple" in node:
                return tuple(self.decode(v, arrays, depth + 1) for v in node["tuple"])
            if "list" in node:
                return [self.decode(v, arrays, depth + 1) for v in node["list"]]
            if "dict" in node:
                out = {}
                for k, v in node["dict"]:
                    key = self.decode(k, arrays, depth + 1)
                    if not isinstance(key, (str, int, float, bool, tuple, type(None))):
                        raise ChannelError("a dict key that is not a plain value")
                    out[key] = self.decode(v, arrays, depth + 1)
                return out
            if "rng" in node:
                rng = np.random.Generator(np.random.PCG64())
                rng.bit_generator.state = node["rng"]
                return rng
            if "obj" in node:
                return self._object(node, arrays, depth)
            if "fn" in node:
                return self._function(node)
        except (KeyError, IndexError, TypeError, ValueError) as e:
            raise ChannelError(f"a value of unknown form ({type(e).__name__}: {e})") from None
        raise ChannelError("a value of unknown form")

    def _object(self, node, arrays, depth):
        name, handle = node["obj"], node["ref"]
        if name not in OBJECTS:
            raise ChannelError(f"an object of an unknown class {name!r}")
        state = self.decode(node["state"], arrays, depth + 1)
        if not isinstance(state, dict) or not all(isinstance(k, str) for k in state):
            raise ChannelError("an object's attributes are not a dict of names")
        if node.get("theirs"):          # our own object, back: it is brought to its new state
            mine = self.sent.get(handle)
            if type(mine).__name__ != name:
                raise ChannelError("an object handle that was never sent")
            update(mine, state)
            return mine
        theirs = self.received.get(handle)
        if theirs is None:
            import importlib
            module, cls_name = OBJECTS[name]
            cls = getattr(importlib.import_module(module), cls_name)
            theirs = cls.__new__(cls)
            self.received[handle] = theirs
            self._theirs[id(theirs)] = handle
        vars(theirs).clear()
        vars(theirs).update(state)
        return theirs

    def _function(self, node):
        handle = node["fn"]
        if node.get("theirs"):           # one of ours, sent back
            if handle not in self.sent:
                raise ChannelError("a function handle that was never sent")
            return self.sent[handle]
        if handle not in self.received:
            params = [str(p)[:40] for p in node.get("params", [])][:32]
            uses = {str(k)[:60]: self._function(v) for k, v in dict(node.get("uses", {})).items()
                    if isinstance(v, dict) and "fn" in v}
            proxy = self.make_proxy(handle, str(node.get("name", "function"))[:60], params, uses)
            self.received[handle] = proxy
            self._theirs[id(proxy)] = handle
        return self.received[handle]


def describe(fn) -> dict:
    """A function's name and parameter names, for messages (the proxy shows them)."""
    import inspect
    try:
        params = list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        params = []
    return {"name": getattr(fn, "__name__", type(fn).__name__), "params": params}


def update(original, new) -> None:
    """Bring `original` (an argument as it was sent) to the state `new` came back in: arrays
    in place where the shape and dtype allow, dicts, lists and objects member by member (but
    not a frozen one)."""
    if isinstance(original, np.ndarray):
        if (isinstance(new, np.ndarray) and new.shape == original.shape and new.dtype == original.dtype
                and original.flags.writeable and not np.array_equal(original, new, equal_nan=True)):
            np.copyto(original, new)
    elif isinstance(original, dict) and isinstance(new, dict) and original is not new:
        for key in [k for k in original if k not in new]:
            del original[key]
        for key, value in new.items():
            if key in original and _same_kind(original[key], value):
                update(original[key], value)
            else:
                original[key] = value
    elif isinstance(original, list) and isinstance(new, list) and original is not new:
        if len(original) == len(new):
            for i, value in enumerate(new):
                if _same_kind(original[i], value):
                    update(original[i], value)
                else:
                    original[i] = value
        else:
            original[:] = new
    elif isinstance(original, np.random.Generator) and isinstance(new, np.random.Generator):
        original.bit_generator.state = new.bit_generator.state
    elif type(original).__name__ in OBJECTS and isinstance(new, dict) and not _frozen(original):
        update(vars(original), new)


def _frozen(obj) -> bool:
    """A frozen dataclass (ModelConfig): no call can change it, so none changes it through the
    channel (a learner's object.__setattr__ on its copy stays in the sandbox)."""
    params = getattr(type(obj), "__dataclass_params__", None)
    return bool(params and params.frozen)


def _same_kind(a, b) -> bool:
    return isinstance(a, (np.ndarray, dict, list, np.random.Generator)) and type(a) is type(b) and (
        not isinstance(a, np.ndarray) or (a.shape == b.shape and a.dtype == b.dtype))


class Raised(Exception):
    """An exception the other side's function raised, of a class this side does not have by
    name: its class name and message are kept."""


class Peer(Side):
    """A Side on a pair of byte streams: call() the other side's functions, and answer the calls
    it makes back (callbacks) while waiting.

    Arguments stay in step both ways: a function's arguments come back in their new state with
    its answer ("after"), and while a call is under way each callback carries the state of the
    call's arguments on the side that makes it ("sync"), so that a callback which reads one
    (a gradient's f reading the x the learner moves in place) sees it as the learner left it.
    """

    def __init__(self, reader, writer, make_proxy=None):
        super().__init__(make_proxy or self._proxy)
        self.reader, self.writer = reader, writer
        self.outgoing, self.incoming = [], []     # arguments of the calls made / being answered

    def _proxy(self, handle, name, params, uses):
        def proxy(*args, **kwargs):
            return self.call(handle, args, kwargs)
        proxy.__name__ = proxy.__qualname__ = name
        return proxy

    def send(self, document: dict, values: dict | None = None) -> None:
        arrays = []
        for key, value in (values or {}).items():
            document[key] = self.encode(value, arrays)
        write_frame(self.writer, document, arrays)

    def receive(self) -> tuple[dict, list]:
        return read_frame(self.reader)

    def _bring(self, stack: list, node, arrays) -> None:
        """Bring the arguments on top of `stack` to the state `node` carries."""
        if node is None or not stack:
            return
        new = self.decode(node, arrays)
        if isinstance(new, list) and len(new) == 2:
            old_args, old_kwargs = stack[-1]
            for old, value in zip(list(old_args) + list(old_kwargs.values()),
                                  list(new[0]) + list(dict(new[1]).values())):
                update(old, value)

    def call(self, handle: int, args: tuple, kwargs: dict):
        values = {"args": list(args), "kwargs": dict(kwargs)}
        if self.incoming:
            values["sync"] = list(self.incoming[-1])
        self.send({"op": "call", "fn": handle}, values)
        self.outgoing.append((args, kwargs))
        try:
            while True:
                document, arrays = self.receive()
                op = document.get("op")
                if op == "call":
                    self._bring(self.outgoing, document.get("sync"), arrays)
                    self.answer(document, arrays)
                    continue
                if op not in ("return", "raise"):
                    raise ChannelError(f"an answer of unknown kind {op!r}")
                self._bring(self.outgoing, document.get("after"), arrays)
                self._bring(self.incoming, document.get("sync"), arrays)
                if op == "raise":
                    raise self.on_raise(document)
                return self.decode(document.get("value"), arrays)
        finally:
            self.outgoing.pop()

    def answer(self, document: dict, arrays: list) -> None:
        """Run the function a "call" names, with its arguments, and send what it gave."""
        fn = self.sent.get(document.get("fn"))
        args = self.decode(document.get("args"), arrays)
        kwargs = self.decode(document.get("kwargs"), arrays)
        if not callable(fn) or not isinstance(args, list) or not isinstance(kwargs, dict) \
                or not all(isinstance(k, str) for k in kwargs):
            raise ChannelError("a call of unknown form")
        state = {"after": [args, kwargs]}
        if self.outgoing:
            state["sync"] = list(self.outgoing[-1])
        self.incoming.append((args, kwargs))
        try:
            try:
                value = fn(*args, **kwargs)
            except Exception as e:
                self.send({"op": "raise", **self.on_error(e)}, state)
                return
            try:
                self.send({"op": "return"}, {"value": value, **state})
            except (ChannelError, RecursionError) as e:
                self.send({"op": "raise", "type": "TypeError", "message": f"the value returned cannot be "
                           f"sent to the grader: {e}"}, state)
        finally:
            self.incoming.pop()

    def on_error(self, error: BaseException) -> dict:
        return {"type": type(error).__name__, "message": str(error)[:2000]}

    def on_raise(self, document: dict) -> BaseException:
        return exception(document.get("type"), document.get("message"))


def exception(type_name, message) -> Exception:
    """An exception of the built-in class named `type_name` (a Raised of that name otherwise)."""
    import builtins
    type_name, message = str(type_name)[:60], str(message)[:2000]
    cls = getattr(builtins, type_name, None)
    if not (isinstance(cls, type) and issubclass(cls, Exception)):
        cls = type(type_name if type_name.isidentifier() else "Raised", (Raised,), {})
    try:
        return cls(message)
    except Exception:        # a built-in class that needs other arguments (UnicodeDecodeError)
        return type(type_name, (Raised,), {})(message)
