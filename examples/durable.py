"""Nothing lost: a crash buffer against kill -9, and durable flushes before an acknowledgement.

    python examples/durable.py orders.blog          # logs, acknowledges durably, exits
    python examples/durable.py orders.blog --kill   # the same, then dies by SIGKILL
    python examples/durable.py orders.blog          # ...the next start recovers what it left
    bread orders.blog

An order service that logs each order and acknowledges it only once the log
holds it on stable storage (as a database acknowledges a commit). Durable
flushes asked for at once share one fsync; an asyncio server awaits them
without blocking its loop. The crash buffer keeps what the process logged
when it is killed; the next start (or ``bread --recover orders.blog``) appends
it to the log, marked as recovered.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys

import blog

log = blog.get_logger("orders")


async def handle(order_id: int, qty: int) -> str:
    log.info("order {} accepted qty {}", order_id, qty)
    await asyncio.wrap_future(blog.flush_async(durable=True))   # on disk before the ack
    return f"ack {order_id}"


async def serve() -> None:
    acks = await asyncio.gather(*(handle(i, 10 * i) for i in range(1, 51)))
    print(f"{len(acks)} orders acknowledged, each after its event was on disk")


def main() -> None:
    path = sys.argv[1] if len(sys.argv) > 1 else "orders.blog"
    blog.basic_config(path, crash_buffer=True, fsync="rotation")   # recovers a dead run first
    asyncio.run(serve())
    for i in range(10_000):          # not flushed: only the crash buffer keeps these on a kill
        log.debug("audit {}", i)
    if "--kill" in sys.argv:
        print("killed with 10,000 events not yet written; start again to recover them")
        os.kill(os.getpid(), signal.SIGKILL)


if __name__ == "__main__":
    main()
