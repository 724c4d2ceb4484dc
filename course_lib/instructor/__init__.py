"""The instructors' tools, one module each; none is imported here, so that a learner's import of
course_lib never loads the grader. Which exercises there are, where they sit in a notebook and
the limits their code runs under are course_lib.exercises' (`yours` reads them too).

    edition.py            the student edition: solutions replaced by stubs (python -m course_lib.edition)
    execute.py            store a notebook executed from a fresh kernel (python -m course_lib.instructor.execute)
    route.py              each notebook's time and core path, from its cells (python -m course_lib.instructor.route)
    grade.py              grade a class: a report row per exercise
    judge_runner.py       one notebook: starts its judge, against the notebook's time limit
    judge.py              the checkers, on stand-ins for the learner's functions
    worker.py             the learner's exercise cells, in a sandbox (sandbox.py: bubblewrap,
                          a user id of its own, or neither), on a course_lib without the
                          exercise's solution (stripped.py; removed.py stands in its place);
                          it talks with the judge over channel.py
    gradescope_bundle.py  Gradescope's autograder bundle; gradescope.py runs it for each submission
    command.py            the grade command (python -m course_lib grade)
"""
