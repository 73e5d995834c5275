"""`python -m bot [-v]`: run the Slack bot."""

from __future__ import annotations

import sys

from bot.main import main

if __name__ == "__main__":
    sys.exit(main(verbose="-v" in sys.argv[1:] or "--verbose" in sys.argv[1:]))
