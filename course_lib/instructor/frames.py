"""The channel's frames: one JSON document and the raw bytes of the arrays it names.

    frame   = u32 length, JSON  |  u32 count  |  (u32 length, JSON [dtype, shape], u64 length, bytes) * count

An array is read back with np.frombuffer as a plain numeric dtype (bool, integer, float or
complex: no object, no structured dtype, no pickle), its size checked against its shape;
anything else, more than MAX_DOCUMENT bytes of JSON or more than MAX_MESSAGE bytes in all, is
a ChannelError before it is read.
"""
from __future__ import annotations

import json
import re
import struct

import numpy as np

MAX_MESSAGE = 256 * 2**20      # bytes: a learner's function that returns more is refused
# bytes of a message's JSON (the arrays' bytes aside): parsed whole, it takes about 20 times its
# size in Python objects, so this bounds what a message costs the judge to read (about 200 MB)
MAX_DOCUMENT = 8 * 2**20


class ChannelError(Exception):
    """The other side sent what this side cannot read (or sent nothing: it ended)."""


def _read_exactly(stream, n: int) -> bytes:
    chunks, left = [], n
    while left:
        chunk = stream.read(left)
        if not chunk:
            raise ChannelError("the other side ended")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


PLAIN_DTYPE = re.compile(r"^[<>|=]?[biufc][1-9][0-9]?$")     # bool, ints, floats, complex


def _array_header(a: np.ndarray) -> bytes:
    return json.dumps([a.dtype.str, list(a.shape)]).encode()


def write_frame(stream, document: dict, arrays: list) -> None:
    text = json.dumps(document).encode()
    if len(text) > MAX_DOCUMENT:
        raise ChannelError(f"a value of more than {MAX_DOCUMENT // 2**20} MB as JSON (return a NumPy array)")
    parts = [struct.pack("<I", len(text)), text, struct.pack("<I", len(arrays))]
    for a in arrays:
        if not PLAIN_DTYPE.match(a.dtype.str):
            raise ChannelError(f"an array of dtype {a.dtype} (only numbers and booleans cross)")
        header, data = _array_header(a), np.ascontiguousarray(a).tobytes()
        parts += [struct.pack("<I", len(header)), header, struct.pack("<Q", len(data)), data]
    if sum(map(len, parts)) > MAX_MESSAGE:
        raise ChannelError(f"a message of more than {MAX_MESSAGE // 2**20} MB")
    stream.write(b"".join(parts))
    stream.flush()


def read_frame(stream) -> tuple[dict, list]:
    (n,) = struct.unpack("<I", _read_exactly(stream, 4))
    if n > MAX_DOCUMENT:
        raise ChannelError(f"a message too large (more than {MAX_DOCUMENT // 2**20} MB of JSON: values that "
                           f"large cross as NumPy arrays)")
    try:
        document = json.loads(_read_exactly(stream, n))
    except ValueError:
        raise ChannelError("a message that is not JSON") from None
    except RecursionError:
        raise ChannelError("a value nested too deeply") from None
    (count,) = struct.unpack("<I", _read_exactly(stream, 4))
    arrays, total = [], n
    for _ in range(count):
        (n,) = struct.unpack("<I", _read_exactly(stream, 4))
        if n > 4096:
            raise ChannelError("an array header too large")
        try:
            dtype, shape = json.loads(_read_exactly(stream, n))
            if not (isinstance(dtype, str) and PLAIN_DTYPE.match(dtype) and isinstance(shape, list)
                    and len(shape) <= 32 and all(type(d) is int and d >= 0 for d in shape)):
                raise ValueError(dtype)
            dtype = np.dtype(dtype)
        except (ValueError, TypeError):
            raise ChannelError("an array header of unknown form") from None
        (size,) = struct.unpack("<Q", _read_exactly(stream, 8))
        total += size
        if total > MAX_MESSAGE:
            raise ChannelError(f"a message of more than {MAX_MESSAGE // 2**20} MB")
        if size != dtype.itemsize * int(np.prod(shape, dtype=object)):
            raise ChannelError("an array whose size does not match its shape")
        arrays.append(np.frombuffer(bytearray(_read_exactly(stream, size)), dtype=dtype).reshape(shape))
    if not isinstance(document, dict):
        raise ChannelError("a message that is not a JSON object")
    return document, arrays
