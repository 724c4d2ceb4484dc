"""The grading channel (course_lib/instructor/channel.py): values cross as data, never as code, and
what the sandbox sends that breaks the rules is refused with ChannelError, never read."""
import io
import json
import struct
import threading

import numpy as np
import pytest

from course_lib.config import ModelConfig
from course_lib.instructor import channel, frames, judge, judge_runner
from course_lib.instructor.channel import ChannelError, Peer, read_frame, write_frame


def round_trip(value):
    sender, receiver = channel.Side(lambda *a: None), channel.Side(lambda *a: None)
    arrays = []
    node = sender.encode(value, arrays)
    buffer = io.BytesIO()
    write_frame(buffer, {"value": node}, arrays)
    buffer.seek(0)
    document, got = read_frame(buffer)
    return receiver.decode(document["value"], got)


@pytest.mark.parametrize("value", [
    None, True, 3, -2.5, float("inf"), "text", (1, [2.0, "x"]), {"a": 1, 2: (3,)},
    np.arange(6, dtype=np.int64).reshape(2, 3), np.ones((2, 0), np.float32), np.array(True),
    np.float64(1.5), np.int64(7), np.zeros(3, np.complex128)])
def test_values_cross_as_they_were(value):
    got = round_trip(value)
    if isinstance(value, np.ndarray):
        assert got.dtype == value.dtype and got.shape == value.shape and np.array_equal(got, value)
        assert got.flags.writeable                    # the learner's code may write into it
    else:
        assert got == value and type(got) is type(value)


def test_a_generator_and_a_config_cross_with_their_state():
    rng = np.random.default_rng(5)
    rng.random(3)
    got = round_trip(rng)
    assert got.random() == rng.random()
    cfg = ModelConfig(vocab_size=20, seq_len=8, d_model=16, n_heads=2, n_layers=1, d_ff=32)
    assert round_trip(cfg) == cfg


def test_a_graph_of_nodes_crosses_with_its_forks():
    """Notebook 09's engine is graded on graphs: a node read twice arrives as one node."""
    from course_lib.gradcheck import Node
    x, W = Node(np.ones((2, 3))), Node(np.eye(3))
    root = Node(0.0, (Node(np.zeros((2, 3)), (x, W)), Node(np.zeros((2, 3)), (x,))))
    got = round_trip(root)
    assert type(got) is Node and repr(got) == "Node()"
    left, right = got.parents
    assert left.parents[0] is right.parents[0] and np.array_equal(left.parents[1].value, np.eye(3))


@pytest.mark.parametrize("value, says", [
    (np.array([object()]), "dtype object"), (np.array(["a"]), "dtype <U1"),
    (np.zeros(2, dtype=[("a", "f8")]), "dtype"), (object(), "type object"), (b"bytes", "type bytes")])
def test_what_is_not_data_is_refused_when_sent(value, says):
    with pytest.raises(ChannelError, match=says):
        round_trip(value)


def _frame(document, headers_and_data=()):
    text = json.dumps(document).encode()
    out = struct.pack("<I", len(text)) + text + struct.pack("<I", len(headers_and_data))
    for header, data in headers_and_data:
        h = json.dumps(header).encode()
        out += struct.pack("<I", len(h)) + h + struct.pack("<Q", len(data)) + data
    return io.BytesIO(out)


@pytest.mark.parametrize("stream, says", [
    (_frame({"v": 1}, [(["|O", [1]], b"\0" * 8)]), "header of unknown form"),     # an object array
    (_frame({"v": 1}, [(["V8", [1]], b"\0" * 8)]), "header of unknown form"),
    (_frame({"v": 1}, [(["<f8", [2]], b"\0" * 8)]), "does not match its shape"),
    (_frame({"v": 1}, [(["<f8", [-1]], b"")]), "header of unknown form"),
    (io.BytesIO(struct.pack("<I", 2**31)), "too large"),
    (io.BytesIO(struct.pack("<I", 4) + b"{no "), "not JSON"),
    (io.BytesIO(b"\1\0"), "ended"),
    (_frame([1, 2]), "not a JSON object"),
    # what the judge would parse whole: a document past MAX_DOCUMENT, a nesting past the recursion limit
    (io.BytesIO(struct.pack("<I", frames.MAX_DOCUMENT + 1)), "more than 8 MB of JSON"),
    (io.BytesIO(struct.pack("<I", 200_000) + b"[" * 200_000), "nested too deeply")])
