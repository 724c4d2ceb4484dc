"""The learner's route, computed from the notebooks: each notebook's time (its text read at
WORDS_PER_MINUTE, plus the minutes its exercises state), its core path, and the sections that a
first reading can skip (those whose first cell starts a line with DEEP_DIVE).

    python -m course_lib.instructor.route           the route as a Markdown table
    python -m course_lib.instructor.route --write   also write each notebook's "**Time.**" line

tests/book/test_route.py fails when a notebook's header, the book's introduction or the README
states another time than this computes.
"""
from __future__ import annotations

import argparse
import re
from dataclasses import dataclass
from pathlib import Path

import nbformat

WORDS_PER_MINUTE = 80     # a careful reading of text with formulas, not a skim
DEEP_DIVE = "*Deep dive."
TIME = "**Time.**"        # the header's line that states the route
EPILOGUE = "12_"          # the notebook after the eleven stages
_MINUTES = re.compile(r"about (\d+) minutes")
_WORD = re.compile(r"[A-Za-z0-9]+(?:['’-][A-Za-z0-9]+)*")


@dataclass
class Section:
    title: str
    words: int = 0
    exercise_minutes: int = 0
    deep_dive: bool = False


@dataclass
class Route:
    """One notebook's route; times in minutes."""
    stem: str
    sections: list

    @property
    def reading(self):
        return sum(s.words for s in self.sections) / WORDS_PER_MINUTE

    @property
    def exercises(self):
        return sum(s.exercise_minutes for s in self.sections)

    @property
    def total(self):
        return self.reading + self.exercises

    @property
    def core(self):
        return sum(s.words / WORDS_PER_MINUTE + s.exercise_minutes
                   for s in self.sections if not s.deep_dive)

    @property
    def skippable(self):
        return [s.title for s in self.sections if s.deep_dive]


def _words(markdown):
    text = "\n".join(line for line in markdown.splitlines() if not line.startswith(TIME))
    text = re.sub(r"\$\$.*?\$\$|\$[^$\n]*\$", " ", text, flags=re.S)   # a formula is read, not counted
    return len(_WORD.findall(text))


def sections(nb) -> list:
    """The notebook's `## ` sections in order (the title cell's text is the first, untitled)."""
    out = [Section("")]
    for cell in nb.cells:
        if cell.cell_type != "markdown":
            continue
        for line in cell.source.splitlines():
            if line.startswith("## "):
                out.append(Section(line[3:].strip()))
            elif line.startswith(DEEP_DIVE):
                out[-1].deep_dive = True
        out[-1].words += _words(cell.source)
        if re.search(r"^### Exercise", cell.source, re.M):
            out[-1].exercise_minutes += sum(int(m) for m in _MINUTES.findall(cell.source))
    return out


def route(path) -> Route:
    path = Path(path)
    return Route(path.stem, sections(nbformat.read(path, as_version=4)))


def duration(minutes) -> str:
    """Minutes rounded to 5: '50 min', '1 h 05 min', '2 h'."""
    m = 5 * round(minutes / 5)
    if m < 60:
        return f"{m} min"
    return f"{m // 60} h" + (f" {m % 60:02d} min" if m % 60 else "")


def header_line(r: Route) -> str:
    """The line of a notebook's title cell that states its route."""
    line = (f"{TIME} About {duration(r.total)}: {duration(r.reading)} of reading (at "
            f"{WORDS_PER_MINUTE} words a minute) and {duration(r.exercises)} of exercises.")
    if r.skippable:
        names = [f"*{t}*" for t in r.skippable]
        listed = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
        line += (f" The core path is {duration(r.core)}: on a first reading you can skip the deep "
                 f"dive{'s' if len(names) > 1 else ''} {listed}, and come back to "
                 f"{'them' if len(names) > 1 else 'it'} later.")
    return line


def table(routes) -> str:
    """The book introduction's table of the route, with its total."""
    rows = ["| # | time | core path | reading | exercises | deep dives to skip on a first reading |",
            "|---|---|---|---|---|---|"]
    for r in routes:
        skip = "; ".join(r.skippable) or "none"
        rows.append(f"| {r.stem[:2]} | {duration(r.total)} | {duration(r.core)} | "
                    f"{duration(r.reading)} | {duration(r.exercises)} | {skip} |")
    stages = [r for r in routes if not r.stem.startswith(EPILOGUE)]
    for label, group in ((f"{stages[0].stem[:2]}-{stages[-1].stem[:2]}", stages), ("all", routes)):
        rows.append(f"| {label} | {duration(sum(r.total for r in group))} | "
                    f"{duration(sum(r.core for r in group))} | "
                    f"{duration(sum(r.reading for r in group))} | "
                    f"{duration(sum(r.exercises for r in group))} | |")
    return "\n".join(rows)


def write_header(path, r: Route) -> bool:
    """Put header_line(r) in the title cell, after its last paragraph; True if the file changed."""
    nb = nbformat.read(path, as_version=4)
    cell = nb.cells[0]
    kept = [p for p in cell.source.split("\n\n") if not p.startswith(TIME)]
    source = "\n\n".join(kept + [header_line(r)])
    if source == cell.source:
        return False
    cell.source = source
    nbformat.write(nb, path)
    return True


def notebooks(folder="notebooks"):
    return sorted(Path(folder).glob("[0-9][0-9]_*.ipynb"))


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m course_lib.instructor.route",
                                     description="The course's route and times, from the notebooks.")
    parser.add_argument("folder", nargs="?", default="notebooks")
    parser.add_argument("--write", action="store_true", help="write each notebook's Time line")
    args = parser.parse_args(argv)
    paths = notebooks(args.folder)
    if not paths:
        parser.error(f"no notebooks NN_*.ipynb in {args.folder}")
    routes = [route(p) for p in paths]
    if args.write:
        for p, r in zip(paths, routes):
            if write_header(p, r):
                print(f"wrote the Time line of {p}")
    print(table(routes))


if __name__ == "__main__":
    main()
