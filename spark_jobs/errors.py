"""Errors a person can act on."""


class UsageError(Exception):
    """A bad value given by a person (job name, path, trigger, format, ...).

    The CLI prints its message on one line and exits with status 2; the message names the bad value
    and what to do instead.
    """
