"""course_lib.viz: widget plots (live view + static HTML frames) and labelled helpers."""
import base64
import json
import re

import matplotlib
import numpy as np
import pytest

from course_lib import viz

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def decay(ax, t):
    x = np.linspace(0, 3, 40)
    ax.plot(x, np.exp(-x / t))
    ax.set(xlabel="x", ylabel="exp(-x / t)", title="decay")


def parse_static(html):
    """The static HTML's data: dict with frames (decoded PNG bytes, one per state) and controls."""
    data = json.loads(re.search(r'<script type="application/json" class="clwp-data">(.*?)</script>',
                                html, re.S).group(1))
    first = re.search(r'<img class="clwp-frame"[^>]*src="data:image/png;base64,([^"]+)"', html).group(1)
    unique = [base64.b64decode(f or first) for f in data["frames"]]
    data["states"] = [unique[i] for i in data["index"]]
    data["controls"] = re.findall(r'<input type="(range|checkbox)" data-clwp-control="(\d+)"[^>]*>', html)
    return data


def test_slider_bundle_outside_kernel_has_html_frames_and_plain_text():
    values = [0.25, 0.5, 1.0, 2.0]
    plot = viz.slider_plot(decay, values, "temperature", title="Decay")
    bundle = plot._repr_mimebundle_()
    assert set(bundle) == {"text/plain", "text/html"}  # no kernel: no widget view
    assert "temperature" in bundle["text/plain"] and "4 frames" in bundle["text/plain"]
    html = bundle["text/html"]
    data = parse_static(html)
    assert len(data["states"]) == len(values) == len(plot.frames)
    assert all(png.startswith(PNG_SIGNATURE) for png in data["states"])
    assert len(set(data["states"])) == len(values)  # every value draws a different frame
    assert data["states"] == [plot.frames[(i,)] for i in range(len(values))]
    assert data["labels"] == [["0.25", "0.5", "1", "2"]]
    assert data["controls"] == [("range", "0")]
    assert 'max="3"' in html and 'value="0"' in html
    assert "<script>" in html and "addEventListener('input'" in html
    assert 'alt="Decay: temperature = 0.25"' in html


def test_static_html_is_deterministic_and_depends_on_inputs():
    a = viz.slider_plot(decay, [0.5, 1.0, 2.0], "t", title="Decay").to_html()
    b = viz.slider_plot(decay, [0.5, 1.0, 2.0], "t", title="Decay").to_html()
    assert a == b
    c = viz.slider_plot(decay, [0.5, 1.0, 3.0], "t", title="Decay").to_html()
    assert c != a
    # and independent of the user's matplotlib style
    with matplotlib.style.context("dark_background"):
        d = viz.slider_plot(decay, [0.5, 1.0, 2.0], "t", title="Decay").to_html()
    assert d == a


def test_frames_are_compact_white_pngs():
    from PIL import Image
    import io

    plot = viz.slider_plot(decay, [1.0], "t", figsize=(6, 4), dpi=100)
    png = plot.frames[(0,)]
    img = Image.open(io.BytesIO(png)).convert("RGB")
    assert img.size == (600, 400)
    assert img.getpixel((1, 1)) == (255, 255, 255)  # white face: readable on a dark page
    assert b"Software" not in png and b"atplotlib" not in png  # no version stamp
    assert len(png) < 20_000


def test_widget_plot_cartesian_product_and_toggle():
    calls = []

    def draw(fig, causal, head):
        calls.append((causal, head))
        ax = fig.add_subplot()
        m = np.tril(np.ones((4, 4))) if causal else np.ones((4, 4))
        viz.heatmap(m * (head + 1), None, None, f"head {head}", "weight", ax=ax, vmin=0, vmax=3)

    plot = viz.widget_plot(draw, {"causal": [False, True], "head": [0, 1, 2]}, title="Maps",
                           initial={"causal": True})
    assert calls == [(False, 0), (False, 1), (False, 2), (True, 0), (True, 1), (True, 2)]
    data = parse_static(plot.to_html())
    assert len(data["states"]) == 6 and len(set(data["states"])) == 6
    assert data["strides"] == [3, 1]
    assert data["controls"] == [("checkbox", "0"), ("range", "1")]
    assert plot.initial == (1, 0)
    assert 'data-frame="3"' in plot.to_html()  # starts at causal=True, head=0
    assert data["states"][3] == plot.frames[(1, 0)]


