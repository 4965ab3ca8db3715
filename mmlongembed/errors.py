"""Errors a user can act on: printed as one line, never as a traceback."""


class UserError(Exception):
    """Bad input or configuration. The CLI prints the message alone and exits with code 2."""

    exit_code = 2


class FitError(ValueError):
    """A document cannot be fitted to a token budget. Callers count it as a skip reason."""

    def __init__(self, reason: str, detail: str = ""):
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
