"""What readers could not get answered: refused questions and 👎-voted answers from Slack, grouped by
the document that came nearest, with counts and links to the threads (`chapterverse digest`,
`/chapterverse digest`).

Read from what the bot already stores (``bot.store``): ``bot_turns`` (every question, its answer or
refusal, the full ``Answer`` as JSON) and ``bot_feedback`` (one vote per person per answer).

- A **refused** question counts when it was asked inside the window. Its document is where the
  answerer found its best, not good enough, evidence (``best_evidence``), else the first of the
  nearest passages listed with the refusal; a refusal that listed nothing goes under "no document".
- A **👎 answer** is an answer (not a refusal) whose current votes include a 👎 cast inside the
  window (a vote changed back to 👍 no longer counts). Its document is its first quote's.
- Refusals caused by a failure (the index unavailable, an error while answering) say nothing about
  the documents: they are counted apart, under ``errors``.

- A **stale answer** is a past answer whose document was replaced (ingested again with new bytes)
  inside the window, after the answer was given, and whose quote from it is no longer in the new
  edition's text (compared after ``retrieval.text.textnorm.normalize``, across the document's pages):
  what the thread says the manual says, it no longer says.

Links: with the workspace's address known (``bot_workspaces``, recorded by the bot at start), each
item links to the question's message in its thread (``https://acme.slack.com/archives/C…/p…``);
otherwise to the channel (``https://slack.com/app_redirect?team=…&channel=…``).
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from bot.render import escape, fallback, sections
from retrieval.answer.answer_view import page_words
from retrieval.settings import Settings

log = logging.getLogger(__name__)

# How ask() words a refusal that is a failure, not an answer (retrieval/answer/ask.py)
ERROR_REASONS = ("The index is unavailable", "Something went wrong while answering", "The answerer is unavailable",
                 "The search model is unavailable", "The question is empty")
_DURATION = re.compile(r"\s*(\d+(?:\.\d+)?)\s*(m|min|h|d|w)\s*", re.IGNORECASE)
_UNITS = {"m": 60, "min": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
SLACK_CHANNEL_LINK = "https://slack.com/app_redirect?team={team}&channel={channel}"
CHECK_S = 3600.0  # how often the digest poster looks for due posts

QUERY = """
SELECT t.workspace, t.id, t.channel, t.thread_ts, t.message_ts, t.user_id, t.question, t.answer, t.refusal,
       t.collections, t.created_at, t.result, w.url AS workspace_url,
       coalesce(v.down, 0) AS downvotes, coalesce(v.up, 0) AS upvotes, v.last_down
FROM bot_turns t
LEFT JOIN LATERAL (
    SELECT count(*) FILTER (WHERE f.rating < 0) AS down, count(*) FILTER (WHERE f.rating > 0) AS up,
           max(f.updated_at) FILTER (WHERE f.rating < 0) AS last_down
    FROM bot_feedback f WHERE f.workspace = t.workspace AND f.turn_id = t.id) v ON true
LEFT JOIN bot_workspaces w ON w.workspace = t.workspace
WHERE ((t.refusal AND t.created_at >= %(since)s) OR (NOT t.refusal AND v.last_down >= %(since)s))
  AND (%(collection)s::text IS NULL OR %(collection)s = ANY(t.collections))
  AND (%(workspace)s::text IS NULL OR t.workspace = %(workspace)s)
ORDER BY t.created_at, t.id
"""


STALE_QUERY = """
SELECT t.workspace, t.id, t.channel, t.thread_ts, t.message_ts, t.user_id, t.question, t.answer, t.collections,
       t.created_at, t.result, w.url AS workspace_url, d.collection AS doc_collection, d.id AS document_id,
       d.name AS document, d.title, d.ingested_at
