"""What ``hot_path.py`` prints: which build of blog it measured, its tables and its targets.

``report`` reads the figures dict that ``hot_path.py`` fills (``per_call``, ``bytes``,
``e2e``, ``context``) and returns the targets, each passed or failed.
"""

from __future__ import annotations

import os
import sys

import blog


def fmt_ns(x: float) -> str:
    return f"{x:,.1f}"


def table(title: str, header: str) -> None:
    """A table's title, then its header and a rule as wide as the header."""
    print()
    print(title)
    print()
    print(header)
    print("-" * len(header))


def report(out: dict, cfg: dict) -> list[dict]:
    pc, by, e2e = out["per_call"], out["bytes"], out["e2e"]
    std = pc.get("(e) stdlib logging FileHandler", {}).get("ns_per_call")
    loop_ns = pc["(bare for-loop, for reference)"]["ns_per_call"]

    w = max(len(k) for k in pc) + 2
    table("1. Per-call cost on the calling thread (best of repeats; wall = perf_counter_ns,\n"
          "   thread CPU = thread_time_ns of the calling thread only; loop overhead included)",
          f"{'case':<{w}}{'ns/call':>10}{'thread CPU':>12}{'stdlib/x':>10}{'N x repeats':>15}")
    for name, r in pc.items():
        if r.get("status") == "not installed":
            print(f"{name:<{w}}{'not installed':>32}   ({r['error']})")
            continue
        ratio = f"{std / r['ns_per_call']:.1f}x" if std else "-"
        print(f"{name:<{w}}{fmt_ns(r['ns_per_call']):>10}{fmt_ns(r['thread_cpu_ns_per_call']):>12}"
              f"{ratio:>10}{r['n']:>9,} x {r['repeats']}")
    e = pc["(a) empty function"]["ns_per_call"]
    d = pc["(d) blog disabled (log.debug)"]["ns_per_call"]
    dl = pc["(d2) blog disabled, method in a local"]["ns_per_call"]
    print()
    print(f"disabled / empty: {d / e:.2f}x  ({fmt_ns(d)} / {fmt_ns(e)} ns);"
          f" without the for-loop's {fmt_ns(loop_ns)} ns: {(d - loop_ns) / (e - loop_ns):.2f}x")
    print(f"disabled with the method in a local / empty: {dl / e:.2f}x")
    cons = out.get("blog_consumer", {})
    for label, c in cons.items():
        print(f"{label}: largest backlog left in the channel at the end of a timed loop: "
              f"{c['max_backlog_after_loop']:,} events")
    for label, b in by.items():
        if "written" in b:
            print(f"{label}: events logged {b['events']:,}, written {b['written']:,}, "
                  f"dropped {b['dropped']:,}")

    w2 = max(len(k) for k in by) + 2
    table("2. Bytes per event on disk (file size / events)",
          f"{'case':<{w2}}{'bytes':>14}{'events':>12}{'bytes/event':>13}")
    for name, b in by.items():
        print(f"{name:<{w2}}{b['bytes']:>14,}{b['events']:>12,}{b['bytes_per_event']:>13.2f}")
    std_b = by.get("(e) stdlib logging FileHandler", {}).get("bytes_per_event")
    blog_b = by.get("(b,c) blog log.info + @event", {}).get("bytes_per_event")
    if std_b and blog_b:
        print(f"\nblog / stdlib bytes per event: {blog_b / std_b:.3f}")

    w3 = max(len(k) for k in e2e) + 2
    table("3. End to end: process CPU (all threads) per event, until flush() returns",
          f"{'case':<{w3}}{'CPU ns/event':>14}{'wall ns/event':>15}{'events':>12}"
          f"{'runs (CPU ns/event)':>28}")
    for name, r in e2e.items():
        runs = ", ".join(f"{c:,.0f}" for c in r["all_cpu_ns_per_event"])
        print(f"{name:<{w3}}{fmt_ns(r['cpu_ns_per_event']):>14}{fmt_ns(r['wall_ns_per_event']):>15}"
              f"{r['events']:>12,}{runs:>28}")
    std_e = e2e["(e) stdlib logging FileHandler"]["cpu_ns_per_event"]
    blog_e = e2e["(b) blog log.info"]["cpu_ns_per_event"]
    print(f"\nstdlib / blog end-to-end CPU: {std_e / blog_e:.1f}x")

    ctx = out.get("context")
    if ctx:
        w4 = max(len(k) for k in ctx) + 2
        base = next(iter(ctx.values()))["ns_per_call"]
        table("4. Context fields (blog.context): the same log.info, after the tables above",
              f"{'case':<{w4}}{'ns/call':>10}{'thread CPU':>12}{'x never':>10}")
        for name, r in ctx.items():
            print(f"{name:<{w4}}{fmt_ns(r['ns_per_call']):>10}"
                  f"{fmt_ns(r['thread_cpu_ns_per_call']):>12}{r['ns_per_call'] / base:>9.2f}x")

    targets = []

    def target(name: str, ok: bool, detail: str) -> None:
        targets.append({"target": name, "pass": ok, "detail": detail})

    for key, label in (("(b) blog log.info", "enabled log.info <= 1/25 of stdlib"),
                       ("(c) blog @event", "@blog.event <= 1/25 of stdlib")):
        x = pc[key]["ns_per_call"]
        x_cpu = pc[key]["thread_cpu_ns_per_call"]
        std_cpu = pc["(e) stdlib logging FileHandler"]["thread_cpu_ns_per_call"]
        target(label, std / x >= 25,
               f"{fmt_ns(x)} ns vs stdlib {fmt_ns(std)} ns: {std / x:.1f}x faster (need >= 25x); "
               f"calling thread's CPU alone: {fmt_ns(x_cpu)} vs {fmt_ns(std_cpu)} ns, "
               f"{std_cpu / x_cpu:.1f}x")
    b = pc["(b) blog log.info"]["ns_per_call"]
    b2 = pc["(b2) blog log.info, crash buffer"]["ns_per_call"]
    target("crash buffer costs <= 10% of log.info", b2 / b <= 1.10,
           f"{fmt_ns(b2)} ns vs {fmt_ns(b)} ns: {b2 / b:.3f}x (need <= 1.10x)")
    target("end-to-end CPU <= 1/12 of stdlib", std_e / blog_e >= 12,
           f"{fmt_ns(blog_e)} ns vs stdlib {fmt_ns(std_e)} ns per event: "
           f"{std_e / blog_e:.1f}x less (need >= 12x)")
    bridge = pc.get("(e2) stdlib logging -> blog.stdlib.BlogHandler (no LogRecord)",
                    {}).get("ns_per_call")
    record = pc.get("(e4) the same, record path (a filter on the logger)", {}).get(
        "ns_per_call")
    own = pc.get("(e3) stdlib logging, a handler doing nothing (logging's own)", {}).get(
        "ns_per_call")
    if bridge and record and own:   # issue 27: a logging call only blog takes: no LogRecord
        plain = pc["(b) blog log.info"]["ns_per_call"]
        target("stdlib bridge <= 0.1x the FileHandler, <= 8x log.info",
               bridge / std <= 0.1 and bridge / plain <= 8,
               f"{fmt_ns(bridge)} ns vs FileHandler {fmt_ns(std)} ns: {bridge / std:.3f}x "
               f"(need <= 0.1x), {bridge / plain:.1f}x log.info (need <= 8x); the record path "
               f"{fmt_ns(record)} ns ({record / std:.3f}x), logging's own record and "
               f"dispatch {fmt_ns(own)} ns ({own / std:.3f}x)")
    target("disabled call <= 1.2x empty call", d / e <= 1.2,
           f"{fmt_ns(d)} ns vs empty {fmt_ns(e)} ns: {d / e:.2f}x (need <= 1.2x)")
    target("bytes/event <= 0.35x stdlib", blog_b / std_b <= 0.35,
           f"{blog_b:.2f} vs stdlib {std_b:.2f} bytes/event: {blog_b / std_b:.3f}x (need <= 0.35x)")
    if ctx:   # issue 27: a call in a context, against the plain call before any context
        never, inside = (ctx[k]["ns_per_call"] for k in list(ctx)[:3:2])
        target("log.info in a context <= 1.5x the plain call", inside / never <= 1.5,
               f"{fmt_ns(inside)} ns vs {fmt_ns(never)} ns: {inside / never:.2f}x (need <= 1.5x)")
    print()
    print("Targets")
    print()
    for t in targets:
        print(f"  [{'PASS' if t['pass'] else 'FAIL'}] {t['target']}: {t['detail']}")
    return targets


def blog_hot_path() -> str:
    """What blog runs here: a C or a pure-Python level method, and its C module if loaded.

    blog is measured as found in the tree; this line says which build that was.
    """
    try:
        kind = type(blog.Session().get_logger("probe").info)
    except Exception as exc:  # blog's API moved: say so rather than stop the run
        return f"unknown ({type(exc).__name__}: {exc})"
    where = ("pure Python" if kind.__name__ == "function"
             else f"C ({kind.__module__}.{kind.__qualname__})")
    c_mod = next((m for name, m in sys.modules.items()
                  if name.startswith("blog.") and name.rsplit(".", 1)[1].startswith("_speedups")),
                 None)
    if c_mod is not None:
        names = sorted(n for n in vars(c_mod) if not n.startswith("_"))
        c_text = f"{c_mod.__name__} loaded ({', '.join(names)})"
    else:
        c_text = "no C module loaded"
    pure = os.environ.get("BLOG_PURE_PYTHON")
    return f"level methods {where}; {c_text}" + (f"; BLOG_PURE_PYTHON={pure}" if pure else "")
