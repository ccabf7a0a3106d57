"""Errors meant for people.

Every expected failure (bad input, a missing run, a step that cannot work on a host)
raises a :class:`TunepathError` whose message says what failed, where, and what to
do. The CLI prints it as one line and exits with status 2; anything else is a bug
and keeps its traceback.
"""


class TunepathError(Exception):
    """An expected failure, worded for the person running the command."""


def is_expected(exc: BaseException) -> bool:
    return isinstance(exc, TunepathError)
