"""The model drawn by cl.viz.block_diagram / model_diagram: every name on it is one the model has,
the drawing follows the configuration's switches, it carries alt text, and the book's copies are
what the code draws now."""
import base64
import pathlib
import re

import matplotlib
import pytest

import course_lib as cl
from course_lib.viz import architecture, stations

ROOT = pathlib.Path(__file__).resolve().parents[2]
CONFIGS = {
    "course model": cl.presets.deep_dive(),
    "pre-LN, causal, tied, learned positions": cl.presets.deep_dive(
        norm="pre", causal=True, tie_embeddings=True, positional="learned", attn_bias=True),
    "gpt2": cl.presets.gpt2(),
    "no attention": cl.presets.deep_dive(use_attention=False),
    "no FFN, no positions": cl.presets.deep_dive(use_ffn=False, positional="none"),
    "no residual, no LayerNorm": cl.presets.deep_dive(use_residual=False, use_layernorm=False),
    "no blocks": cl.presets.deep_dive(n_layers=0),
}


@pytest.mark.parametrize("name", CONFIGS)
@pytest.mark.parametrize("backward", [False, True])
def test_every_config_draws_with_names_the_model_has(name, backward):
    config = CONFIGS[name]
    for diagram in (cl.viz.model_diagram(config, backward=backward),
                    cl.viz.block_diagram(config, backward=backward)):
        assert diagram.png.startswith(b"\x89PNG")
        assert diagram.alt.startswith("Backward" if backward else "Forward")


def test_a_station_the_model_does_not_have_fails(monkeypatch):
    real = stations.block_stations

    def renamed(cfg):
        drawn, forks = real(cfg)
        drawn[1].saved = ("attn.scores",)           # block.py keeps attn.weights, not this
        return drawn, forks

    monkeypatch.setattr(stations, "block_stations", renamed)
    with pytest.raises(cl.viz.DiagramError, match="attn.scores"):
        cl.viz.block_diagram()


def test_the_order_follows_the_layernorm_placement():
    post = cl.viz.block_diagram(norms="post").alt
    pre = cl.viz.block_diagram(norms="pre").alt
    assert "multi-head attention -> add the skip path -> LN1 -> feed-forward" in post
    assert "LN1 -> multi-head attention -> add the skip path -> LN2 -> feed-forward" in pre
    back = cl.viz.block_diagram(norms="post", backward=True).alt
    assert "the gradient flows y -> LN2 -> add the skip path -> feed-forward" in back
    assert "forks the gradients of the skip path and of the sublayer add" in back


def test_switches_remove_what_they_remove():
    assert "feed-forward" not in cl.viz.block_diagram(CONFIGS["no FFN, no positions"]).alt
    bare = cl.viz.block_diagram(CONFIGS["no residual, no LayerNorm"]).alt
    assert "skip" not in bare and "LN1" not in bare
    assert "LN_f" in cl.viz.model_diagram(CONFIGS["gpt2"]).alt
    assert "LN_f" not in cl.viz.model_diagram().alt
    deep = cl.viz.model_diagram(cl.presets.deep_dive(n_layers=8)).alt
    assert "block 1 -> ... -> block 7" in deep
    assert "tied" in cl.viz.model_diagram(CONFIGS["gpt2"]).alt


def test_shown_as_an_image_with_its_alt_text():
    d = cl.viz.block_diagram(highlight="attn")
    html = d._repr_html_()
    png = re.search(r'src="data:image/png;base64,([^"]+)"', html).group(1)
    assert base64.b64decode(png) == d.png
    assert 'alt="Forward, bottom to top. post-LN block: x -&gt; multi-head attention' in html
    assert repr(d).startswith("<Diagram: Forward")


def test_the_same_bytes_every_time_and_in_any_matplotlib_style():
    first = cl.viz.model_diagram().png
    with matplotlib.style.context("dark_background"):
        assert cl.viz.model_diagram().png == first
    assert cl.viz.model_diagram(highlight="head").png != first


@pytest.mark.parametrize("bad, error, match", [
    ({"config": {"n_layers": 2}}, TypeError, "must be a cl.ModelConfig"),
    ({"highlight": "attention"}, ValueError, "highlight 'attention' is unknown; allowed: attn"),
    ({"norms": "middle"}, ValueError, "norms must be 'post', 'pre' or both"),
])
def test_bad_input_is_one_line(bad, error, match):
    with pytest.raises(error, match=match):
        cl.viz.block_diagram(**bad)
    with pytest.raises(ValueError, match="max_blocks must be an integer >= 3, got 2"):
        cl.viz.model_diagram(max_blocks=2)


@pytest.mark.parametrize("name", architecture.BOOK_IMAGES)
def test_the_book_images_are_what_the_code_draws(name):
    stored = (ROOT / "book" / "images" / name).read_bytes()
    assert stored == architecture.BOOK_IMAGES[name]().png, (
        f"book/images/{name} is out of date: redraw it with "
        "python -c 'import course_lib.viz.architecture as a; a.save_book_images(\"book/images\")'")