FROM bot_turns t
JOIN documents d ON d.collection = ANY(t.collections) AND d.ingested_at > t.created_at AND d.ingested_at >= %(since)s
LEFT JOIN bot_workspaces w ON w.workspace = t.workspace
WHERE NOT t.refusal
  AND EXISTS (SELECT 1 FROM jsonb_array_elements(coalesce(t.result->'citations', '[]'::jsonb)) c
              WHERE c->>'document' = d.name)
  AND (%(collection)s::text IS NULL OR %(collection)s = ANY(t.collections))
  AND (%(workspace)s::text IS NULL OR t.workspace = %(workspace)s)
ORDER BY d.ingested_at, t.created_at, t.id
"""


class BadSince(ValueError):
    """--since that is neither a duration (7d, 12h, 2w, 30m) nor a date."""


def parse_since(text: str, now: datetime | None = None) -> datetime:
    """"7d", "12h", "2w", "90m" back from now, or an ISO date/time ("2026-12-01", UTC unless it says)."""
    now = now or datetime.now(UTC)
    m = _DURATION.fullmatch(text)
    if m:
        return now - timedelta(seconds=float(m.group(1)) * _UNITS[m.group(2).lower()])
    try:
        when = datetime.fromisoformat(text.strip())
    except ValueError:
        raise BadSince(f"--since {text!r}: use a duration (7d, 12h, 2w, 90m) or a date (2026-12-01)") from None
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def thread_link(team: str, channel: str, thread_ts: str, message_ts: str, workspace_url: str | None) -> tuple[str, str]:
    """(link, what it opens: "thread" or "channel")."""
    if workspace_url:
        base = workspace_url if workspace_url.endswith("/") else workspace_url + "/"
        link = f"{base}archives/{channel}/p{message_ts.replace('.', '')}"
        if message_ts != thread_ts:
            link += f"?thread_ts={thread_ts}&cid={channel}"
        return link, "thread"
    return SLACK_CHANNEL_LINK.format(team=team, channel=channel), "channel"


def _iso(when: datetime) -> str:
    return when.astimezone(UTC).isoformat(timespec="seconds")


def _asked(r: dict[str, Any]) -> dict[str, Any]:
    """An item's question: its text, when and where it was asked, by whom, and the link to it."""
    link, opens = thread_link(r["workspace"], r["channel"], r["thread_ts"], r["message_ts"], r["workspace_url"])
    return {"question": r["question"], "asked_at": _iso(r["created_at"]), "workspace": r["workspace"],
            "channel": r["channel"], "thread_ts": r["thread_ts"], "message_ts": r["message_ts"],
            "user": r["user_id"], "link": link, "link_opens": opens}


def _nearest(result: dict[str, Any], refusal: bool) -> dict[str, Any] | None:
    """{document, page, page_label} the item is grouped under, or None."""
    near = result.get("nearest" if refusal else "citations") or []
    best = result.get("best_evidence") if refusal else None
    if best and best.get("document"):
        label = next((n.get("page_label") for n in near
                      if n.get("document") == best["document"] and n.get("page") == best.get("page")), None)
        return {"document": best["document"], "page": best.get("page"), "page_label": label}
    if not near:
        return None
    return {"document": near[0]["document"], "page": near[0].get("page"), "page_label": near[0].get("page_label")}


@dataclass
class Group:
    document: str | None
    title: str | None = None
    refused: int = 0
    downvoted: int = 0
    items: list[dict[str, Any]] = field(default_factory=list)


def _titles(conn: psycopg.Connection, names: Sequence[str]) -> dict[str, str]:
    rows = conn.execute("SELECT DISTINCT ON (name) name, title FROM documents WHERE name = ANY(%s) "
                        "ORDER BY name, ingested_at DESC", [list(names)]).fetchall()
    return {r["name"]: r["title"] for r in rows if r["title"]}


