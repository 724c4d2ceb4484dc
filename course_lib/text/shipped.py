"""The texts the course ships in data/, found from the package itself.

A notebook that opened "../data/kjv.txt" would work only from the notebooks folder: the student
edition is written to another folder, and a build may run elsewhere. course_lib is installed from
the repository (pip install -e .), so data/ is always beside the package:

    path = shipped_text()            # data/kjv.txt, the King James Bible's thirteen books
"""
from pathlib import Path

DATA = Path(__file__).resolve().parents[2] / "data"


def shipped_text(name="kjv.txt"):
    """The path of a text in the repository's data/ folder. FileNotFoundError, in one line, when
    course_lib is not installed from a clone of the repository (data/ is not in the wheel)."""
    path = DATA / name
    if not path.is_file():
        raise FileNotFoundError(f"{name} is not in {DATA}: the course's texts ship in the "
                                f"repository's data/ folder; install course_lib from a clone "
                                f"(pip install -e .)")
    return path
