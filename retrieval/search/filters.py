"""The collection/document filter shared by every retrieval leg, rendered as a SQL condition."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Scope:
    """Which chunks a search may return: all, or only some collections and/or document names."""

    collections: tuple[str, ...] = ()
    documents: tuple[str, ...] = ()

    @classmethod
    def of(cls, collections: Sequence[str] | None = None, documents: Sequence[str] | None = None) -> Scope:
        return cls(tuple(collections or ()), tuple(documents or ()))

    def sql(self, chunk: str = "c", doc: str = "d") -> str:
        """A condition over ``chunk`` (chunks) and ``doc`` (documents, joined on collection and id),
        with the named placeholders ``%(scope_collections)s`` / ``%(scope_documents)s`` (see
        ``params``). "true" when unfiltered. Use with ``from_clause`` so the join is present.
        """
        return self._where(f"{chunk}.collection", f"{doc}.name")

    def documents_sql(self, doc: str = "d") -> str:
        """The same filter over ``documents`` alone (for statistics kept per document)."""
        return self._where(f"{doc}.collection", f"{doc}.name")

    def _where(self, collection: str, name: str) -> str:
        where: list[str] = []
        if self.collections:
            where.append(f"{collection} = ANY(%(scope_collections)s)")
        if self.documents:
            where.append(f"{name} = ANY(%(scope_documents)s)")
        return " AND ".join(where) or "true"

    def params(self) -> dict[str, object]:
        return {"scope_collections": list(self.collections), "scope_documents": list(self.documents)}

    @property
    def needs_documents(self) -> bool:
        return bool(self.documents)

    def from_clause(self, chunk: str = "c", doc: str = "d") -> str:
        """``chunks c`` joined to ``documents d`` only when the filter needs document names."""
        join = f" JOIN documents {doc} ON {doc}.collection = {chunk}.collection AND {doc}.id = {chunk}.document_id"
        return f"chunks {chunk}{join if self.needs_documents else ''}"
