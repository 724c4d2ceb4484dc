"""Notebook 09: the numbers worked by hand in the markdown agree with what the code printed.

The hand-worked numbers sit in fenced blocks of the markdown that begin with the line
`# by hand` (the hidden answer of Exercise 9.1 and the gradient-check example), one
`name = value` per line. The code cells that compute them print a line `# by code` and
then the same `name = value` lines. This test reads the stored notebook and compares
the two lists, so that a change to either side that breaks the agreement fails here.
"""
import json
import re
from pathlib import Path

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "09_backprop_chain_rule.ipynb"
LINE = re.compile(r"^\s*([A-Za-z_]\w*(?:\[\d+(?:,\d+)?\])?)\s*=\s*(-?\d+(?:\.\d+)?(?:e-?\d+)?)\s*$")


def _cells():
    return json.loads(NOTEBOOK.read_text(encoding="utf-8"))["cells"]


def _pairs(lines):
    out = {}
    for line in lines:
        m = LINE.match(line)
        if m:
            assert m.group(1) not in out, f"{m.group(1)} appears twice"
            out[m.group(1)] = float(m.group(2))
    return out


def hand_numbers():
    found = {}
    for cell in _cells():
        if cell["cell_type"] != "markdown":
            continue
        text = "".join(cell["source"])
        for block in re.findall(r"```text\n(.*?)```", text, flags=re.S):
            lines = block.splitlines()
            if lines and lines[0].strip() == "# by hand":
                for name, value in _pairs(lines[1:]).items():
                    assert name not in found, f"{name} is worked by hand twice"
                    found[name] = value
    return found


def printed_numbers():
    found = {}
    for cell in _cells():
        if cell["cell_type"] != "code":
            continue
        text = "".join("".join(o.get("text", "")) for o in cell.get("outputs", [])
                       if o.get("output_type") == "stream")
        if "# by code" not in text:
            continue
        for name, value in _pairs(text.split("# by code", 1)[1].splitlines()).items():
            assert name not in found, f"{name} is printed twice"
            found[name] = value
    return found


def test_hand_numbers_are_present():
    hand = hand_numbers()
    # Exercise 9.1: forward, loss and every gradient; the gradient-check example
    for name in ("z[0]", "z[1]", "out", "loss", "dout", "dW1[0,0]", "dW1[1,1]", "db1[0]",
                 "dx[1]", "dW2[0]", "db2", "loss_plus", "loss_minus", "numerical"):
        assert name in hand, name
    assert len(hand) >= 25


def test_every_hand_number_is_printed_by_the_code_and_agrees():
    hand, printed = hand_numbers(), printed_numbers()
    missing = sorted(set(hand) - set(printed))
    assert not missing, f"worked by hand but never printed: {missing}"
    wrong = {name: (value, printed[name]) for name, value in hand.items()
             if abs(value - printed[name]) > 1e-9 + 1e-9 * abs(value)}
    assert not wrong, f"hand vs printed: {wrong}"


def test_the_seed_numbers_themselves():
    """The hand derivation, recomputed here in float64 (independent of the notebook's code)."""
    hand = hand_numbers()
    x, W1, b1 = [2.0, 1.0], [[0.5, -0.3], [0.2, 0.4]], [0.1, -0.1]
    W2, b2, target = [0.6, 0.3], 0.2, 1.5
    z = [x[0] * W1[0][j] + x[1] * W1[1][j] + b1[j] for j in range(2)]
    h = [max(v, 0.0) for v in z]
    out = h[0] * W2[0] + h[1] * W2[1] + b2
    dout = out - target
    dz = [dout * W2[j] * (z[j] > 0) for j in range(2)]
    want = {"out": out, "loss": 0.5 * dout ** 2, "dout": dout, "db2": dout,
            "dW1[0,0]": x[0] * dz[0], "dW1[1,0]": x[1] * dz[0], "dW1[0,1]": x[0] * dz[1],
            "dx[0]": dz[0] * W1[0][0] + dz[1] * W1[0][1], "dx[1]": dz[0] * W1[1][0] + dz[1] * W1[1][1]}
    for name, value in want.items():
        assert abs(hand[name] - value) < 1e-12, (name, hand[name], value)
    assert abs(hand["numerical"] - hand["dW1[0,0]"]) < 1e-12
    assert abs((hand["loss_plus"] - hand["loss_minus"]) / 2e-5 - hand["numerical"]) < 1e-9
