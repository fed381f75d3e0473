"""Logging set-up shared by every command: concise lines on stderr."""

from __future__ import annotations

import logging
import os
import warnings


def setup_logging(verbose: bool = False) -> None:
    level = logging.DEBUG if verbose else logging.INFO
    logging.basicConfig(
        level=level,
        format="%(asctime)s %(levelname).1s %(name)s: %(message)s",
        datefmt="%H:%M:%S",
        force=True,
    )
    for handler in logging.getLogger().handlers:  # no credential from a URL reaches a log
        handler.addFilter(RedactFilter())
    # Third-party chatter that hides our own progress lines.
    for name in ("httpx", "urllib3", "filelock", "datasets", "transformers", "accelerate"):
        logging.getLogger(name).setLevel(logging.WARNING if not verbose else logging.INFO)
    if not verbose:
        os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
        warnings.filterwarnings("ignore", category=FutureWarning)


class RedactFilter(logging.Filter):
    """Masks user info and secret parameters of any URL in a record (chunkwise.redact)."""

    def filter(self, record: logging.LogRecord) -> bool:
        from chunkwise.redact import redact

        try:
            message = record.getMessage()
        except Exception:  # a malformed record: leave it to the handler to report
            return True
        clean = redact(message)
        if clean != message:
            record.msg, record.args = clean, ()
        return True


def get_logger(name: str) -> logging.Logger:
    return logging.getLogger(name)
