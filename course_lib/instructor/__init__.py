"""The instructors' tools, one module each; none is imported here, so that a learner's import of
course_lib never loads the grader.

    edition.py            the student edition: solutions replaced by stubs (python -m course_lib.edition)
    execute.py            store a notebook executed from a fresh kernel (python -m course_lib.instructor.execute)
    exercises.py          the exercises a notebook sets, read from its cells
    route.py              each notebook's time and core path, from its cells (python -m course_lib.instructor.route)
    grade.py              grade a class: a report row per exercise
    sandbox.py            one notebook: starts its judge, against the notebook's time limit
    judge.py              the checkers, on stand-ins for the learner's functions
    worker.py             the learner's exercise cells, in a sandbox (isolation.py: bubblewrap,
                          a user id of its own, or neither), on a course_lib without the
                          exercise's solution (stripped.py); it talks with the judge over channel.py
    limits.py             time, memory and disk limits on Linux, macOS and Windows
    gradescope_bundle.py  Gradescope's autograder bundle; gradescope.py runs it for each submission
    command.py            the grade command (python -m course_lib grade)
"""
