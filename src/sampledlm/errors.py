"""The one exception type that the command line turns into a one-line message.

Library code raises :class:`UserError` for anything the *user* can fix (a missing file,
bad bytes on line 12, a vocabulary that does not match a model). The CLI prints
``sampledlm: error: <message>`` and exits with status 1, never a traceback. Anything
else that escapes is a bug in sampledlm and keeps its traceback.
"""


class UserError(Exception):
    """An error caused by input the user controls; the message names the file (and line)."""
