"""`python -m course_lib.edition SRC_DIR OUT_DIR`, the command the README and the book give
learners and instructors: the student edition. The code is course_lib/instructor/edition.py."""
import sys

from .instructor.edition import main, make_student_edition  # noqa: F401

if __name__ == "__main__":
    sys.exit(main())
