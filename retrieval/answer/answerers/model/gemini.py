"""The Gemini answerer (google-genai): structured output, validated with pydantic.

- The model gets the passages as data with ids (document, page) and must answer only from them.
- Output is requested as JSON for ``ModelAnswer`` (``response_schema``) and validated from
  ``response.text`` with pydantic: ``response.parsed`` silently gives None on bad JSON, and we want
  the reason. Blocked prompts, SAFETY stops and empty candidates give ``AnswererError``.
- Every call has an explicit timeout (``HttpOptions(timeout=ms)``). 429 and 5xx are retried with
  exponential backoff, or after exactly the server's ``retryDelay`` when it gives one (google.rpc.RetryInfo in the error
  details), bounded in total time: a retry that would end past the budget is not attempted.
- ``GOOGLE_GEMINI_BASE_URL`` is honoured by the client; a ``base_url`` can also be passed.
- One ``genai.Client`` per (API key, model, base URL, timeout) for the whole process (``client_for``,
  thread-safe), so its HTTP connection pool is reused and not leaked by every ``ask()``.
Errors never include the API key (google-genai sends it in a header, never in the URL).
"""

from __future__ import annotations

import logging
import os
import re
from typing import Any

import httpx
from google import genai
from google.genai import errors, types
from pydantic import BaseModel

from retrieval.answer.answerers import AnswererError
from retrieval.answer.answerers.model.structured import (
    BACKOFF_BASE_S,
    BACKOFF_MAX_S,
    DEFAULT_MAX_ATTEMPTS,
    ClientCache,
    RetryBudget,
    StructuredAnswerer,
)
from retrieval.settings import Settings

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT_S = 30.0  # per HTTP call
DEFAULT_RETRY_BUDGET_S = 45.0  # all attempts of one call, waits included


def _http_errors(name: str) -> tuple[type[BaseException], ...]:
    """The class ``name`` from httpx and, when installed, httpx2 (google-genai uses httpx2 if present)."""
    found: list[type[BaseException]] = [getattr(httpx, name)]
    try:
        import httpx2  # type: ignore[import-not-found]  # noqa: PLC0415

        found.append(getattr(httpx2, name))
    except (ImportError, AttributeError):
        pass
    return tuple(found)


TRANSPORT_ERRORS = _http_errors("TransportError")  # timeouts, connection resets and drops
TIMEOUT_ERRORS = _http_errors("TimeoutException")
HTTP_ERRORS = _http_errors("HTTPError")


def retry_delay_s(exc: BaseException) -> float | None:
    """The server's requested delay (google.rpc.RetryInfo ``retryDelay`` like "2s" or "0.5s")."""
    details: Any = getattr(exc, "details", None)
    stack = [details]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            delay = item.get("retryDelay")
            if isinstance(delay, str) and (m := re.fullmatch(r"\s*([0-9]*\.?[0-9]+)s\s*", delay)):
                return float(m.group(1))
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return None


def is_retryable(exc: BaseException) -> bool:
    if isinstance(exc, errors.APIError):
        return exc.code == 429 or (isinstance(exc.code, int) and exc.code >= 500)
    return isinstance(exc, TRANSPORT_ERRORS)


def describe(exc: BaseException) -> str:
    """One line for logs and users; never the key (it is only ever in a request header)."""
    if isinstance(exc, errors.APIError):
        return f"Gemini API error {exc.code} {exc.status or ''}".strip()
    if isinstance(exc, TIMEOUT_ERRORS):
        return "Gemini did not answer in time"
    if isinstance(exc, TRANSPORT_ERRORS):
        return f"could not reach Gemini ({type(exc).__name__})"
    return f"Gemini call failed ({type(exc).__name__})"


_CLIENTS: ClientCache[genai.Client] = ClientCache("Gemini")


def client_for(api_key: str, model: str, base_url: str | None, timeout_s: float) -> genai.Client:
    """The process-wide client for these settings, built on first use. The base URL in the key is
    the effective one (``GOOGLE_GEMINI_BASE_URL`` when none is passed), so a changed endpoint gets
    its own client."""
    effective = base_url or os.environ.get("GOOGLE_GEMINI_BASE_URL") or None
    timeout_ms = int(timeout_s * 1000)
    return _CLIENTS.get((api_key, model, effective, timeout_ms), lambda: genai.Client(
        api_key=api_key, http_options=types.HttpOptions(timeout=timeout_ms, base_url=effective)))


def close_clients() -> None:
    """Close and forget every cached client (tests; shutdown)."""
    _CLIENTS.close()


class GeminiAnswerer(StructuredAnswerer):
    name = "gemini"
    provider = "Gemini"

    def __init__(self, api_key: str, model: str, *, base_url: str | None = None,
                 timeout_s: float = DEFAULT_TIMEOUT_S, retry_budget_s: float = DEFAULT_RETRY_BUDGET_S,
                 max_attempts: int = DEFAULT_MAX_ATTEMPTS, settings: Settings | None = None) -> None:
        """``settings``: where the process-wide cap on concurrent calls comes from
        (``CHAPTERVERSE_MODEL_CONCURRENCY``, ``retrieval.answer.answerers.model.slots``); default from the environment."""
        self.model = model
        self._client = client_for(api_key, model, base_url, timeout_s)
        self._budget = RetryBudget(max_attempts, retry_budget_s, retry_delay_s, base_s=BACKOFF_BASE_S,
                                   max_s=BACKOFF_MAX_S)
        self._settings = settings or Settings()
        self.calls = 0

    @classmethod
    def from_settings(cls, settings: Settings) -> GeminiAnswerer:
        if settings.answer.gemini_api_key is None:
            raise AnswererError("GEMINI_API_KEY is not set")
        return cls(settings.answer.gemini_api_key.get_secret_value(), settings.answer.gemini_model,
                   timeout_s=settings.answer.gemini_timeout_s, retry_budget_s=settings.answer.gemini_retry_budget_s,
                   settings=settings)

    # -- one structured call ------------------------------------------------------------------
    def _generate(self, system: str, prompt: str, schema: type[BaseModel]) -> types.GenerateContentResponse:
        config = types.GenerateContentConfig(system_instruction=system, response_mime_type="application/json",
                                             response_schema=schema, temperature=0.0)
        return self._request(lambda: self._client.models.generate_content(model=self.model, contents=prompt,
                                                                          config=config), is_retryable, describe)

    def _text(self, system: str, prompt: str, schema: type[BaseModel]) -> str:
        return response_text(self._generate(system, prompt, schema))


def response_text(response: types.GenerateContentResponse) -> str:
    """The JSON text of a response, or AnswererError saying why there is none."""
    feedback = response.prompt_feedback
    if feedback is not None and feedback.block_reason:
        raise AnswererError(f"Gemini blocked the prompt ({feedback.block_reason})")
    if not response.candidates:
        raise AnswererError("Gemini returned no candidates")
    cand = response.candidates[0]
    finish = cand.finish_reason
    text = response.text
    if finish is not None and finish not in (types.FinishReason.STOP, types.FinishReason.MAX_TOKENS) and not text:
        raise AnswererError(f"Gemini stopped without an answer ({finish})")
    if not text:
        raise AnswererError(f"Gemini returned no text (finish reason {finish})")
    if finish == types.FinishReason.MAX_TOKENS:
        raise AnswererError("Gemini's answer was cut off (MAX_TOKENS)")
    return text