def stale_answers(conn: psycopg.Connection, since: datetime, *, collection: str | None = None,
                  workspace: str | None = None) -> list[dict[str, Any]]:
    """Past answers quoting a document replaced since ``since`` (after they were given) whose quotes
    are no longer in its new text; one item per answer and document, oldest replacement first."""
    from retrieval.text.textnorm import normalize  # noqa: PLC0415

    texts: dict[tuple[str, int], str] = {}
    out: list[dict[str, Any]] = []
    for r in conn.execute(STALE_QUERY, {"since": since, "collection": collection, "workspace": workspace}).fetchall():
        key = (r["doc_collection"], r["document_id"])
        if key not in texts:
            pages = conn.execute("SELECT text FROM pages WHERE collection = %s AND document_id = %s ORDER BY page_no",
                                 key).fetchall()
            texts[key] = normalize("\n".join(p["text"] for p in pages))
        cites = [c for c in (r["result"] or {}).get("citations") or [] if c.get("document") == r["document"]]
        missing = [c for c in cites if normalize(str(c.get("quote") or "")) not in texts[key]]
        if not missing:
            continue
        out.append({"kind": "stale", **_asked(r), "answer": r["answer"], "replaced_at": _iso(r["ingested_at"]),
                    "document": r["document"], "title": r["title"], "collection": r["doc_collection"],
                    "missing_quotes": [{"page": c.get("page"), "page_label": c.get("page_label"),
                                        "quote": c.get("quote")} for c in missing],
                    "page": missing[0].get("page"), "page_label": missing[0].get("page_label")})
    return out


def digest(conn: psycopg.Connection, since: datetime, *, collection: str | None = None,
           workspace: str | None = None, now: datetime | None = None) -> dict[str, Any]:
    """The digest as one JSON-ready dict: totals, documents (most items first), errors."""
    now = now or datetime.now(UTC)
    rows = conn.execute(QUERY, {"since": since, "collection": collection, "workspace": workspace}).fetchall()
    groups: dict[str | None, Group] = {}
    errors: list[dict[str, Any]] = []
    for r in rows:
        result = r["result"] or {}
        reason = str(result.get("reason") or (r["answer"] if r["refusal"] else ""))
        near = _nearest(result, r["refusal"])
        item = {"kind": "refused" if r["refusal"] else "downvoted", **_asked(r), "collections": list(r["collections"]),
                "reason": reason if r["refusal"] else "", "answer": "" if r["refusal"] else r["answer"],
                "page": near["page"] if near else None, "page_label": near["page_label"] if near else None,
                "downvotes": int(r["downvotes"]), "upvotes": int(r["upvotes"])}
        if r["refusal"] and reason.startswith(ERROR_REASONS):
            item["kind"] = "error"
            errors.append(item)
            continue
        key = near["document"] if near else None
        group = groups.setdefault(key, Group(key))
        group.items.append(item)
        if r["refusal"]:
            group.refused += 1
        else:
            group.downvoted += 1
    titles = _titles(conn, [k for k in groups if k]) if groups else {}
    for key, group in groups.items():
        group.title = titles.get(key)  # None for the "no document" group
    ordered = sorted(groups.values(), key=lambda g: (-(g.refused + g.downvoted), g.document is None, g.document or ""))
    stale = stale_answers(conn, since, collection=collection, workspace=workspace)
    return {"since": _iso(since), "until": _iso(now),
            "collection": collection, "workspace": workspace,
            "totals": {"refused": sum(g.refused for g in ordered), "downvoted": sum(g.downvoted for g in ordered),
                       "errors": len(errors), "documents": sum(1 for g in ordered if g.document),
                       "stale": len(stale)},
            "documents": [asdict(g) for g in ordered], "errors": errors, "stale": stale}


# ------------------------------------------------------------------------------------------ text
def _when(iso: str) -> str:
    return iso.replace("T", " ")[:16]


def _page(item: dict[str, Any]) -> str:
    return "" if item["page"] is None else page_words(item["page"], item["page_label"])


def _counts(refused: int, downvoted: int) -> str:
    return ", ".join(part for n, part in ((refused, f"{refused} refused"), (downvoted, f"{downvoted} 👎")) if n)


