"""The instructors' tools, one module each; none is imported here, so that a learner's import of
course_lib never loads the grader.

    edition.py            the student edition: solutions replaced by stubs (python -m course_lib.edition)
    execute.py            store a notebook executed from a fresh kernel (python -m course_lib.instructor.execute)
    exercises.py          the exercises a notebook sets, read from its cells
    grade.py, sandbox.py  grade a class, each notebook in a scratch copy and a kernel of its own
    gradescope_bundle.py  Gradescope's autograder bundle; gradescope.py runs it for each submission
    command.py            the grade command (python -m course_lib grade)
"""
