"""What every model answerer shares (Gemini, OpenAI-compatible): the output models, their JSON
schema, pydantic validation of the model's text, the retry policy and the client cache.

A provider module supplies only ``StructuredAnswerer._text(system, prompt, schema)``: one structured
request (retried by ``_request``) returning the model's JSON text, or ``AnswererError`` with one clear
line. Everything else is here, so both providers keep one contract: passages as data (``prompt``),
every quote verified afterwards (``retrieval.answer.drafting``), the verified draft checked again
(``settle``: ``checks``).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Hashable, Sequence
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, Field, ValidationError
from tenacity import RetryCallState, Retrying, retry_if_exception, stop_after_attempt, stop_before_delay, wait_exponential

from retrieval.answer.answerers import AnswererError, Draft, Request, Response, Retrieved
from retrieval.answer.answerers.model.checks import settled
from retrieval.answer.answerers.model.prompt import (
    REWRITE_SYSTEM,
    SYSTEM,
    answer_prompt,
    repair_prompt,
    rewrite_prompt,
)
from retrieval.answer.answerers.model.slots import provider_slot
from retrieval.answer.context import model_pages
from retrieval.answer.drafting import Drafting
from retrieval.answer.verify import Claim, Verdict
from retrieval.models import Answer, Turn
from retrieval.profile import Profile
from retrieval.settings import Settings

log = logging.getLogger(__name__)

MAX_ATTEMPTS = 4
BACKOFF_BASE_S = 1.0
BACKOFF_MAX_S = 16.0


class ModelCitation(BaseModel):
    id: str = Field(description="The id of the passage the quote is copied from.")
    document: str
    page: int
    quote: str = Field(description="A contiguous span copied word for word from that passage's text.")


class ModelAnswer(BaseModel):
    answerable: bool = Field(description="False when the passages do not contain the answer.")
    answer: str = Field(description="Short answer; empty when not answerable.")
    citations: list[ModelCitation]
    reason: str = Field(default="", description="When not answerable: what the passages lack.")


class StandaloneQuestion(BaseModel):
    question: str


def strict_schema(model: type[BaseModel]) -> dict[str, Any]:
    """``model``'s JSON schema in the strict form OpenAI-style structured output asks for: every
    object lists all its properties as required and allows no others; no defaults. The pydantic
    model still validates the reply (a field with a default may then be given, as it must be)."""
    def strict(node: Any) -> Any:
        if isinstance(node, list):
            return [strict(x) for x in node]
        if not isinstance(node, dict):
            return node
        # "properties" and "$defs" map names to schemas: a property may be called "default"
        out = {key: {name: strict(s) for name, s in value.items()}
               if key in ("properties", "$defs") and isinstance(value, dict) else strict(value)
               for key, value in node.items() if key != "default"}
        if isinstance(out.get("properties"), dict):
            out["required"] = list(out["properties"])
            out["additionalProperties"] = False
        return out

    return strict(model.model_json_schema())


M = TypeVar("M", bound=BaseModel)
R = TypeVar("R")


def parse_output(text: str, schema: type[M], provider: str) -> M:
    """The model's JSON text validated by pydantic, or AnswererError saying where it went wrong."""
    try:
        return schema.model_validate_json(text)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(x) for x in first.get("loc", ())) or "output"
        raise AnswererError(f"{provider} output did not match the schema ({exc.error_count()} error(s); "
                            f"{where}: {first.get('msg', '')})") from None


def to_draft(out: ModelAnswer) -> Draft:
    if not out.answerable:
        return Draft(refusal=True, reason=out.reason or "the model found no answer in the passages")
    return Draft(refusal=False, answer=out.answer, claims=[Claim(c.document, c.page, c.quote) for c in out.citations])


C = TypeVar("C")