def _heading(d: dict[str, Any]) -> str:
    span = f"since {_when(d['since'])} UTC"
    scope = f" in collection {d['collection']!r}" if d["collection"] else ""
    t = d["totals"]
    return (f"Not answered{scope} {span}: {t['refused']} refused question{'s' if t['refused'] != 1 else ''}, "
            f"{t['downvoted']} 👎 answer{'s' if t['downvoted'] != 1 else ''}"
            + (f", {t['errors']} failed" if t["errors"] else "")
            + (f", {t['stale']} stale answer{'s' if t['stale'] != 1 else ''}" if t.get("stale") else ""))


STALE_HEADING = ("Answers now out of date (their document was replaced and no longer says what they quoted; "
                 "tell the thread)")


def _stale_name(it: dict[str, Any]) -> str:
    return it["title"] or it["document"]


def as_text(d: dict[str, Any]) -> str:
    """The digest for a terminal: one block per document, the items under it with their links."""
    lines = [_heading(d)]
    if not d["documents"] and not d["errors"] and not d.get("stale"):
        lines.append("Nothing: every question in this period was answered and no answer got a 👎.")
    for g in d["documents"]:
        name = (f"{g['title']} ({g['document']})" if g["title"] and g["title"] != g["document"]
                else g["document"] or "No document came close")
        lines.append(f"\n{name}: {_counts(g['refused'], g['downvoted'])}")
        for it in g["items"]:
            mark = "refused" if it["kind"] == "refused" else f"👎 ×{it['downvotes']}"
            where = f" · {'nearest' if it['kind'] == 'refused' else 'quoted'} {_page(it)}" if _page(it) else ""
            lines.append(f"  {_when(it['asked_at'])}  {mark}  “{fallback(it['question'], 160)}”{where}")
            lines.append(f"      {it['link']}")
    if d["errors"]:
        lines.append(f"\nNot answered because something failed (not about the documents): {len(d['errors'])}")
        for it in d["errors"]:
            lines.append(f"  {_when(it['asked_at'])}  “{fallback(it['question'], 160)}”: {fallback(it['reason'], 100)}")
            lines.append(f"      {it['link']}")
    if d.get("stale"):
        lines.append(f"\n{STALE_HEADING}: {len(d['stale'])}")
        for it in d["stale"]:
            lines.append(f"  {_when(it['asked_at'])}  “{fallback(it['question'], 160)}” quoted {_stale_name(it)} "
                         f"{_page(it)}, replaced {_when(it['replaced_at'])}: “{fallback(it['missing_quotes'][0]['quote'] or '', 100)}” "
                         "is no longer in it")
            lines.append(f"      {it['link']}")
    return "\n".join(lines)


def as_mrkdwn(d: dict[str, Any], *, max_documents: int = 10, max_items: int = 3) -> str:
    """The digest for Slack (an ephemeral reply): the top documents and a few items each, linked."""
    lines = [f"*{escape(_heading(d))}*"]
    if not d["documents"] and not d["errors"] and not d.get("stale"):
        lines.append("Nothing: every question in this period was answered and no answer got a 👎.")
    for g in d["documents"][:max_documents]:
        name = g["title"] or g["document"] or "No document came close"
        lines.append(f"\n*{escape(name)}*: {_counts(g['refused'], g['downvoted'])}")
        for it in g["items"][:max_items]:
            mark = "refused" if it["kind"] == "refused" else "👎"
            page = f" · {_page(it)}" if _page(it) else ""
            lines.append(f"• <{it['link']}|{escape(fallback(it['question'], 120)).replace('|', '¦')}> {mark}{page}")
        if len(g["items"]) > max_items:
            lines.append(f"  … and {len(g['items']) - max_items} more")
    if len(d["documents"]) > max_documents:
        lines.append(f"\n… and {len(d['documents']) - max_documents} more documents: `chapterverse digest` lists all.")
    if d["errors"]:
        lines.append(f"\n{len(d['errors'])} question(s) were not answered because something failed "
                     "(not about the documents).")
    if d.get("stale"):
        lines.append(f"\n*{escape(STALE_HEADING)}*: {len(d['stale'])}")
        for it in d["stale"][:max_documents]:
            lines.append(f"• <{it['link']}|{escape(fallback(it['question'], 120)).replace('|', '¦')}> "
                         f"quoted {escape(_stale_name(it))} {_page(it)}")
        if len(d["stale"]) > max_documents:
            lines.append(f"  … and {len(d['stale']) - max_documents} more: `chapterverse digest` lists all.")
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------ weekly post
def digest_channels(setting: str, workspace: str) -> list[str]:
    """The channels ``CHAPTERVERSE_SLACK_DIGEST_CHANNEL`` names for ``workspace``: plain ids apply to
    every workspace, 'T123:C456' entries only to T123."""
    entries = (entry.rpartition(":") for entry in re.split(r"[,\s]+", setting.strip()))
    return list(dict.fromkeys(channel for team, _, channel in entries if channel and team in ("", workspace)))


