"""Errors a user can act on: printed as one line, never as a traceback."""

import sys

ERROR_PREFIX = "mmle: error: "  # how every command's error line begins (build, score, push, ...)


class UserError(Exception):
    """Bad input or configuration. The CLI prints the message alone and exits with code 2."""

    exit_code = 2


def report_error(error: BaseException | str) -> int:
    """Print ``error`` as the one line every command ends with (``mmle: error: ...``, on stderr);
    the exit code it calls for (a UserError's, else 2)."""
    print(f"{ERROR_PREFIX}{error}", file=sys.stderr)
    return getattr(error, "exit_code", UserError.exit_code)


class FitError(ValueError):
    """A document cannot be fitted to a token budget. Callers count it as a skip reason."""

    def __init__(self, reason: str, detail: str = ""):
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
