"""The book builds without warnings, and every page in _toc.yml is in the output.

Runs `jupyter-book build book -W --keep-going --path-output <tmp>` from the repository
root, as an instructor would, but into a temporary directory so that the working tree's
`_build/` is left alone. The book shows the notebooks' stored outputs (nbval proves they
re-run to the same output), so the build executes nothing.
"""
import subprocess
import sys
from pathlib import Path

import pytest

from conftest_browser import browser  # noqa: F401  (fixture)

jupyter_book = pytest.importorskip(
    "jupyter_book", reason="jupyter-book is not installed; the book build cannot be tested"
)
yaml = pytest.importorskip("yaml", reason="PyYAML is needed to read _toc.yml")

ROOT = Path(__file__).resolve().parents[2]
TOC = ROOT / "_toc.yml"
BUILD_TIMEOUT = 10 * 60   # seconds

# The same interpreter as pytest, so the build uses this environment's jupyter-book.
JB_CMD = [sys.executable, "-c",
          "import sys; from jupyter_book.cli.main import main; sys.exit(main())"]


def toc_files(toc_path=TOC):
    """Every `file:` entry of a jb-book table of contents, root first, in order."""
    toc = yaml.safe_load(toc_path.read_text(encoding="utf8"))
    files = [toc["root"]]

    def walk(entries):
        for entry in entries or []:
            if "file" in entry:
                files.append(entry["file"])
            walk(entry.get("sections"))

    for part in toc.get("parts", []):
        walk(part.get("chapters"))
    walk(toc.get("chapters"))
    return files


def _page_name(entry):
    """'notebooks/01_x' or 'notebooks/01_x.ipynb' -> 'notebooks/01_x'."""
    return str(Path(entry).with_suffix("")) if Path(entry).suffix in {".md", ".ipynb"} else entry


@pytest.fixture(scope="module")
def built_html(tmp_path_factory):
    out = tmp_path_factory.mktemp("book")
    cmd = JB_CMD + ["build", "book", "-W", "--keep-going", "--builder", "html",
                    "--path-output", str(out)]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=BUILD_TIMEOUT)
    log = (proc.stdout + proc.stderr)[-6000:]
    assert proc.returncode == 0, f"book build failed (exit {proc.returncode}):\n{log}"
    html = out / "_build" / "html"
    assert html.is_dir(), f"no HTML output in {html}:\n{log}"
    return html


def test_toc_lists_front_pages_and_notebooks():
    files = [_page_name(f) for f in toc_files()]
    assert files[0] == "intro"
    for page in ["setup", "notation", "glossary", "references", "instructors"]:
        assert page in files, f"{page} missing from _toc.yml"
    notebooks = [f for f in files if f.startswith("notebooks/")]
    assert notebooks, "no notebooks listed in _toc.yml"
    for nb in notebooks:
        assert (ROOT / f"{nb}.ipynb").is_file(), f"_toc.yml lists {nb}, but {nb}.ipynb does not exist"


def test_every_toc_page_is_built(built_html):
    missing = [f for f in map(_page_name, toc_files())
               if not (built_html / f"{f}.html").is_file()]
    assert not missing, f"pages listed in _toc.yml but not built: {missing}"


def test_notebook_pages_show_exercises_with_collapsed_solutions(built_html):
    """Every 'Exercise N.k' heading of a notebook (code and derivation exercises) is on its page,
    and each solution cell (the code between ### BEGIN SOLUTION and ### END SOLUTION) is
    collapsed behind a toggle."""
    import json
    import re
    notebooks = [f for f in map(_page_name, toc_files()) if f.startswith("notebooks/")]
    for nb in notebooks:
        cells = json.loads((ROOT / f"{nb}.ipynb").read_text(encoding="utf8"))["cells"]
        headings = [m.group(1) for c in cells if c["cell_type"] == "markdown"
                    for m in re.finditer(r"^#+ (Exercise \d+\.\d+)", "".join(c["source"]), re.M)]
        solutions = [c for c in cells if c["cell_type"] == "code" and "### BEGIN SOLUTION" in "".join(c["source"])]
        assert len(solutions) >= 2 and len(headings) >= len(solutions), (nb, headings, len(solutions))
        assert all("hide-input" in c["metadata"].get("tags", []) for c in solutions), (
            f"{nb}: a solution is not collapsed")
        page = (built_html / f"{nb}.html").read_text(encoding="utf8")
        missing = [h for h in headings if h not in page]
        assert not missing, f"{nb}: exercises missing from the built page: {missing}"
        assert page.count("tag_hide-input") >= len(solutions), f"{nb}: solutions are not collapsed on the page"


