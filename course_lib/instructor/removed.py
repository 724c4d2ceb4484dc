"""While grading, the sandbox's course_lib has no working version of the exercise being graded:
each of its solutions (and what holds one) is replaced by a call of `removed`, which records the
call and raises SolutionRemoved (a BaseException: a learner's `except Exception` lets it pass).
See course_lib.instructor.stripped."""

calls = []      # the names called since the worker last cleared it


class SolutionRemoved(BaseException):
    def __init__(self, name):
        super().__init__(f"{name} is not there while grading")
        self.name = name


def removed(name):
    calls.append(name)
    raise SolutionRemoved(name)