def test_identical_frames_are_stored_once():
    plot = viz.widget_plot(lambda fig, flag: fig.add_subplot().plot([0, 1]), {"flag": [False, True]})
    data = parse_static(plot.to_html())
    assert len(data["states"]) == 2 and len(data["frames"]) == 1


def test_frame_cap():
    with pytest.raises(ValueError, match=r"8 x 8 = 64 states.*max_frames=60"):
        viz.widget_plot(lambda fig, a, b: None, {"a": list(range(8)), "b": list(range(8))})
    with pytest.raises(ValueError, match="max_frames"):
        viz.slider_plot(decay, np.linspace(0.1, 1, 61), "t")


def test_bad_inputs_raise_clear_errors():
    with pytest.raises(ValueError, match="no values"):
        viz.slider_plot(decay, [], "t")
    with pytest.raises(TypeError, match="draw must be"):
        viz.slider_plot("not a function", [1, 2], "t")
    with pytest.raises(TypeError, match="draw must be"):
        viz.widget_plot(None, {"a": [1]})
    with pytest.raises(ValueError, match="non-empty dict"):
        viz.widget_plot(lambda fig: None, {})
    with pytest.raises(TypeError, match=r"does not accept the control\(s\) \['b'\]"):
        viz.widget_plot(lambda fig, a: None, {"a": [1], "b": [2]})
    with pytest.raises(TypeError, match="list of values"):
        viz.slider_plot(decay, "abc", "t")
    with pytest.raises(ValueError, match="print the same"):
        viz.slider_plot(decay, [1.0, 1.00000001], "t")
    with pytest.raises(ValueError, match="not among the values"):
        viz.slider_plot(decay, [1.0, 2.0], "t", initial=3.0)

    def broken(ax, t):
        raise ZeroDivisionError("oops")

    with pytest.raises(RuntimeError, match=r"draw failed for t=2: ZeroDivisionError: oops"):
        viz.slider_plot(broken, [2], "t")


def test_live_widget_follows_its_controls():
    ipywidgets = pytest.importorskip("ipywidgets")
    plot = viz.slider_plot(decay, [0.5, 1.0, 2.0], "t")
    box = plot.widget()
    slider, image = box.children
    assert isinstance(slider, ipywidgets.SelectionSlider) and isinstance(image, ipywidgets.Image)
    assert [label for label, _ in slider.options] == ["0.5", "1", "2"]
    assert image.value == plot.frames[(0,)]
    slider.value = 2
    assert image.value == plot.frames[(2,)]

    both = viz.widget_plot(lambda fig, on, k: fig.add_subplot().plot([0, k if on else -k]),
                           {"on": [False, True], "k": [1, 2]})
    toggle, slider, image = both.widget().children
    assert isinstance(toggle, ipywidgets.Checkbox)
    toggle.value = True
    slider.value = 1
    assert image.value == both.frames[(1, 1)]


