"""Errors a person can act on."""


class UsageError(Exception):
    """A bad value given by a person (job name, path, trigger, format, ...).

    The CLI prints its message on one line and exits with status 2; the message names the bad value
    and what to do instead.
    """


def positive_int(text: str, flag: str) -> int:
    """``text`` as a whole number >= 1.

    :raises UsageError: naming ``flag`` and the bad text.
    """
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise UsageError(f"{flag} must be a whole number >= 1, got {text!r}")
    return value


class RegistryError(ValueError):
    """A registry declaration that contradicts itself, raised when the registry loads.

    The message names the job, the table, the field, the bad value and the fix.
    """
