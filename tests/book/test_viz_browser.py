"""The static (kernel-free) widget plot works in a real browser: moving a control swaps the frame."""
import base64

import numpy as np
import pytest

from conftest_browser import browser, severe_console_errors, wait_until  # noqa: F401  (fixture)
from course_lib import viz


def line(ax, slope):
    ax.plot([0, 1], [0, slope])
    ax.set(xlabel="x", ylabel="y", ylim=(-3, 3), title="a line")


def page(tmp_path, *fragments, name="page.html"):
    """An HTML file holding the fragments on a dark page (as in a dark book theme)."""
    path = tmp_path / name
    body = "\n".join(f"<section>{f}</section>" for f in fragments)
    path.write_text(f'<!doctype html><html><head><meta charset="utf-8"><title>t</title></head>'
                    f'<body style="background:#121212;color:#eee">{body}</body></html>', encoding="utf-8")
    return path.as_uri()


def shown_png(img):
    src = img.get_attribute("src")
    assert src.startswith("data:image/png;base64,")
    return base64.b64decode(src.split(",", 1)[1])


def test_slider_moves_through_frames(browser, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    plot = viz.slider_plot(line, [-2, -1, 0, 1, 2], "slope", title="Lines")
    browser.get(page(tmp_path, plot.to_html()))
    root = browser.find_element(By.CSS_SELECTOR, "div.clwp")
    slider = root.find_element(By.CSS_SELECTOR, "input[type=range]")
    img = root.find_element(By.CSS_SELECTOR, "img.clwp-frame")
    readout = root.find_element(By.CSS_SELECTOR, "output")
    assert shown_png(img) == plot.frames[(0,)]
    assert readout.text == "-2"
    # readable on a dark page: the plot sits on white
    assert root.value_of_css_property("background-color") in ("rgba(255, 255, 255, 1)", "rgb(255, 255, 255)")
    assert img.size["width"] > 100 and img.size["height"] > 100  # the image decoded and is shown

    slider.click()  # focus; a click may also move the thumb to the middle
    slider.send_keys(Keys.HOME)
    slider.send_keys(Keys.ARROW_RIGHT)
    wait_until(browser, lambda d: img.get_attribute("data-frame") == "1", message="frame did not change")
    assert shown_png(img) == plot.frames[(1,)] != plot.frames[(0,)]
    assert readout.text == "-1"
    assert img.get_attribute("alt") == "Lines: slope = -1"

    slider.send_keys(Keys.END)
    wait_until(browser, lambda d: img.get_attribute("data-frame") == "4")
    assert shown_png(img) == plot.frames[(4,)]
    assert readout.text == "2"

    slider.send_keys(Keys.HOME)  # back to the first frame, which the JSON does not repeat
    wait_until(browser, lambda d: img.get_attribute("data-frame") == "0")
    assert shown_png(img) == plot.frames[(0,)]
    assert not severe_console_errors(browser)


def test_two_controls_and_two_plots_on_one_page(browser, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    def draw(fig, causal, scale):
        m = np.arange(16.0).reshape(4, 4) * scale
        viz.heatmap(np.tril(m) if causal else m, None, None, "scores", "value",
                    ax=fig.add_subplot(), vmin=0, vmax=30)

    plot = viz.widget_plot(draw, {"causal": [False, True], "scale": [1, 2]}, title="Mask")
    html = plot.to_html()
    browser.get(page(tmp_path, html, html))  # the same output twice: each works on its own
    first, second = browser.find_elements(By.CSS_SELECTOR, "div.clwp")
    img1 = first.find_element(By.CSS_SELECTOR, "img.clwp-frame")
    img2 = second.find_element(By.CSS_SELECTOR, "img.clwp-frame")

    first.find_element(By.CSS_SELECTOR, "input[type=checkbox]").click()
    wait_until(browser, lambda d: img1.get_attribute("data-frame") == "2")
    assert shown_png(img1) == plot.frames[(1, 0)]
    assert shown_png(img2) == plot.frames[(0, 0)]  # the other copy did not move

    slider = second.find_element(By.CSS_SELECTOR, "input[type=range]")
    slider.send_keys(Keys.END)
    wait_until(browser, lambda d: img2.get_attribute("data-frame") == "1")
    assert shown_png(img2) == plot.frames[(0, 1)]
    assert shown_png(img1) == plot.frames[(1, 0)]
    assert not severe_console_errors(browser)


def test_without_javascript_the_first_frame_still_shows(tmp_path):
    """A reader with scripts off still sees a labelled figure (the initial state)."""
    plot = viz.slider_plot(line, [1, 2], "slope", title="Lines")
    html = plot.to_html()
    head = html.split("<script", 1)[0]
    assert 'alt="Lines: slope = 1"' in head
    assert base64.b64encode(plot.frames[(0,)]).decode() in head


if __name__ == "__main__":  # pragma: no cover
    pytest.main([__file__, "-q"])
