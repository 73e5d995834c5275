"""The OpenAI-compatible answerer (``openai`` client): any server speaking ``POST /v1/chat/completions``
— Ollama, vLLM, llama.cpp's server, LM Studio, OpenAI itself — as the provider call of
``structured.StructuredAnswerer`` (the Gemini answerer's contract).

- Output is requested with ``response_format`` ``json_schema`` (strict, ``structured.strict_schema``);
  a refusal (the ``refusal`` field, or plain text instead of JSON), a cut-off (``finish_reason``
  length), a content filter or an empty reply give ``AnswererError``.
- An explicit timeout per request and the client's own retries off: 429, 5xx, timeouts and dropped
  connections are retried by ``StructuredAnswerer._request``, after exactly the server's
  ``Retry-After`` when it gives one.
Errors never include the API key (it is only ever sent in the Authorization header).
"""

from __future__ import annotations

import re

import openai
from openai.types.chat import ChatCompletion
from pydantic import BaseModel

from retrieval.answer.answerers import AnswererError, unconfigured
from retrieval.answer.answerers.model.structured import ClientCache, StructuredAnswerer, strict_schema
from retrieval.profile import DEFAULT_PROFILE, Profile
from retrieval.settings import Settings

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
    """The process-wide client for these settings; its own retries are off (``_request`` retries)."""
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

    def __init__(self, settings: Settings, profile: Profile = DEFAULT_PROFILE) -> None:
        answer = settings.answer
        missing = unconfigured(settings, "openai")
        if missing or not answer.openai_model:
            raise AnswererError(f"the openai answerer needs {missing}")
        super().__init__(settings, profile, answer.openai_model, answer.openai_retry_budget_s, retry_after_s)
        key = answer.openai_api_key.get_secret_value() if answer.openai_api_key else NO_KEY
        self._client = client_for(key, answer.openai_base_url, answer.openai_timeout_s)

    def _text(self, system: str, prompt: str, schema: type[BaseModel]) -> str:
        response_format = {"type": "json_schema",
                           "json_schema": {"name": schema.__name__, "strict": True, "schema": strict_schema(schema)}}
        messages = [{"role": "system", "content": system}, {"role": "user", "content": prompt}]
        return message_text(self._request(lambda: self._client.chat.completions.create(
            model=self.model, temperature=0.0, response_format=response_format,  # type: ignore[arg-type]
            messages=messages), is_retryable, describe))
