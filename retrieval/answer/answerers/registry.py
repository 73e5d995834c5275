"""Answerers found by name: which one a question gets, and building it from the settings.

``REGISTRY`` maps each name to a factory ``(settings, profile) -> Answerer``; the model answerers import
their provider client only when built, and come wrapped in ``fallback.Fallback`` (the extractive
answerer answers when the model fails). ``choose_answerer`` applies the configuration rule (the name
asked for, else ``CHAPTERVERSE_ANSWERER``, else Gemini when a key is set, else extractive).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from retrieval.answer.answerers import ANSWERERS, Answerer
from retrieval.answer.answerers.fallback import Fallback
from retrieval.profile import Profile
from retrieval.settings import Settings

log = logging.getLogger(__name__)


def _gemini(settings: Settings, profile: Profile) -> Answerer:
    from retrieval.answer.answerers.model.gemini import GeminiAnswerer  # noqa: PLC0415  (imports google-genai)

    return Fallback(GeminiAnswerer(settings, profile), lambda: build_extractive(settings, profile))


def _openai(settings: Settings, profile: Profile) -> Answerer:
    from retrieval.answer.answerers.model.openai_compat import OpenAICompatAnswerer  # noqa: PLC0415  (imports openai)

    return Fallback(OpenAICompatAnswerer(settings, profile), lambda: build_extractive(settings, profile))


def choose_answerer(settings: Settings, name: str | None) -> str:
    """The answerer asked for, else the ``answerer`` setting, else ``gemini`` when a key is
    configured, else ``extractive``."""
    name = name or settings.answer.answerer
    if name in ANSWERERS:
        return name
    if name:
        raise ValueError(f"unknown answerer {name!r} (use {', '.join(repr(a) for a in ANSWERERS)})")
    return "gemini" if settings.answer.gemini_api_key is not None else "extractive"


def build_answerer(settings: Settings, name: str, profile: Profile) -> Answerer:
    """The answerer registered under ``name``, reading with ``profile``."""
    return REGISTRY[name](settings, profile)


def build_extractive(settings: Settings, profile: Profile, threshold: float | None = None) -> Answerer:
    """The extractive answerer reading with ``profile`` (the searched collections'), the reader as its
    second judge when the reader's weights load; ``threshold`` overrides its refusal threshold (the
    calibration in ``chapterverse_lab.answer_eval`` builds one with it disabled and passes it to ``ask``)."""
    from retrieval.answer.answerers.extractive import ExtractiveAnswerer  # noqa: PLC0415
    from retrieval.encode.embed import get_embedder  # noqa: PLC0415

    embedder = get_embedder(settings.search.embedding_model)
    return ExtractiveAnswerer(embedder.embed_queries, model=embedder.name, profile=profile, threshold=threshold,
                              judge=sentence_reader(settings), word_pieces=embedder.word_pieces,
                              file_base_url=settings.ingest.file_base_url)


def sentence_reader(settings: Settings, purpose: str = "answer"):
    """The trained reader: the extractive answerer's second judge ('answer'), or the model path's
    support check ('support': only when ``quote_support_check``); None when not wanted or when its
    weights do not load (the log says why)."""
    if purpose == "support" and not settings.answer.quote_support_check:
        return None
    from retrieval import reader  # noqa: PLC0415

    try:
        return reader.load_reader(reader.reader_dir(settings.answer.reader_model))
    except reader.ReaderError as exc:
        instead = "the evidence score alone accepts quotes" if purpose == "answer" else "model quotes are not support-checked"
        log.warning("reader unavailable (%s); %s", exc, instead)
        return None


REGISTRY: dict[str, Callable[[Settings, Profile], Answerer]] = {
    "gemini": _gemini, "openai": _openai, "extractive": build_extractive}
assert set(REGISTRY) == set(ANSWERERS)
