"""Where a secret could end up: every text column of every table, and any other text (logs, payloads)."""

from __future__ import annotations

import json
from typing import Any

import psycopg
from psycopg import sql

TEXT_TYPES = ("text", "varchar", "bpchar", "json", "jsonb", "_text", "_varchar", "name")


def database_hits(url: str, needle: str) -> list[str]:
    """``table.column`` of every text-like column (text, varchar, json/jsonb, text[]) of every table in
    the public schema whose value contains ``needle`` in any row."""
    hits: list[str] = []
    with psycopg.connect(url, autocommit=True) as conn:
        cols = conn.execute(
            "SELECT c.table_name, c.column_name FROM information_schema.columns c "
            "JOIN information_schema.tables t ON t.table_schema = c.table_schema AND t.table_name = c.table_name "
            "WHERE c.table_schema = 'public' AND t.table_type = 'BASE TABLE' AND c.udt_name = ANY(%s) "
            "ORDER BY 1, 2", (list(TEXT_TYPES),)).fetchall()
        assert cols, "no text columns found: the scan would prove nothing"
        for table, column in cols:
            found = conn.execute(sql.SQL("SELECT 1 FROM {} WHERE strpos({}::text, %s) > 0 LIMIT 1").format(
                sql.Identifier(table), sql.Identifier(column)), (needle,)).fetchone()
            if found:
                hits.append(f"{table}.{column}")
    return hits


def text_of(*things: Any) -> str:
    """Everything, as one string (objects as JSON)."""
    return "\n".join(t if isinstance(t, str) else json.dumps(t, default=str, ensure_ascii=False) for t in things)
