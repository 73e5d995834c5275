"""The OpenAI-compatible answerer (``openai`` client): any server speaking ``POST /v1/chat/completions``
— Ollama, vLLM, llama.cpp's server, LM Studio, OpenAI itself — with the Gemini answerer's contract.

- The passages go in as data with ids (``retrieval.answer.answerers.model.prompt``, shared with Gemini).
- Output is requested with ``response_format`` ``json_schema`` (strict) built from the same pydantic
  model (``structured.strict_schema``) and validated from the message text with pydantic
  (``structured.parse_output``); a refusal (the ``refusal`` field, or plain text instead of JSON), a
  cut-off (``finish_reason`` length), a content filter or an empty reply give ``AnswererError``.
- One request at a time goes through ``_complete`` (the single provider call): an explicit timeout
  per request, the client's own retries off, and 429, 5xx, timeouts and dropped connections retried
  by ``structured.RetryBudget`` (the Gemini policy), after exactly the server's ``Retry-After`` when
  it gives one, bounded in total time.
- One client per (key, base URL, timeout) for the process (``structured.ClientCache``).
Errors never include the API key (it is only ever sent in the Authorization header).
"""

from __future__ import annotations

import logging
import re

import openai
from openai.types.chat import ChatCompletion
from pydantic import BaseModel

from retrieval.answer.answerers import AnswererError, unconfigured
from retrieval.answer.answerers.model.structured import (
    BACKOFF_BASE_S,
    BACKOFF_MAX_S,
    DEFAULT_MAX_ATTEMPTS,
    ClientCache,
    RetryBudget,
    StructuredAnswerer,
    strict_schema,
)
from retrieval.settings import Settings

log = logging.getLogger(__name__)

PROVIDER = "the OpenAI-compatible server"
NO_KEY = "no-key"  # local servers take any key; the client insists on one
OPENAI_URL = "https://api.openai.com/v1"
_FENCE = re.compile(r"\A\s*```(?:json)?\s*\n(?P<body>.*?)\n?\s*```\s*\Z", re.DOTALL)


def retry_after_s(exc: BaseException) -> float | None:
    """The delay the server asked for: ``retry-after-ms`` or ``retry-after`` (seconds) on an HTTP error."""
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    if headers is None:
        return None
    for name, scale in (("retry-after-ms", 1e-3), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is not None:
            try:
                return max(0.0, float(value) * scale)
            except ValueError:
                continue  # an HTTP date: fall back to our own backoff
    return None


def is_retryable(exc: BaseException) -> bool:
    if isinstance(exc, openai.APIStatusError):
        return exc.status_code == 429 or exc.status_code >= 500
    return isinstance(exc, openai.APIConnectionError)  # timeouts included


def describe(exc: BaseException) -> str:
    """One line for logs and users; never the key."""
    if isinstance(exc, openai.APIStatusError):
        return f"{PROVIDER} answered HTTP {exc.status_code}"
    if isinstance(exc, openai.APITimeoutError):
        return f"{PROVIDER} did not answer in time"
    if isinstance(exc, openai.APIConnectionError):
        return f"could not reach {PROVIDER}"
    return f"the call to {PROVIDER} failed ({type(exc).__name__})"


_CLIENTS: ClientCache[openai.OpenAI] = ClientCache("OpenAI")


def client_for(api_key: str, base_url: str | None, timeout_s: float) -> openai.OpenAI:
    """The process-wide client for these settings; its own retries are off (``RetryBudget`` retries)."""
    url = base_url or OPENAI_URL  # explicit: the client would read OPENAI_BASE_URL again (Settings did)
    return _CLIENTS.get((api_key, url, timeout_s), lambda: openai.OpenAI(
        api_key=api_key, base_url=url, timeout=timeout_s, max_retries=0))


def close_clients() -> None:
    _CLIENTS.close()


def message_text(completion: ChatCompletion) -> str:
    """The JSON text of a chat completion, or AnswererError saying why there is none."""
    if not completion.choices:
        raise AnswererError(f"{PROVIDER} returned no choices")
    choice = completion.choices[0]
    message = choice.message
    if getattr(message, "refusal", None):
        raise AnswererError(f"{PROVIDER} refused to answer")  # its words go nowhere
    if choice.finish_reason == "length":
        raise AnswererError(f"{PROVIDER}'s answer was cut off (finish reason length)")
    if choice.finish_reason == "content_filter":
        raise AnswererError(f"{PROVIDER} filtered its answer (content_filter)")
    text = (message.content or "").strip()
    if not text:
        raise AnswererError(f"{PROVIDER} returned no text (finish reason {choice.finish_reason})")
    fenced = _FENCE.match(text)  # some local models wrap JSON in a Markdown fence whatever they are told
    return fenced.group("body") if fenced else text


class OpenAICompatAnswerer(StructuredAnswerer):
    name = "openai"
    provider = PROVIDER

    def __init__(self, model: str, *, api_key: str | None = None, base_url: str | None = None,
                 timeout_s: float = 60.0, retry_budget_s: float = 90.0,
                 max_attempts: int = DEFAULT_MAX_ATTEMPTS, settings: Settings | None = None) -> None:
        """``settings``: where the process-wide cap on concurrent model calls comes from
        (``CHAPTERVERSE_MODEL_CONCURRENCY``, ``retrieval.answer.answerers.model.slots``, shared with Gemini)."""
        self.model = model
        self._settings = settings or Settings()
        self._client = client_for(api_key or NO_KEY, base_url, timeout_s)
        self._budget = RetryBudget(max_attempts, retry_budget_s, retry_after_s, base_s=BACKOFF_BASE_S,
                                   max_s=BACKOFF_MAX_S)
        self.calls = 0

    @classmethod
    def from_settings(cls, settings: Settings) -> OpenAICompatAnswerer:
        missing = unconfigured(settings, "openai")
        if missing or not settings.answer.openai_model:
            raise AnswererError(f"the openai answerer needs {missing}")
        key = settings.answer.openai_api_key.get_secret_value() if settings.answer.openai_api_key else None
        return cls(settings.answer.openai_model, api_key=key, base_url=settings.answer.openai_base_url,
                   timeout_s=settings.answer.openai_timeout_s, retry_budget_s=settings.answer.openai_retry_budget_s,
                   settings=settings)

    # -- the one provider call ------------------------------------------------------------------
    def _complete(self, system: str, prompt: str, schema: type[BaseModel]) -> ChatCompletion:
        response_format = {"type": "json_schema",
                           "json_schema": {"name": schema.__name__, "strict": True, "schema": strict_schema(schema)}}
        messages = [{"role": "system", "content": system}, {"role": "user", "content": prompt}]
        return self._request(lambda: self._client.chat.completions.create(
            model=self.model, temperature=0.0, response_format=response_format,  # type: ignore[arg-type]
            messages=messages), is_retryable, describe)

    def _text(self, system: str, prompt: str, schema: type[BaseModel]) -> str:
        return message_text(self._complete(system, prompt, schema))
