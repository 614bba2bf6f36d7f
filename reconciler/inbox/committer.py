"""Group commit for the receiver.

Each request hands its items to a queue and waits; a writer takes everything waiting at that moment and
stores it in one transaction, then answers every waiter. Requests are still answered only after their
rows are committed, but one commit (the fsync) serves many requests. SQLite has one writer; PostgreSQL
may run several (``[receiver] writers``). A request's items (a provider's batch: Adyen) are stored
together or not at all: when a group fails, it is retried request by request, never item by item.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

from sqlalchemy import Engine

from reconciler.inbox.store import Item, Stored, store_items
from reconciler.storage.dialect import single_writer
from reconciler.storage.failures import DatabaseBusy, DatabaseUnavailable

log = logging.getLogger(__name__)

# one request's items, and its waiter for their outcomes (in order)
_Waiter = tuple[tuple[Item, ...], "asyncio.Future[list[Stored]]"]


class GroupCommitter:
    def __init__(self, engine: Engine, *, writers: int = 1, max_batch: int = 256) -> None:
        self._engine = engine
        self._writers = 1 if single_writer(engine) else max(1, writers)
        self._max_batch = max_batch
        self._queue: asyncio.Queue[_Waiter] | None = None
        self._tasks: list[asyncio.Task[None]] = []

    async def start(self) -> None:
        self._queue = asyncio.Queue()
        self._tasks = [asyncio.create_task(self._run()) for _ in range(self._writers)]

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []

    async def submit(self, item: Item) -> Stored:
        return (await self.submit_all((item,)))[0]

    async def submit_all(self, items: Sequence[Item]) -> list[Stored]:
        """Store these items in one transaction (with others' waiting then): what became of each."""
        if self._queue is None:
            raise RuntimeError("GroupCommitter.start() was not awaited")
        future: asyncio.Future[list[Stored]] = asyncio.get_running_loop().create_future()
        await self._queue.put((tuple(items), future))
        return await future

    def _write(self, items: Sequence[Item]) -> list[Stored]:
        with self._engine.begin() as conn:
            return store_items(conn, items)

    async def _run(self) -> None:
        assert self._queue is not None
        queue = self._queue
        while True:
            batch = [await queue.get()]
            while len(batch) < self._max_batch and not queue.empty():
                batch.append(queue.get_nowait())
            await self._store(batch)

    async def _store(self, batch: list[_Waiter]) -> None:
        try:
            outcomes = await asyncio.to_thread(
                self._write, [item for items, _ in batch for item in items]
            )
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            if len(batch) > 1 and not isinstance(exc, DatabaseUnavailable | DatabaseBusy):
                # The database refused something in the batch: retry each request in its own
                # transaction so that only the request it refuses fails. (Down, or its lock held:
                # one by one cannot help.)
                log.warning(
                    "a batch of %d deliveries failed (%s); storing them one by one",
                    len(batch),
                    exc.__class__.__name__,
                )
                for waiter in batch:
                    await self._store([waiter])
                return
            log.exception("storing %d deliveries failed", len(batch))
            for _, future in batch:
                if not future.done():
                    future.set_exception(exc)
            return
        start = 0
        for items, future in batch:
            if not future.done():
                future.set_result(outcomes[start : start + len(items)])
            start += len(items)
