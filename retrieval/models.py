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
    untrusted: bool = False  # text addressed to an AI reader (prompt injection): never evidence


class SearchResult(BaseModel):
    query: str
    results: list[Passage]
    reranker: str  # which reranker actually ran ("none" when none)
    timings_ms: dict[str, float] = Field(default_factory=dict)
    named_documents: list[str] = Field(default_factory=list)  # named by title in the query: searched first
    server: str = ""  # which database answered: "primary host:port" or "replica N host:port"


class Citation(BaseModel):
    """A verified quote as shown to users: the source's own words, never the model's."""

    document: str
    page: int = Field(ge=1, description="1-based PDF page index")
    page_label: str | None = None
    quote: str
    url: str | None = None  # opens the PDF at that page (…#page=N)
    # "ocr" or "scan-layer" when the page's words were read by OCR: the quote was checked against that
    # reading, not against the page image (ingest.reading)
    read_by: str = "text"
    ocr_doubtful: list[str] = Field(default_factory=list)  # numbers in the quote OCR read with low confidence

    @property
    def ocr_note(self) -> str:
        """For a quote from a page read by OCR, 'read by OCR' and the numbers it was unsure of; else empty."""
        if self.read_by == "text":
            return ""
        unsure = f"; unsure of {', '.join(self.ocr_doubtful)}: check the page" if self.ocr_doubtful else ""
        return f"read by OCR{unsure}"


class NearestPassage(BaseModel):
    """A passage that was searched, listed with refusals so a person can look for themselves."""

    document: str
    page: int = Field(ge=1)
    page_label: str | None = None
    url: str | None = None
    snippet: str = ""


class Turn(BaseModel):
    """One earlier exchange in a conversation (a Slack thread), for follow-up questions."""

    question: str
    answer: str = ""


class ShownPage(BaseModel):
    """One page (or slice of it) an answerer was shown."""

    document: str
    page: int
    chars: int


class Answer(BaseModel):
    """What `ask` returns: an answer with at least one verified citation, or a refusal."""

    question: str
    refusal: bool
    answer: str = ""
    reason: str = ""
    citations: list[Citation] = Field(default_factory=list)
    nearest: list[NearestPassage] = Field(default_factory=list)
    standalone_question: str | None = None  # the follow-up rewritten to stand alone, if it was
    answerer: str = ""
    reranker: str = ""
    models: dict[str, str] = Field(default_factory=dict)
    timings_ms: dict[str, float] = Field(default_factory=dict)
    server: str = ""  # which database answered: "primary host:port" or "replica N host:port"
    dropped_citations: int = 0  # model citations removed by verification
    proposed_citations: int = 0  # citations the answerer offered (including the repair pass)
    repaired: bool = False  # a repair pass ran because a proposed quote failed verification
    evidence_score: float | None = None  # the extractive answerer's best evidence score
    reader_agreement: float | None = None  # its second judge's probability for that sentence if it ranks it first too, else 0
    warnings: list[str] = Field(default_factory=list)  # e.g. Gemini failed, answered extractively
    named_documents: list[str] = Field(default_factory=list)  # the question names them by title: searched first
    best_evidence: NearestPassage | None = None  # extractive: where its best sentence was (also when refusing)
    # matching passages set aside as text addressed to AI assistants (prompt injection); never quoted
    untrusted: list[NearestPassage] = Field(default_factory=list)
    shown_pages: list[ShownPage] = Field(default_factory=list)  # what the answerer was shown, in order
    model_calls: int = 0  # requests sent to a model for this question (rewrite, answer, repair, retries)
    unsupported_dropped: int = 0  # verified model quotes dropped because the reader doubted them
    withheld: list[str] = Field(default_factory=list)  # what a withheld model answer text stated unbacked
    withheld_text: str = ""  # that text (for evaluation and logs; never shown to users)