CLAIM = """
INSERT INTO bot_digest_posts (workspace, channel, posted_at) VALUES (%(workspace)s, %(channel)s, %(now)s)
ON CONFLICT (workspace, channel) DO UPDATE SET posted_at = excluded.posted_at
    WHERE bot_digest_posts.posted_at <= %(now)s - make_interval(secs => %(every)s)
RETURNING posted_at
"""


class DigestPoster:
    """Posts each workspace's digest of the last period to its digest channel once per period
    (``CHAPTERVERSE_SLACK_DIGEST_CHANNEL``, ``CHAPTERVERSE_SLACK_DIGEST_EVERY_S``). Workspaces are those the
    bot recorded at start (``bot_workspaces``). A period's post is claimed in Postgres before it is
    sent, so several bot processes and restarts post it once; a failed post is logged and waits for
    the next period (the digest is always there on demand: ``/chapterverse digest``)."""

    def __init__(self, settings: Settings, clients: Callable[[str], WebClient]) -> None:
        """``clients(team)``: the workspace's WebClient (``bot.clients.Clients``); due posts are looked
        for at start and every ``CHECK_S``."""
        self.settings, self.clients = settings, clients
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="digest-poster", daemon=True)

    def post_due(self, now: datetime | None = None) -> list[tuple[str, str]]:
        """Post every digest that is due; the (workspace, channel) pairs posted."""
        from retrieval.store import pool  # noqa: PLC0415

        now = now or datetime.now(UTC)
        every = self.settings.slack.digest_every_s
        posted: list[tuple[str, str]] = []
        with pool.connection(self.settings) as conn:
            teams = [r["workspace"] for r in conn.execute("SELECT workspace FROM bot_workspaces ORDER BY workspace")]
        for team in teams:
            for channel in digest_channels(self.settings.slack.digest_channel, team):
                with pool.connection(self.settings) as conn:
                    if conn.execute(CLAIM, {"workspace": team, "channel": channel, "now": now,
                                            "every": every}).fetchone() is None:
                        continue  # posted within the period (by this process or another)
                    d = digest(conn, now - timedelta(seconds=every), workspace=team, now=now)
                try:
                    self.clients(team).chat_postMessage(channel=channel, text=_heading(d), blocks=sections(as_mrkdwn(d)),
                                                        unfurl_links=False, unfurl_media=False)
                    posted.append((team, channel))
                except Exception as exc:  # noqa: BLE001  (Slack refused or unreachable: the next period)
                    error = exc.response.get("error") if isinstance(exc, SlackApiError) else type(exc).__name__
                    log.warning("could not post the digest to %s in %s: %s", channel, team, error)
        return posted

    def _loop(self) -> None:
        while True:
            try:
                self.post_due()
            except Exception:  # noqa: BLE001  (database down: the next check)
                log.warning("digest posting failed; trying again at the next check", exc_info=True)
            if self._stop.wait(CHECK_S):
                return

    def start(self) -> DigestPoster:
        """Start posting when a digest channel is configured (else nothing runs)."""
        if self.settings.slack.digest_channel.strip():
            self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