def test_heatmap_is_labelled():
    m = np.arange(12.0).reshape(3, 4)
    fig = viz.heatmap(m, ["a", "b", "c"], ["w", "x", "y", "z"], "Attention", "weight",
                      annotate=True)
    ax, cax = fig.axes
    assert ax.get_title() == "Attention"
    assert ax.get_xlabel() == "key position" and ax.get_ylabel() == "query position"
    assert cax.get_ylabel() == "weight"
    assert [t.get_text() for t in ax.get_xticklabels()] == ["w", "x", "y", "z"]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["a", "b", "c"]
    assert ax.images[0].get_cmap().name == "viridis"
    assert len(ax.texts) == 12 and ax.texts[5].get_text() == "5.00"
    assert fig.get_facecolor() == (1.0, 1.0, 1.0, 1.0)
    assert fig._repr_png_().startswith(PNG_SIGNATURE)  # shows itself in Jupyter without pyplot

    fig2 = viz.heatmap(m, None, None, "T", "c", xlabel="dimension", ylabel="position", cmap="cividis")
    assert fig2.axes[0].get_xlabel() == "dimension"
    assert [t.get_text() for t in fig2.axes[0].get_yticklabels()] == ["0", "1", "2"]

    with pytest.raises(ValueError, match="3 x 4 but got 2 row labels"):
        viz.heatmap(m, ["a", "b"], None, "T", "c")
    with pytest.raises(ValueError, match="2-D"):
        viz.heatmap(np.zeros(3), None, None, "T", "c")
    with pytest.raises(ValueError, match="title and a colorbar label"):
        viz.heatmap(m, None, None, "", "c")


def test_line_plot_uses_palette_and_labels():
    x = np.arange(5)
    fig = viz.line_plot(x, {"a": x, "b": x ** 2}, "Curves", "step", "value", logy=True)
    ax = fig.axes[0]
    assert (ax.get_title(), ax.get_xlabel(), ax.get_ylabel()) == ("Curves", "step", "value")
    assert [line.get_color() for line in ax.lines] == list(viz.PALETTE[:2])
    assert [line.get_linestyle() for line in ax.lines] == ["-", "--"]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["a", "b"]
    assert ax.get_yscale() == "log"
    with pytest.raises(ValueError, match="shape"):
        viz.line_plot(x, {"a": x[:3]}, "t", "x", "y")


def test_palette_is_okabe_ito():
    okabe_ito = {"#000000", "#E69F00", "#56B4E9", "#009E73", "#F0E442", "#0072B2", "#D55E00", "#CC79A7"}
    assert set(viz.PALETTE) == okabe_ito and len(viz.PALETTE) == 8


def test_bundle_in_a_kernel_has_widget_view_and_html(tmp_path):
    """Run in a real kernel (as Jupyter, nbval and the book build do): three mime types."""
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(
        "import course_lib.viz as viz\n"
        "def draw(ax, t):\n"
        "    ax.plot([0, 1], [0, t]); ax.set(xlabel='x', ylabel='y')\n"
        "viz.slider_plot(draw, [1, 2, 3], 't', title='Lines')")]
    nbclient.NotebookClient(nb, kernel_name="python3", timeout=120,
                            resources={"metadata": {"path": str(tmp_path)}}).execute()
    (out,) = nb.cells[0].outputs
    data = out["data"]
    assert set(data) == {"text/plain", "text/html", "application/vnd.jupyter.widget-view+json"}
    assert len(parse_static(data["text/html"])["states"]) == 3
    model_id = data["application/vnd.jupyter.widget-view+json"]["model_id"]
    state = nb.metadata["widgets"]["application/vnd.jupyter.widget-state+json"]["state"]
    assert state[model_id]["model_name"] == "VBoxModel"
    # the kernel's static HTML is the same bytes as here: notebooks re-run to the same output
    here = viz.slider_plot(lambda ax, t: (ax.plot([0, 1], [0, t]), ax.set(xlabel="x", ylabel="y")),
                           [1, 2, 3], "t", title="Lines")
    assert data["text/html"] == here.to_html()


def test_gradient_check_figure_shows_where_a_gradient_is_wrong():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((4, 5))
    n = a.copy()
    n[2, 3] += 1.0
    fig = viz.gradient_check(a, n, "W")
    err_ax = fig.axes[2]
    err = err_ax.images[0].get_array()
    assert np.unravel_index(np.argmax(err), err.shape) == (2, 3)
    assert err[2, 3] > -1 and np.delete(err.ravel(), 2 * 5 + 3).max() <= -15
    assert "relative error" in fig._suptitle.get_text()
    with pytest.raises(ValueError, match="differ in shape"):
        viz.gradient_check(a, n[:2], "W")
