"""The ``openai`` backend: any OpenAI-compatible server (``vllm serve``, a hosted API), through the
``openai`` client's ``AsyncOpenAI`` (this module is imported on first use of ``--llm openai``).

The client sends each request, applies ``--llm-timeout`` and retries (at most ``--llm-max-retries``
times) 408, 409, 429, 5xx, timeouts and connection errors; it also obeys a server's
``x-should-retry`` and does not retry when ``Retry-After`` asks for more than two minutes. At most
``--llm-concurrency`` requests are in flight or awaiting storage at once: a slot frees only when
its reply has been handed to ``on_reply`` (the cache), so an interrupt loses at most that many.
Three things are the project's own:

- the wait between tries: ``--llm-backoff`` doubled per retry, a server's ``Retry-After`` (seconds)
  as a floor, at most a minute (``retry_delay``), so the same flags mean what they meant before;
- a 200 whose body is not a chat completion is retried like a dropped connection (servers do
  recover) and then counted as ``bad_response_body``;
- the client's typed errors become the short counted reasons a failed ``Reply`` carries
  (``failure_reason``): ``http_<status>``, ``timeout``, ``connection_error``, ``bad_response_body``.
  Never the client's message text, which could quote a server's answer.
"""

from __future__ import annotations

import asyncio
import json
from typing import Awaitable, Callable, Optional

import httpx
import openai

from mmlongembed.core.errors import UserError
from mmlongembed.llm.backends import BACKENDS, NOT_SENT, ChatRequest, OnReply, Reply, api_key, chat_payload, reply_text
from mmlongembed.llm.config import LLMConfig

MAX_RETRY_AFTER_SECONDS = 60.0
NO_KEY = "no-key"  # the client insists on a key; with none set, the Authorization header is left out instead

Sleep = Callable[[float], Awaitable[None]]


class NotACompletion(Exception):
    """A successful HTTP answer whose body is not an OpenAI chat completion."""


def completion_text(raw: str) -> str:
    """The reply text of a raw chat completion body; ``NotACompletion`` when it is none."""
    try:
        return reply_text(json.loads(raw))
    except (ValueError, KeyError, IndexError, TypeError):
        raise NotACompletion from None


async def _refuse_non_completions(response: httpx.Response) -> None:
    """httpx response hook: raising inside the client's send makes the client retry, as for a
    dropped connection, and finally raise ``APIConnectionError`` with this as its cause."""
    if response.is_success:
        await response.aread()
        completion_text(response.text)


def retry_delay(backoff: float, retries_taken: int, retry_after: float | None) -> float:
    """Seconds before the next try: ``backoff`` doubled per retry, at least a server's
    Retry-After, at most a minute."""
    return min(max(backoff * (2 ** retries_taken), retry_after or 0.0), MAX_RETRY_AFTER_SECONDS)


def retry_after_seconds(value: str | None) -> float | None:
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None  # an HTTP date: fall back to our own backoff


class BackoffClient(openai.AsyncOpenAI):
    """``AsyncOpenAI`` that waits ``retry_delay`` between tries (``sleep`` is injectable for tests)."""

    def __init__(self, *, backoff: float, sleep: Sleep, **client_options):
        super().__init__(**client_options)
        self._retry_backoff = backoff
        self._retry_sleep = sleep

    async def _sleep_for_retry(self, *, retries_taken: int, max_retries: int, options, response) -> None:
        retry_after = retry_after_seconds(response.headers.get("Retry-After")) if response is not None else None
        await self._retry_sleep(retry_delay(self._retry_backoff, retries_taken, retry_after))


def chat_client(base_url: str, key: str | None, *, timeout: float, max_retries: int, backoff: float,
                sleep: Sleep) -> BackoffClient:
    """A client for one batch of requests (it belongs to the event loop that runs them)."""
    return BackoffClient(
        base_url=base_url, api_key=key or NO_KEY, timeout=timeout, max_retries=max_retries, backoff=backoff,
        sleep=sleep, http_client=openai.DefaultAsyncHttpxClient(event_hooks={"response": [_refuse_non_completions]}))


