"""Helpers shared by the tests of ``bot/``."""

from __future__ import annotations

from collections.abc import Sequence

from bot.store import Store, TurnRecord
from retrieval.models import Answer


def save_turn(store: Store, workspace: str, channel: str, thread_ts: str, message_ts: str, user_id: str,
              answer: Answer, collections: Sequence[str], reply_ts: str | None = None) -> int:
    """Record an exchange as the bot does once its reply is out, the thread joined, but for no claimed
    question (no event key: no question is ended); its id."""
    claim = store.reclaim(workspace, thread=(channel, thread_ts), collections=())
    turn = TurnRecord(claim.turn_id, channel, thread_ts, message_ts, user_id, answer, tuple(collections))
    store.finish_question(workspace, "", turn, reply_ts)
    return claim.turn_id
