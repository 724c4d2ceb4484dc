"""Counts and lists in messages: '1 step', '2 steps'; '1, 2, 5 or 10'."""


def count(n, noun, plural=None, fmt=""):
    """'1 step', '0 steps', '1,234 characters' (fmt ',') : the noun agrees with n."""
    return f"{n:{fmt}} {noun if n == 1 else plural or noun + 's'}"


def one_of(values):
    """'1', '1 or 7', '1, 2, 5 or 10': the values as a list in a sentence."""
    values = [str(v) for v in values]
    return values[0] if len(values) == 1 else ", ".join(values[:-1]) + " or " + values[-1]
