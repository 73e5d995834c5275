"""No question lost when a bot process dies while answering it.

Each question is claimed with its text, owner and a heartbeat (``Store.claim_question``, migration
0017). This keeper, one thread per bot process:
- refreshes the heartbeat of the questions this process is answering (every ``BEAT_S``);
- at start, adopts the questions of predecessors on this host that are gone (dead PID), and every
  ``BEAT_S`` those of any process whose heartbeat is older than ``STALE_S`` (another host):
  each is answered again in place of its "Looking through…" placeholder, or, after
  ``bot.answer.MAX_ATTEMPTS``, the person is asked to ask again. So an interrupted question gets a
  reply within about a minute of another process being up.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from bot.answer import Answering, Question
from bot.workers import WorkerPool
from retrieval.store.db import DatabaseError

log = logging.getLogger(__name__)

BEAT_S = 10.0
STALE_S = 45.0  # no heartbeat for this long: the process answering it is gone


class InFlightKeeper:
    def __init__(self, answering: Answering, answers: WorkerPool, *, stale_s: float = STALE_S) -> None:
        self.answering, self.answers, self.stale_s = answering, answers, stale_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="in-flight", daemon=True)

    def start(self) -> InFlightKeeper:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def adopt(self, *, starting: bool = False) -> int:
        """Take over interrupted questions and queue their answers; how many."""
        rows = self.answering.store.adopt_questions(self.stale_s, starting=starting)
        for row in rows:
            q = question_of(row["question"])
            if q is None:
                log.warning("interrupted question %s cannot be read; dropped", row["event_key"])
                self.answering.store.finish_question(str(row["workspace"]), str(row["event_key"]), None, None)
                continue
            log.warning("question %s was interrupted in a stopped process; answering it here", q.key)
            self.answers.submit(self.answering.resume, q, row["placeholder_ts"], int(row["attempts"]), anyway=True)
        return len(rows)

    def _loop(self) -> None:
        starting = True
        while True:
            try:
                self.adopt(starting=starting)
                starting = False
                self.answering.store.beat_questions(self.answering.in_flight())
                self.answering.retry_done()
            except DatabaseError as exc:
                log.info("in-flight questions not checked: %s", exc)
            except Exception:  # noqa: BLE001  (the keeper must keep going)
                log.exception("in-flight check failed")
            if self._stop.wait(BEAT_S):
                return


def question_of(record: Any) -> Question | None:
    try:
        return Question(**{k: str(record[k]) for k in ("team", "channel", "user", "text", "ts", "thread_ts")})
    except (KeyError, TypeError):
        return None