class ClientCache(Generic[C]):
    """One client per settings key for the whole process (thread-safe), so its HTTP connection pool
    is reused and not leaked by every ``ask()``."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._clients: dict[Hashable, C] = {}
        self._lock = threading.Lock()

    def get(self, key: Hashable, build: Callable[[], C]) -> C:
        with self._lock:
            if key not in self._clients:
                self._clients[key] = build()
            return self._clients[key]

    def close(self) -> None:
        """Close and forget every cached client (tests; shutdown)."""
        with self._lock:
            clients = list(self._clients.values())
            self._clients.clear()
        for client in clients:
            try:
                client.close()  # type: ignore[attr-defined]
            except Exception:
                log.debug("closing a %s client failed", self.name, exc_info=True)


MODEL_PASSAGES = 16  # ranked passages a model reads (their pages shown whole or widened: retrieval.answer.context),
# pages added in rank order until Settings.answer.model_context_chars
MODEL_LEG_DEPTH = 2 * MODEL_PASSAGES  # candidates each search leg fetches for it: a pool twice what it reads


class StructuredAnswerer(Drafting):
    """An ``Answerer`` backed by a model that replies with JSON for a pydantic schema. Subclasses
    set ``name`` and ``provider`` (for messages), build their client and implement ``_text``."""

    provider = ""
    passages_wanted = MODEL_PASSAGES
    leg_depth = MODEL_LEG_DEPTH

    def __init__(self, settings: Settings, profile: Profile, model: str, budget_s: float,
                 server_delay: Callable[[BaseException], float | None]) -> None:
        """``settings`` also hold the process-wide cap on model calls (``slots``); ``profile``: the
        searched collections'; ``budget_s``: the time all attempts of one request may take, waits
        included; ``server_delay``: the wait a provider error asks for, if any."""
        self._settings = settings
        self.profile = profile
        self.model = model
        self._budget_s = budget_s
        self._server_delay = server_delay

    def _text(self, system: str, prompt: str, schema: type[BaseModel]) -> str:
        """One structured request (retried within the budget): the model's JSON text."""
        raise NotImplementedError

    def _wait(self, state: RetryCallState) -> float:
        """Exactly the delay the server asked for, else exponential backoff."""
        delay = self._server_delay(state.outcome.exception()) if state.outcome else None
        return wait_exponential(BACKOFF_BASE_S, max=BACKOFF_MAX_S)(state) if delay is None else delay

    def _request(self, send: Callable[[], R], retryable: Callable[[BaseException], bool],
                 describe: Callable[[BaseException], str]) -> R:
        """``send()`` retried on ``retryable`` errors, at most ``MAX_ATTEMPTS`` times and never when the
        retry would end past the budget, each attempt holding a slot of the process-wide cap on model
        calls (``slots.provider_slot``); any other failure becomes one AnswererError line
        (``describe``), never the provider's text."""
        retrying = Retrying(retry=retry_if_exception(retryable), wait=self._wait, reraise=True,
                            stop=stop_after_attempt(MAX_ATTEMPTS) | stop_before_delay(self._budget_s))
        try:
            for attempt in retrying:
                with attempt, provider_slot(self._settings, wait_s=self._budget_s):
                    self.calls += 1
                    return send()
        except AnswererError:
            raise  # no provider slot came free in time (slots.ProviderBusy): already one clear line
        except Exception as exc:  # noqa: BLE001  (anything else from the client is one clear line too)
            raise AnswererError(describe(exc)) from None
        raise AnswererError(f"{self.provider} gave no response")  # pragma: no cover - the loop returns or raises

    def _structured(self, system: str, prompt: str, schema: type[M]) -> M:
        return parse_output(self._text(system, prompt, schema), schema, self.provider)

    # -- Answerer ----------------------------------------------------------------------------
    def request(self, retrieved: Retrieved) -> Request:
        settings = self._settings
        return Request(retrieved.question, model_pages(
            retrieved.passages[:self.passages_wanted], retrieved.pages, settings.ingest.file_base_url,
            self.profile.injection, settings.answer.model_context_chars))

    def answer(self, request: Request) -> Draft:
        return to_draft(self._structured(SYSTEM, answer_prompt(request.question, request.shown), ModelAnswer))

    def repair(self, request: Request, draft: Draft, failures: Sequence[Verdict]) -> Draft:
        return to_draft(self._structured(SYSTEM, repair_prompt(request.question, request.shown, failures), ModelAnswer))

    def settle(self, request: Request, response: Response, result: Answer) -> Response:
        from retrieval.answer.answerers.registry import sentence_reader  # noqa: PLC0415  (loads the reader when asked)

        return settled(self.name, request, response, sentence_reader(self._settings, "support"), self.profile, result)

    def standalone(self, question: str, history: Sequence[Turn]) -> str:
        text = self._structured(REWRITE_SYSTEM, rewrite_prompt(question, history), StandaloneQuestion).question.strip()
        if not text:
            raise AnswererError(f"{self.provider} returned an empty standalone question")
        return text
