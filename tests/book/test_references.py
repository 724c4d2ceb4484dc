"""Every reference a notebook makes is one the learner can open: each repository file it names
(`course_lib/kernels/softmax.py`, `benchmarks/results-2026-11.md`) exists, and each mention of
the README names a section the README has, by its heading (the README's section "Commands").
A README section that moves, or a file that is renamed, fails here instead of in a learner's
hands."""
import json
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
FILE = re.compile(r"`([\w.-]+(?:/[\w.-]+)*\.(?:md|ipynb|py|txt|toml|yml|json|csv))`")
README_SECTION = re.compile(r"README's section \"([^\"]+)\"")


def _texts(path):
    """(cell index, text) of each cell's source and of its outputs' text."""
    for i, cell in enumerate(json.loads(path.read_text(encoding="utf-8"))["cells"]):
        yield i, "".join(cell.get("source", ""))
        for out in cell.get("outputs", []):
            yield i, "".join(out.get("text", "")) + "".join(out.get("data", {}).get("text/plain", ""))


def _repository_files():
    listed = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return set(listed.split())


@pytest.fixture(scope="module")
def files():
    return _repository_files()


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_every_file_a_notebook_names_is_in_the_repository(path, files):
    """A path from the repository's root (or notebooks/); a bare name, a file of that name anywhere."""
    names = {Path(f).name for f in files}
    missing = [(i, ref) for i, text in _texts(path) for ref in FILE.findall(text)
               if not ({ref, f"notebooks/{ref}"} & files or "/" not in ref and ref in names)]
    assert not missing, missing


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_every_mention_of_the_readme_names_a_section_it_has(path):
    headings = {line.lstrip("#").strip() for line in (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
                if line.startswith("#")}
    wrong = []
    for i, text in _texts(path):
        mentions = [m.start() for m in re.finditer(r"README(?!\.md)", text)]     # data/README.md: a file
        sections = {m.start(): m[1] for m in README_SECTION.finditer(text)}
        for at in mentions:
            section = sections.get(at)
            if section not in headings:
                wrong.append((i, text[max(at - 40, 0):at + 60]))
    assert not wrong, wrong