@BACKENDS.register("openai")
class OpenAIBackend:
    name = "openai"

    def __init__(self, config: LLMConfig, sleep: Sleep = asyncio.sleep):
        if not config.llm_base_url.startswith(("http://", "https://")):
            raise UserError(f"--llm-base-url must be an http(s) URL, got {config.llm_base_url!r}")
        self.model = config.llm_model
        self.model_revision = config.llm_model_revision
        self.base_url = config.llm_base_url.rstrip("/")
        self.endpoint = self.base_url + "/chat/completions"
        self.concurrency = max(1, config.llm_concurrency)
        self.timeout = config.llm_timeout
        self.max_retries = max(0, config.llm_max_retries)
        self.backoff = config.llm_backoff
        self._sleep = sleep

    def __repr__(self) -> str:  # no key, ever
        return f"OpenAIBackend({self.endpoint}, model={self.model!r})"

    def complete(self, requests: list[ChatRequest], on_reply: Optional[OnReply] = None) -> list[Reply]:
        if not requests:
            return []
        replies = asyncio.run(self._complete_all(requests, on_reply))
        return [r or Reply(error=NOT_SENT) for r in replies]

    async def _complete_all(self, requests: list[ChatRequest], on_reply: Optional[OnReply]) -> list[Reply | None]:
        # The key is read from the environment for this batch only: the backend never holds it.
        key = api_key()
        replies: list[Reply | None] = [None] * len(requests)
        slots = asyncio.Semaphore(min(self.concurrency, len(requests)))
        arrived: asyncio.Queue = asyncio.Queue()
        async with chat_client(self.base_url, key, timeout=self.timeout, max_retries=self.max_retries,
                               backoff=self.backoff, sleep=self._sleep) as client:

            async def ask(index: int) -> None:
                await slots.acquire()
                try:
                    text, error = await complete_chat(client, chat_payload(self.model, requests[index]), key)
                    outcome: Reply | Exception = Reply(text=text, error=error)
                except Exception as bug:  # noqa: BLE001  (not a request failure: raised below, not counted)
                    outcome = bug
                arrived.put_nowait((index, outcome))

            tasks = [asyncio.create_task(ask(index)) for index in range(len(requests))]
            try:
                for _ in requests:
                    index, outcome = await arrived.get()
                    if isinstance(outcome, Exception):
                        raise outcome
                    replies[index] = outcome
                    if on_reply is not None:
                        on_reply(index, outcome)
                    slots.release()
            finally:
                # On an interrupt, the requests queued or in flight are cancelled, unrecorded.
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
        return replies


def auth_headers(key: str | None) -> dict:
    """Per-request headers: none with a key (the client sends it), else the Authorization header omitted."""
    return {} if key else {"Authorization": openai.Omit()}


async def complete_chat(client: BackoffClient, payload: dict, key: str | None) -> tuple[str | None, str | None]:
    """(reply text, None) or (None, failure reason) for one chat completion request."""
    try:
        raw = await client.chat.completions.with_raw_response.create(**payload, extra_headers=auth_headers(key))
    except openai.OpenAIError as error:
        return None, failure_reason(error)
    return completion_text(raw.http_response.text), None


def failure_reason(error: openai.OpenAIError) -> str:
    """The short counted reason for a request the client gave up on."""
    if isinstance(error, openai.APITimeoutError):  # before its base class, APIConnectionError
        return "timeout"
    if isinstance(error, openai.APIStatusError):
        return f"http_{error.status_code}"
    if isinstance(error, openai.APIConnectionError):
        return "bad_response_body" if isinstance(error.__cause__, NotACompletion) else "connection_error"
    return f"client_error:{type(error).__name__}"
