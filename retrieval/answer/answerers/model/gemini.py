"""The Gemini answerer (google-genai): the provider call of ``structured.StructuredAnswerer``.

- Output is requested as JSON for the schema (``response_schema``) and validated from ``response.text``
  with pydantic: ``response.parsed`` silently gives None on bad JSON, and we want the reason. Blocked
  prompts, SAFETY stops and empty candidates give ``AnswererError``.
- Every call has an explicit timeout (``HttpOptions(timeout=ms)``). 429, 5xx and dropped connections
  are retried (``StructuredAnswerer._request``), after exactly the server's ``retryDelay`` when it
  gives one (google.rpc.RetryInfo in the error details).
- ``GOOGLE_GEMINI_BASE_URL`` is honoured by the client.
Errors never include the API key (google-genai sends it in a header, never in the URL).
"""

from __future__ import annotations

import os
import re
from typing import Any

import httpx
from google import genai
from google.genai import errors, types
from pydantic import BaseModel

from retrieval.answer.answerers import AnswererError
from retrieval.answer.answerers.model.structured import ClientCache, StructuredAnswerer
from retrieval.profile import DEFAULT_PROFILE, Profile
from retrieval.settings import Settings


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


def client_for(api_key: str, model: str, timeout_s: float) -> genai.Client:
    """The process-wide client for these settings, built on first use. The base URL
    (``GOOGLE_GEMINI_BASE_URL``) is part of the key, so a changed endpoint gets its own client."""
    effective = os.environ.get("GOOGLE_GEMINI_BASE_URL") or None
    timeout_ms = int(timeout_s * 1000)
    return _CLIENTS.get((api_key, model, effective, timeout_ms), lambda: genai.Client(
        api_key=api_key, http_options=types.HttpOptions(timeout=timeout_ms, base_url=effective)))


def close_clients() -> None:
    """Close and forget every cached client (tests; shutdown)."""
    _CLIENTS.close()


class GeminiAnswerer(StructuredAnswerer):
    name = "gemini"
    provider = "Gemini"

    def __init__(self, settings: Settings, profile: Profile = DEFAULT_PROFILE) -> None:
        answer = settings.answer
        if answer.gemini_api_key is None:
            raise AnswererError("GEMINI_API_KEY is not set")
        super().__init__(settings, profile, answer.gemini_model, answer.gemini_retry_budget_s, retry_delay_s)
        self._client = client_for(answer.gemini_api_key.get_secret_value(), self.model, answer.gemini_timeout_s)

    def _text(self, system: str, prompt: str, schema: type[BaseModel]) -> str:
        config = types.GenerateContentConfig(system_instruction=system, response_mime_type="application/json",
                                             response_schema=schema, temperature=0.0)
        return response_text(self._request(lambda: self._client.models.generate_content(
            model=self.model, contents=prompt, config=config), is_retryable, describe))


def response_text(response: types.GenerateContentResponse) -> str:
    """The JSON text of a response, or AnswererError saying why there is none."""
    feedback = response.prompt_feedback
    if feedback is not None and feedback.block_reason:
        raise AnswererError(f"Gemini blocked the prompt ({feedback.block_reason})")
    if not response.candidates:
        raise AnswererError("Gemini returned no candidates")
    finish = response.candidates[0].finish_reason
    text = response.text
    if finish is not None and finish not in (types.FinishReason.STOP, types.FinishReason.MAX_TOKENS) and not text:
        raise AnswererError(f"Gemini stopped without an answer ({finish})")
    if not text:
        raise AnswererError(f"Gemini returned no text (finish reason {finish})")
    if finish == types.FinishReason.MAX_TOKENS:
        raise AnswererError("Gemini's answer was cut off (MAX_TOKENS)")
    return text
