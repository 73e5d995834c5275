"""Per-person question rate limit (``CHAPTERVERSE_SLACK_USER_QUESTIONS_PER_MINUTE``): a sliding window.

In memory, per bot process: it protects the answer workers and the model provider from one person
(or a script under their name) flooding the bot; it needs no database, so it also holds while the
database is down. A redelivered event (same message key) is not counted twice.
"""

from __future__ import annotations

import threading
import time
from collections import deque

WINDOW_S = 60.0


class RateLimiter:
    def __init__(self, per_window: int) -> None:
        self.per_window = per_window
        self._seen: dict[tuple[str, str], deque[tuple[float, str]]] = {}
        self._lock = threading.Lock()

    def allow(self, team: str, user: str, key: str) -> bool:
        """Whether ``user`` may ask now; counts the question (``key``: its message) when allowed."""
        now = time.monotonic()
        with self._lock:
            recent = self._seen.setdefault((team, user), deque())
            while recent and recent[0][0] <= now - WINDOW_S:
                recent.popleft()
            if any(k == key for _, k in recent):
                return True  # the same message again (Slack redelivers): not a new question
            if len(recent) >= self.per_window:
                return False
            recent.append((now, key))
            if len(self._seen) > 10_000:  # forget people who have been quiet for a window
                self._seen = {who: q for who, q in self._seen.items() if q and q[-1][0] > now - WINDOW_S}
            return True
