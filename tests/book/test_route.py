"""The route (course_lib.instructor.route): the times that the notebooks' headers, the book's
introduction and the README state are the ones computed from the notebooks now."""
import pathlib
import re

import nbformat
import pytest

from course_lib.instructor import route

ROOT = pathlib.Path(__file__).resolve().parents[2]
NOTEBOOKS = route.notebooks(ROOT / "notebooks")
ROUTES = {p.stem: route.route(p) for p in NOTEBOOKS}


def test_every_notebook_is_on_the_route():
    assert len(NOTEBOOKS) == 12
    assert all(r.exercises > 0 and r.reading > 0 for r in ROUTES.values())


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem[:2])
def test_the_header_states_the_computed_time(path):
    title = nbformat.read(path, as_version=4).cells[0].source
    stated = [line for line in title.split("\n\n") if line.startswith(route.TIME)]
    assert stated == [route.header_line(ROUTES[path.stem])], (
        f"{path.name}: its Time line is not what the notebook takes now; "
        "run python -m course_lib.instructor.route --write")


def test_the_introduction_has_the_table():
    intro = (ROOT / "book" / "intro.md").read_text(encoding="utf-8")
    assert route.table(list(ROUTES.values())) in intro, (
        "book/intro.md: the route's table is out of date; paste python -m course_lib.instructor.route")


def test_the_readme_states_each_notebooks_time():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    rows = {m.group(1): m.group(2) for m in
            re.finditer(r"^\| (\d\d) \| \[[^]]+\]\([^)]+\) \| [^|]+ \| [^|]+ \| ([^|]+) \|", readme, re.M)}
    assert rows == {stem[:2]: f"{route.duration(r.total)} ({route.duration(r.core)})"
                    for stem, r in ROUTES.items()}


def test_a_deep_dive_leaves_the_core_path():
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("# 99 · A title\n\none two three"),
        nbformat.v4.new_markdown_cell("## Core\n\n" + "word " * 800),
        nbformat.v4.new_markdown_cell("### Exercise 99.1: a thing\n\n★☆☆ · about 10 minutes"),
        nbformat.v4.new_markdown_cell(f"## Later\n\n{route.DEEP_DIVE} Skip me.*\n\n" + "word " * 400),
        nbformat.v4.new_markdown_cell("### Exercise 99.2: another\n\n★★☆ · about 20 minutes $x^2$"),
    ])
    r = route.Route("99_x", route.sections(nb))
    assert [s.title for s in r.sections] == ["", "Core", "Later"]
    assert r.exercises == 30 and r.skippable == ["Later"]
    # the title (6 words), the core section (801) and its exercise (8), read; and its 10 minutes
    assert r.core == pytest.approx((6 + 801 + 8) / route.WORDS_PER_MINUTE + 10)
    assert "skip the deep dive *Later*" in route.header_line(r)


@pytest.mark.parametrize("minutes, text", [(3, "5 min"), (52, "50 min"), (58, "1 h"),
                                           (64, "1 h 05 min"), (1349, "22 h 30 min")])
def test_duration(minutes, text):
    assert route.duration(minutes) == text
