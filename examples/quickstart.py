"""Log a few events the way an application would, then read them back with `bread`.

    python examples/quickstart.py app.blog && bread app.blog
"""

import sys
import threading
import time
from dataclasses import dataclass

import blog


@dataclass
class Fill:
    order_id: int
    price: float
    qty: int


@blog.event("order {} filled at {}", severity="info", category="orders")
def order_filled(order_id: int, price: float): ...


def worker(n: int) -> None:
    log = blog.get_logger("worker")
    for i in range(3):
        log.debug("worker {} step {}", n, i)
        time.sleep(0.002)   # the two workers' steps interleave: bread -s shows them in time order


def main(path: str) -> None:
    blog.basic_config(path)
    log = blog.get_logger("orders")
    log.info("order {} filled at {}", 42, 101.25)
    log.warning("disk {} at {}%", "/", 93.5, host="db1")
    log.info("fill {} legs {}", Fill(7, 99.5, 100), [1, 2, 3])
    order_filled(43, 99.5)
    threads = [threading.Thread(target=worker, args=(n,), name=f"worker-{n}") for n in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    try:
        1 / 0
    except ZeroDivisionError:
        log.exception("could not compute the {} ratio", "fill")
    blog.shutdown()


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "app.blog")