def test_built_page_slider_changes_the_figure(built_html, browser):
    """On a built notebook page (no kernel), moving a widget plot's slider shows another frame."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    from conftest_browser import wait_until

    notebooks = [f for f in map(_page_name, toc_files()) if f.startswith("notebooks/")]
    checked = 0
    for nb in notebooks:
        browser.get((built_html / f"{nb}.html").as_uri())
        plots = browser.find_elements(By.CSS_SELECTOR, "div.clwp")
        assert plots, f"{nb}: no kernel-free widget plot on the built page"
        slider = next((el for p in plots for el in p.find_elements(By.CSS_SELECTOR, "input[type=range]")), None)
        if slider is None:
            continue
        img = slider.find_element(By.XPATH, "ancestor::div[contains(@class, 'clwp')]//img")
        browser.execute_script("arguments[0].scrollIntoView({block: 'center'});", slider)
        slider.send_keys(Keys.HOME)
        before = img.get_attribute("src")
        slider.send_keys(Keys.END)
        wait_until(browser, lambda d: img.get_attribute("src") != before, message=f"{nb}: the figure did not change")
        checked += 1
    assert checked, "no built notebook page has a slider"


# Resources a page asked for from another host; the test blocks them all (file:// pages only).
_REMOTE_LOADS = ("return performance.getEntriesByType('resource').map(e => e.name)"
                 ".filter(u => !u.startsWith('file:') && !u.startsWith('data:'));")
_MATH_STATE = """
const done = arguments[arguments.length - 1];
const typeset = (window.MathJax && MathJax.startup) ? MathJax.startup.promise : Promise.resolve();
typeset.then(() => {
  const math = Array.from(document.querySelectorAll('.math'));
  done({mathjax: !!(window.MathJax && MathJax.startup), math: math.length,
        raw: math.filter(m => !m.querySelector('mjx-container')).map(m => m.textContent.slice(0, 60)),
        details: document.querySelectorAll('details').length,
        open: Array.from(document.querySelectorAll('details')).filter(d => d.open).length});
});
"""


def test_every_page_works_offline_formulas_typeset_and_answers_collapsed(built_html, browser):
    """With every request to another host blocked, each page of the book loads nothing from the
    network, typesets every formula (MathJax ships with the book), and shows each answer
    (<details>) collapsed until its summary is clicked."""
    from selenium.webdriver.common.by import By

    browser.execute_cdp_cmd("Network.enable", {})
    browser.execute_cdp_cmd("Network.setBlockedURLs", {"urls": ["http://*", "https://*", "ws://*", "wss://*"]})
    try:
        pages_with_math = pages_with_answers = 0
        for page in map(_page_name, toc_files()):
            browser.get((built_html / f"{page}.html").as_uri())
            state = browser.execute_async_script(_MATH_STATE)
            assert state["mathjax"] or not state["math"], f"{page}: MathJax did not load"
            assert not state["raw"], f"{page}: formulas left as raw TeX: {state['raw'][:3]}"
            assert not browser.execute_script(_REMOTE_LOADS), f"{page}: loads from another host"
            pages_with_math += state["math"] > 0
            assert state["open"] == 0, f"{page}: an answer is open before it is clicked"
            if page.startswith("notebooks/"):
                assert state["details"] >= 3, f"{page}: answers are not in <details>"
                answer = browser.find_elements(By.CSS_SELECTOR, "details")[-1]
                body = answer.find_element(By.XPATH, "./*[not(self::summary)]")
                assert not body.is_displayed(), f"{page}: a collapsed answer is visible"
                summary = answer.find_element(By.TAG_NAME, "summary")
                browser.execute_script("arguments[0].scrollIntoView({block: 'center'});", summary)
                summary.click()
                assert answer.get_attribute("open") is not None and body.is_displayed(), page
                pages_with_answers += 1
        assert pages_with_math >= 4 and pages_with_answers >= 3
    finally:
        browser.execute_cdp_cmd("Network.setBlockedURLs", {"urls": []})


# The pages that show the model drawn by cl.viz.architecture: the book's files, and cell outputs.
DRAWN = {"intro": 2, "notebooks/03_single_head_attention": 1, "notebooks/05_residuals_and_layernorm": 1,
         "notebooks/07_stacking_and_output_head": 2, "notebooks/10_backprop_whole_model": 2}


def test_the_model_drawings_show_with_their_alt_text(built_html, browser):
    """Each drawing of the model is an image that loaded (its natural width is not 0) and
    describes itself in its alt text, on the introduction and on the notebook pages."""
    from selenium.webdriver.common.by import By

    for page, count in DRAWN.items():
        browser.get((built_html / f"{page}.html").as_uri())
        drawn = [img for img in browser.find_elements(By.CSS_SELECTOR, "img")
                 if "architecture-" in (img.get_attribute("src") or "")
                 or (img.get_attribute("alt") or "").startswith(("Forward, bottom to top",
                                                                 "Backward, top to bottom"))]
        assert len(drawn) == count, f"{page}: {len(drawn)} drawings of the model, expected {count}"
        for img in drawn:
            assert browser.execute_script("return arguments[0].naturalWidth", img) > 300, page
            assert len(img.get_attribute("alt")) > 80, f"{page}: a drawing without a description"