def test_a_broken_frame_is_refused_not_read(stream, says):
    with pytest.raises(ChannelError, match=says):
        read_frame(stream)


@pytest.mark.parametrize("node, says", [
    ({"nd": 3}, "unknown form"), ({"obj": "Popen", "ref": 1, "state": {"dict": []}}, "unknown class"),
    ({"fn": 9, "theirs": True}, "never sent"), ({"dict": [[{"list": []}, 1]]}, "not a plain value"),
    ({"what": 1}, "unknown form"), ([1], "unknown form")])
def test_a_value_of_unknown_form_is_refused(node, says):
    with pytest.raises(ChannelError, match=says):
        channel.Side(lambda *a: None).decode(node, [])


def test_nesting_past_the_limit_is_refused():
    node = 1
    for _ in range(channel.MAX_DEPTH + 2):
        node = {"list": [node]}
    with pytest.raises(ChannelError, match="nested too deeply"):
        channel.Side(lambda *a: None).decode(node, [])


def _pair():
    """Two peers joined by pipes, the second answering in a thread until its pipe closes."""
    import os
    a_to_b, b_to_a = os.pipe(), os.pipe()
    a = Peer(os.fdopen(b_to_a[0], "rb"), os.fdopen(a_to_b[1], "wb"))
    b = Peer(os.fdopen(a_to_b[0], "rb"), os.fdopen(b_to_a[1], "wb"))

    def serve():
        while True:
            try:
                document, arrays = b.receive()
            except ChannelError:
                return
            b.answer(document, arrays)
    threading.Thread(target=serve, daemon=True).start()
    return a, b


def test_calls_callbacks_and_arguments_kept_in_step():
    """The learner's numerical gradient moves x in place and calls the grader's f, which reads x
    itself: f sees x as the learner left it, and x comes back restored."""
    a, b = _pair()
    x = np.array([1.0, 2.0, 3.0])
    w = np.array([2.0, -1.0, 0.5])
    seen = []

    def f():                      # the grader's side: reads its own x
        seen.append(x.copy())
        return float(w @ x)

    def gradient(f, x):           # the learner's side, through the channel
        out = np.zeros_like(x)
        for i in range(x.size):
            old = x[i]
            x[i] = old + 1e-5
            up = f()
            x[i] = old - 1e-5
            down = f()
            x[i] = old
            out[i] = (up - down) / 2e-5
        return out
    handle = b.keep(gradient)
    got = a.call(handle, (f, x), {})
    assert np.allclose(got, w) and np.array_equal(x, [1.0, 2.0, 3.0])
    assert len(seen) == 6 and seen[0][0] == 1.0 + 1e-5


def test_an_exception_crosses_by_its_name_and_message():
    a, b = _pair()

    def stub(x):
        raise NotImplementedError("not yet")

    def odd(x):
        raise np.linalg.LinAlgError("singular")
    with pytest.raises(NotImplementedError, match="not yet"):
        a.call(b.keep(stub), (1,), {})
    with pytest.raises(channel.Raised, match="singular") as error:
        a.call(b.keep(odd), (1,), {})
    assert type(error.value).__name__ == "LinAlgError"


def test_a_frozen_object_comes_back_as_it_was_sent():
    """7.3's checker counts the parameters of the config it passed after the learner's call: a
    learner who changes their copy past the frozen dataclass must not change the checker's."""
    a, b = _pair()
    cfg = ModelConfig(vocab_size=20, seq_len=8, d_model=16, n_heads=2, n_layers=1, d_ff=32)

    def param_count(cfg):
        object.__setattr__(cfg, "n_layers", 0)
        return 0
    assert a.call(b.keep(param_count), (cfg,), {}) == 0
    assert cfg.n_layers == 1


def test_a_row_with_a_long_message_reaches_the_grader_cut_not_dropped():
    """grade reads MAX_ROW bytes of a row; a learner's text in a message could make it longer."""
    row = {"exercise": "Exercise 1.2", "status": "failed", "stage": "s", "message": "é" * 20_000}
    line = judge._line(row)
    got = json.loads(line)
    assert len(line) < judge_runner.MAX_ROW and got["message"].endswith(" [cut]") and got["exercise"] == "Exercise 1.2"
    assert judge._line({**row, "message": "short"}) == json.dumps({**row, "message": "short"})
