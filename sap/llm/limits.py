"""Client-side limits per (model, api_base): requests in flight, requests per minute and tokens per minute."""
from __future__ import annotations

import asyncio
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass

from sap.llm.config import ModelConfig


@dataclass
class Grant:
    """One admitted request in the sliding window; set `tokens` to the real usage once it is known."""

    at: float
    tokens: int


class ModelLimiter:
    """A semaphore for concurrency plus a sliding one-minute window of requests and tokens.

    Admission is first come, first served. A request whose token estimate alone exceeds `tpm` is let
    through once the window is empty, so it waits instead of blocking forever. The asyncio primitives
    bind to the event loop that first waits on them: use one limiter from one loop.
    """

    def __init__(self, concurrency: int, rpm: int | None = None, tpm: int | None = None, *,
                 window: float = 60.0, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], Awaitable[None]] = asyncio.sleep):
        self.concurrency, self.rpm, self.tpm = concurrency, rpm, tpm
        self._window_seconds = window
        self._clock = clock
        self._sleep = sleep
        self._semaphore = asyncio.Semaphore(concurrency)
        self._admission = asyncio.Lock()
        self._window: deque[Grant] = deque()

    @asynccontextmanager
    async def slot(self, estimated_tokens: int = 0) -> AsyncIterator[Grant]:
        """Hold one concurrency slot and one window entry for the duration of a request."""
        async with self._semaphore:
            yield await self._admit(estimated_tokens)

    async def _admit(self, tokens: int) -> Grant:
        async with self._admission:
            while (wait := self._wait_before(self._clock(), tokens)) > 0:
                await self._sleep(wait)
            grant = Grant(at=self._clock(), tokens=tokens)
            self._window.append(grant)
            return grant

    def _wait_before(self, now: float, tokens: int) -> float:
        """Seconds until a request of `tokens` fits in the window (0 when it fits now)."""
        while self._window and self._window[0].at <= now - self._window_seconds:
            self._window.popleft()
        wait = 0.0
        if self.rpm is not None and len(self._window) >= self.rpm:
            wait = self._window[len(self._window) - self.rpm].at + self._window_seconds - now
        if self.tpm is not None and self._window:
            excess = sum(g.tokens for g in self._window) + tokens - self.tpm
            for grant in self._window:
                if excess <= 0:
                    break
                excess -= grant.tokens
                wait = max(wait, grant.at + self._window_seconds - now)
        return wait


class LimiterRegistry:
    """The limiters of one event loop, one per (model, api_base); every role using that endpoint shares it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._limiters: dict[tuple[str, str | None], ModelLimiter] = {}

    def get(self, cfg: ModelConfig) -> ModelLimiter:
        """The shared limiter for cfg's endpoint; raises ValueError if cfg asks for different limits."""
        key = (cfg.model, cfg.api_base)
        with self._lock:
            limiter = self._limiters.get(key)
            if limiter is None:
                limiter = self._limiters[key] = ModelLimiter(cfg.concurrency, cfg.rpm, cfg.tpm)
        if (limiter.concurrency, limiter.rpm, limiter.tpm) != (cfg.concurrency, cfg.rpm, cfg.tpm):
            raise ValueError(
                f"{cfg.model} at {cfg.api_base or 'its default endpoint'} is already limited to "
                f"concurrency={limiter.concurrency}, rpm={limiter.rpm}, tpm={limiter.tpm}; give every role "
                f"that uses it the same limits (got concurrency={cfg.concurrency}, rpm={cfg.rpm}, tpm={cfg.tpm})")
        return limiter
