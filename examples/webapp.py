"""An asyncio web server logging each request with its request id in context, a library
that logs through the stdlib ``logging`` captured into the same file, warnings on the
console, a backtrace of debug detail written around each error, and a traced handler.

    python examples/webapp.py app.blog        # serves 30 requests to itself, then stops
    bread app.blog                            # everything, from the app and the library
    bread -f "%S %m %k" app.blog              # with each event's fields (request id...)
    bread -s app.blog                         # in time order, backtraces among the rest

The "library" (``payments`` below) knows nothing of blog: it logs with
``logging.getLogger(__name__)``, as third-party code does, and its records land in
the file with their own call sites, formats and arguments.
"""

from __future__ import annotations

import asyncio
import logging
import random
import sys
import uuid

import blog
import blog.stdlib

# --- a third-party library: only logging ---------------------------------------------

payments_log = logging.getLogger("payments")


def charge(card: str, cents: int) -> bool:
    payments_log.info("charging %s for %d cents", card[-4:], cents)
    if cents > 9000:
        payments_log.warning("amount %.2f over the review limit", cents / 100)
    return cents % 7 != 0


# --- the application ---------------------------------------------------------------------

log = blog.get_logger("web")


@blog.traced(category="web.db", exclude=["token"])
async def load_cart(user: str, token: str) -> list[int]:
    await asyncio.sleep(0.001)
    return [random.randrange(100, 12000) for _ in range(random.randrange(1, 4))]


async def checkout(user: str) -> str:
    cart = await load_cart(user, token="s3cr3t")
    log.debug("cart of {} holds {} items: {}", user, len(cart), cart)
    total = sum(cart)
    if not charge("4242424242424242", total):
        log.error("payment of {} cents declined", total)    # writes the backtrace first
        return "402 Payment Required"
    log.info("order of {} cents placed", total)
    return "200 OK"


async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    line = (await reader.readline()).decode("latin-1").split()
    path = line[1] if len(line) > 1 else "/"
    with blog.context(request_id=uuid.uuid4().hex[:8], path=path):
        log.info("request {}", path)
        status = await checkout(user=path.strip("/") or "anonymous")
        log.info("response {}", status)
    writer.write(f"HTTP/1.0 {status}\r\n\r\n".encode())
    await writer.drain()
    writer.close()


async def client(port: int, n: int) -> None:
    async def one(i: int) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(f"GET /user{i} HTTP/1.0\r\n\r\n".encode())
        await writer.drain()
        await reader.read()
        writer.close()
    await asyncio.gather(*(one(i) for i in range(n)))


async def main(n: int) -> None:
    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    log.info("serving on port {}", port)
    async with server:
        await client(port, n)
    log.info("served {} requests", n)


if __name__ == "__main__":
    random.seed(7)
    # The file has everything at info and above, and the last 50 debug events of a
    # thread before each error; the console shows warnings and errors.
    blog.basic_config(sys.argv[1] if len(sys.argv) > 1 else "app.blog",
                      min_severity="info", backtrace=50)
    blog.add_output(blog.TextStream(sys.stderr, format="%S %C %m %k", min_severity="warning"))
    blog.stdlib.capture(min_severity="INFO", warnings=True)   # the library's records too
    asyncio.run(main(30))
    blog.shutdown()
