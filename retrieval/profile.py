"""Language/domain profiles: every word list the answerers use, as data.

Each field's description says what the words are for. None of them live in code; they are the
``profile`` section of a preset (``retrieval/presets/*.json``, read by ``retrieval.settings``).

The ``default`` preset is meant for English technical manuals in general — regulations and
handbooks (feet, knots, minutes) as well as software manuals (bytes, pixels, characters, lines,
identifiers such as ``x11()``, ``%in%``, ``set xrange``). ``german`` gives German stopwords, units,
question words, answer wording and Postgres' German text search.

``text_search`` names the Postgres text-search configuration: a document's chunks are indexed with
its collection's at ingest (``chunks.ts_config``, ``documents.text_search``), and a question is parsed
with every configuration its scope's documents were indexed with.
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, field_validator

from retrieval.text.injection import rules

PRESETS = Path(__file__).resolve().parent / "presets"

Classes = tuple[str, ...] | None  # unit classes a question word asks for (None: any stated number)


class PremiseWords(BaseModel):
    """What a question that states the answer it wants confirmed looks like, in one language
    (``retrieval.answer.premise``): "[the] handbook says [that] X is N", "according to the POH, X
    is N", "Is X N?", with a tail such as ", please confirm" or ", right?"."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    determiners: tuple[str, ...] = Field(description='"the", "this", "your": before the source')
    sources: tuple[str, ...] = Field(description='what a question cites: "handbook", "manual", "POH" (plural -s too)')
    claim_verbs: tuple[str, ...] = Field(description='"says", "states", "shows": the source claiming')
    that: tuple[str, ...] = Field(description='"that" after the verb')
    according_to: tuple[str, ...] = Field(description='"according to" (then a source and a comma)')
    copulas: tuple[str, ...] = Field(description='"is", "are", "equals": between the subject and its figure')
    hedges: tuple[str, ...] = Field(description='"about", "only": before the figure')
    question_openers: tuple[str, ...] = Field(description='"is", "are", "isn\'t": a yes/no question stating a figure')
    confirm_openers: tuple[str, ...] = Field(description='"please", "can you": before a confirm verb')
    confirm_verbs: tuple[str, ...] = Field(description='"confirm", "verify": asking for agreement')
    confirm_tags: tuple[str, ...] = Field(description='"right?", "correct?", "isn\'t it?" at the end')
    question: str = Field(description='the question asked instead, with {subject}: "What is {subject}?"')
    note: str = Field(description="the reply's note when no quote states the claimed figure, with {claimed}")


class Profile(BaseModel):
    """The word lists and wording of one language/domain (see the module docstring)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    stopwords: frozenset[str] = Field(description="words that carry no content")
    units: dict[str, tuple[str, ...]] = Field(
        description="unit class → the words (lower case) that state a measure of that kind after a number")
    how_words: dict[str, Classes] = Field(
        description='"how X" → the unit classes an answer may use (null: any stated number)')
    measure_nouns: dict[str, Classes] = Field(
        description='a noun after "what/which/maximum…" that asks for a quantity → its unit classes')
    how_openers: frozenset[str] = Field(description='"how" before a how-word ("how long")')
    amount_words: frozenset[str] = Field(description='"how much": with a money verb, asks for money')
    count_words: frozenset[str] = Field(description='"how many": the words after it name what is counted')
    money_verbs: frozenset[str] = Field(description="verbs that make \"how much\" ask for money")
    wh_words: frozenset[str] = Field(description='"what", "which"')
    extreme_words: frozenset[str] = Field(description='"maximum", "lowest", "default": ask for one value')
    number_words: frozenset[str] = Field(description="numbers written as words")
    reference_after: frozenset[str] = Field(description='"14 CFR": a number before these is a citation')
    reference_before: frozenset[str] = Field(
        description='"part 61", "Table 3": a number after these is a reference, not a quantity')
    document_words: frozenset[str] = Field(
        description="title words that say what kind of document it is rather than which one (never name it)")
    months: frozenset[str] = Field(description="month names and abbreviations (a number after one is a date)")
    followup_openers: tuple[str, ...] = Field(
        description="a follow-up that opens with one of these continues the previous question")
    pronouns: frozenset[str] = Field(description="words a follow-up leans on the previous question with")
    negations: frozenset[str] = Field(description="words that turn a statement round (checked in model answers)")
    lowercase_sentence_starts: bool = Field(
        description='a sentence may open in lower case after ". ", "? " or "! " ("refresh redraws the plot.", '
                    '"x11() opens a window."), except after an abbreviation')
    abbreviations: frozenset[str] = Field(
        description='words ending in "." that do not end a sentence before a lower-case word')
    text_search: str = Field(
        pattern=r"^[a-z_]+$",
        description="the Postgres text-search configuration of the collection's chunks and of questions "
                    "asked of it ('english', 'german', 'french', … as Postgres ships them)")
    premise: PremiseWords = Field(description="how a question states a figure it wants confirmed")
    injection: tuple[str, ...] = Field(
        min_length=1, description="the prompt-injection rule sets (retrieval/presets/injection/<name>.json) the "
                                  "collection's pages and questions are checked with")
    answer_lead: str = Field(description="opens the extractive answer")
    more_quoted: str = Field(description="after the answer when further quotes follow")

    @field_validator("injection")
    @classmethod
    def _rule_sets_compile(cls, names: tuple[str, ...]) -> tuple[str, ...]:
        rules(names)  # RulesError (a ValueError) names the missing or broken rule set
        return names


DEFAULT_PROFILE = Profile.model_validate(
    json.loads((PRESETS / "default.json").read_text(encoding="utf-8"))["profile"])
