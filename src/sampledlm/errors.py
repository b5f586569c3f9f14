"""The one exception type that the command line turns into a one-line message.

Library code raises :class:`UserError` for anything the *user* can fix (a missing file,
bad bytes on line 12, a vocabulary that does not match a model). The CLI prints
``sampledlm: error: <message>`` and exits with status 1, never a traceback. Anything
else that escapes is a bug in sampledlm and keeps its traceback.
"""


class UserError(Exception):
    """An error caused by input the user controls; the message names the file (and line).

    ``every_rank``: every process of a torchrun job raises the same error at the same point (a checkpoint written by
    another number of ranks), so the command line prints it from rank 0 only rather than once per rank."""

    def __init__(self, *args, every_rank: bool = False):
        super().__init__(*args)
        self.every_rank = every_rank


class InputWarning(UserWarning):
    """Input that is read, but likely not as its author meant (a NUL byte mid-file); the message names the file and
    line. The command line prints it as ``sampledlm: warning: <message>``; a program sees a Python warning."""


class TrainingInterrupted(KeyboardInterrupt):
    """Raised by training after the checkpoint written on an interrupt is complete (its message says how to
    resume). ``exit_code``: 128 + the signal that stopped it, the shell's convention (130 for Ctrl-C, 143 for
    SIGTERM, as a batch scheduler sends)."""

    def __init__(self, message: str = "", signum: int = 2):
        super().__init__(message)
        self.exit_code = 128 + int(signum)


class Terminated(KeyboardInterrupt):
    """SIGTERM (a batch scheduler's stop, ``timeout``) or SIGHUP (the terminal closed) raised as an interrupt in a
    command that has no handler of its own, so that it cleans up as Ctrl-C does (temporary files, standard input's
    copy and spill directories removed). ``exit_code``: 128 + the signal (143 for SIGTERM, 129 for SIGHUP)."""

    def __init__(self, message: str = "", signum: int = 15):
        super().__init__(message)
        self.exit_code = 128 + int(signum)
