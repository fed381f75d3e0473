"""Errors that reach the user as one clear line (exit code 2)."""


class ChunkwiseError(Exception):
    """Base class for errors caused by the user's input or environment.

    The CLI prints ``str(error)`` on one line and exits with code 2; anything else is a bug
    and keeps its traceback.
    """


class BadInput(ChunkwiseError):
    """A file, argument or record that cannot be used as given."""


class MissingDependency(ChunkwiseError):
    """An optional package or file a backend needs is not installed."""

    def __init__(self, what: str, install_hint: str):
        super().__init__(f"{what} is not available: {install_hint}")


class LLMRequestError(ChunkwiseError):
    """A backend gave up on a request after its retries."""


class BadParams(BadInput, ValueError):
    """Decoding settings that cannot be used (``--temperature nan``, ``top_p=2``, ...).

    Also a ``ValueError``, so code that validates parameters with ``except ValueError`` keeps
    working; uncaught, the CLI prints it as one line and exits 2 like any bad input.
    """
