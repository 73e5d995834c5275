"""Pydantic models at the boundaries of the shared module (search results, answers, citations)."""

from __future__ import annotations

from pydantic import BaseModel, Field


class StageScores(BaseModel):
    """Where a passage stood in each retrieval stage (None: absent from that stage's list)."""

    keyword_rank: int | None = None
    keyword_score: float | None = None
    dense_rank: int | None = None
    dense_score: float | None = None
    fused_rank: int | None = None
    fused_score: float | None = None
    rerank_rank: int | None = None
    rerank_score: float | None = None


class Passage(BaseModel):
    """One retrieved chunk, with the full text of the page(s) it came from for verification."""

    chunk_id: int
    collection: str
    document: str  # file name as ingested
    document_url: str | None = None  # where the PDF can be opened (http(s) source or file base URL)
    page: int = Field(ge=1, description="1-based PDF page where the passage starts")
    page_end: int = Field(ge=1)
    page_label: str | None = None
    char_start: int
    char_end: int
    text: str  # the chunk text (raw page slices)
    context: str = ""  # section heading in force at the passage start
    score: float = 0.0  # final score used for ordering
    stages: StageScores = Field(default_factory=StageScores)


class SearchResult(BaseModel):
    query: str
    results: list[Passage]
    reranker: str  # which reranker actually ran ("none" when none)
    timings_ms: dict[str, float] = Field(default_factory=dict)
