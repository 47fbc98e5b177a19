"""examples/webapp.py, run as a user would: the app's and the library's events in one file,
request ids in context, warnings on the console, a backtrace around each error."""

from __future__ import annotations

import pathlib
import subprocess

import bread

from helpers import python_child

EXAMPLE = pathlib.Path(__file__).resolve().parent.parent / "examples" / "webapp.py"


def test_the_web_app_example(tmp_path):
    path = tmp_path / "app.blog"
    r = subprocess.run(python_child(str(EXAMPLE), str(path)), capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    events = list(bread.read(str(path)))
    by_category: dict = {}
    for ev in events:
        by_category.setdefault(ev.category, []).append(ev)
    # The library's logging records, with its own call sites and the request's context.
    charges = by_category["payments"]
    assert len([e for e in charges if e.message.startswith("charging 4242 for ")]) == 30
    assert all(e.source.file.endswith("webapp.py") and e.source.function == "charge"
               and len(e.fields["request_id"]) == 8 for e in charges)
    requests = [e for e in by_category["web"] if e.message.startswith("request ")]
    assert len({e.fields["request_id"] for e in requests}) == 30
    # Every error has the debug detail of its thread written before it, marked.
    errors = [e for e in events if e.severity == bread.Severity.ERROR]
    assert errors and all(not e.backtrace for e in errors)
    kept = [e for e in events if e.backtrace]
    assert kept and {e.severity for e in kept} == {bread.Severity.DEBUG}
    # The traced function's secret never reached the file.
    assert b"s3cr3t" not in path.read_bytes()
    assert any(e.message.startswith("call load_cart(user=") for e in kept)
    # The console had the warnings and errors only, rendered as bread renders them.
    lines = r.stderr.splitlines()
    assert lines and all(line.startswith(("WARN ", "ERRO ")) for line in lines)
    assert len(lines) == len([e for e in events
                              if e.severity >= bread.Severity.WARNING and not e.backtrace])
