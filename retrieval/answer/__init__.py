"""Answering: one question end to end (``ask``), the answerers (``answerers/``: extractive, Gemini,
OpenAI-compatible, follow-ups), quote verification against the page text (``verify``), false-premise
checks (``premise``) and what a reader is shown (``answer_view``)."""
