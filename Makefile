# make demo: set up, log from the example app, render it with bread.
# make test: set up, run the whole suite.
# make quick: the suite without the tests marked slow, on the C path only.
# make docs: the documentation as a site, into site/ (docs/architecture.md, "About these docs", says why MkDocs).
# make soak: a file set's whole life under kills, for SOAK_SECONDS (tests/lifecycle_soak.py).
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python

# The newest Python, for a second pass of make test (the C path, in its own venv): python3.13
# on the PATH, else pyenv's latest 3.13; none found (or PYTHON313= given empty), no pass.
PYTHON313 ?= $(shell for p in python3.13 \
	"$$(pyenv root 2>/dev/null)/versions/$$(pyenv latest 3.13 2>/dev/null)/bin/python3.13"; \
	do "$$p" -c 'import sys; print(sys.executable)' 2>/dev/null && break; done)
VENV313    ?= .venv-$(notdir $(PYTHON313))
PY313      := $(VENV313)/bin/python
# What that pass runs (the tests marked slow are left to the first Python's passes).
PYTEST313  ?= -m "not slow"
# How many pytest processes share a pass (pytest-xdist: one a core; a file's tests stay in
# one process, in their order). PYTEST_JOBS=-n0 runs a pass in one process.
PYTEST_JOBS ?= -n auto --dist loadfile

.PHONY: demo test quick docs sanitize soak bench clean

# The C sources of the extensions and their headers, each beside the module it mirrors
# (setup.py lists them one by one).
CSRC   := $(wildcard blog/_*.[ch] blog/*/_*.[ch] blogformat/*.[ch] bread/*/_*.[ch])

# The package alone (what the demo needs), then the test, Spark and docs extras (what the
# suite and make docs need).
$(VENV)/.base: pyproject.toml setup.py $(CSRC)
	@rm -f $@
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Python 3.11+ is needed (set PYTHON=...)")'
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e .
	touch $@

$(VENV)/.installed: $(VENV)/.base
	@rm -f $@
	$(PY) -m pip install -q -e '.[test,spark,docs]'
	touch $@

# The same on PYTHON313 (its C extensions are built beside the first Python's: each file
# names its Python), for make test only: every C warning an error (BLOG_STRICT_C=1,
# setup.py). An extra whose wheels are not there for it yet is left out: the tests that
# need it skip, saying what is missing.
$(VENV313)/.installed: pyproject.toml setup.py $(CSRC)
	@rm -f $@
	$(PYTHON313) -m venv $(VENV313)
	$(PY313) -m pip install -q --upgrade pip
	BLOG_STRICT_C=1 $(PY313) -m pip install -q -e '.[test]'
	BLOG_STRICT_C=1 $(PY313) -m pip install -q -e '.[spark]' || echo "make: the spark extra is not installed on $(PYTHON313): its tests skip"
	touch $@

# Three threads log into demo.blog; bread shows it in time order, with each event's fields
# and the traceback under the exception's event.
demo: $(VENV)/.base
	rm -f demo.blog
	$(PY) examples/quickstart.py demo.blog
	$(VENV)/bin/bread -s demo.blog

# The C extensions built again with every warning an error (BLOG_STRICT_C=1: setup.py; a
# user's install only shows them), the lint (ruff) and the types (mypy), both configured in
# pyproject.toml, then the documentation site (make docs: a broken link or reference fails
# it), then the whole suite twice, as msgpack-python does: the C fast paths (and then their
# part under the sanitizers: make sanitize, where gcc has them), then the pure-Python
# reference; then, if a PYTHON313 is found, the C path on it. Every step runs even when one
# before it failed; the rule fails if any did.
test: $(VENV)/.installed
	status=0; \
	BLOG_STRICT_C=1 $(PY) setup.py -q build_ext --inplace --force -j 2 || status=1; \
	$(PY) -m ruff check . || status=1; \
	$(PY) -m mypy blog bread blogformat blogstore || status=1; \
	$(DOCS) --quiet || status=1; \
	$(PY) -m pytest -q $(PYTEST_JOBS) || status=1; \
	if [ -f "$$(gcc -print-file-name=libasan.so 2>/dev/null)" ]; then \
		$(MAKE) --no-print-directory sanitize || status=1; \
	else echo "make: no gcc with AddressSanitizer's runtime: make sanitize left out"; fi; \
	BLOG_PURE_PYTHON=1 BREAD_PURE_PYTHON=1 $(PY) -m pytest -q $(PYTEST_JOBS) || status=1; \
	if [ -n "$(PYTHON313)" ]; then \
		echo "make: the C path on $(PYTHON313)"; \
		$(MAKE) --no-print-directory $(VENV313)/.installed PYTHON313="$(PYTHON313)" \
			&& $(PY313) -m pytest -q $(PYTEST_JOBS) $(PYTEST313) || status=1; \
	else echo "make: no python3.13 found: the suite ran on $(PYTHON) only"; fi; \
	exit $$status

# While working: the C path, without the few tests marked slow (each takes seconds to minutes).
quick: $(VENV)/.installed
	$(PY) -m pytest -q $(PYTEST_JOBS) -m "not slow"

# The C extensions under AddressSanitizer and UndefinedBehaviorSanitizer (gcc): built again
# (BLOG_STRICT_C=1) into build/sanitize beside a copy of the packages, the in-place builds
# left as they are, then the test files that drive the C code hardest run on them, first on
# the path (python -P: not the source tree; pytest-xdist's workers take the same path),
# without the slow tests. A read or write out of bounds, a use after free, undefined
# behaviour (signed overflow too: -fno-wrapv) stops the process with its stack, on the
# output (--capture=sys: the C report is not held back with a test's), and the run ends
# there (--max-worker-restart=0: with a worker started again, the run could wait forever).
# Python is not built with ASan: its runtime is preloaded, every object comes from malloc
# (PYTHONMALLOC=malloc: ASan sees its bounds), a single allocation over 2 GB fails as
# MemoryError, and leaks are not checked (numpy's module init and Python's own finalization
# leave unreferenced objects: every exit would report them). A child that a test starts in
# the source tree runs the in-place build, with ASan's runtime but without its checks.
SANITIZE       := build/sanitize
SANITIZE_FLAGS := -fsanitize=address,undefined -fno-omit-frame-pointer \
	-fno-sanitize-recover=undefined -fno-wrapv -g
SANITIZE_ENV    = LD_PRELOAD="$$(gcc -print-file-name=libasan.so)" PYTHONMALLOC=malloc \
	PYTHONPATH="$(CURDIR)/$(SANITIZE)/lib" UBSAN_OPTIONS=print_stacktrace=1 \
	ASAN_OPTIONS=detect_leaks=0:allocator_may_return_null=1:max_allocation_size_mb=2048
# The files, each for the C it drives, C against the Python reference where it can:
# the reader (bread/decode/_native.c and _decode.c, bread/sinks/_lines.c, _events.c,
# _batches.c and _tables.c) on damaged, crafted and golden files (test_damage,
# test_hostile_columnar, test_hostile_tracebacks, test_reader_edges, test_golden,
# test_compact_golden), in parity with Python (test_render_parity), as batches and typed
# tables (test_batches, test_columnar_batches, test_typedsink); the C++ binlog reader
# (bread/cxx/_binlog.c: test_cxx, test_hostile_cxx), the merge (bread/merge/_merge.c:
# test_sort), compaction (bread/compact/_compact.c: test_compact_c, test_hostile_compact); the
# writer (blog/_extension.h lists its files): the encoder (test_encode_parity), the channel
# (test_channel), the logger's, @blog.event's, @blog.traced's and the logging bridge's calls
# (test_event, test_traced, test_traced_paths, test_stdlib, test_stdlibcalls,
# test_hostile_stdlib), the context fields (test_context) and the span's ids in them
# (test_correlation), the parts (test_parts). Left to
# the C pass: the files that are mostly files, processes and Python (sets, rotation, crash
# buffers, shipping, Spark).
# Deselected: the tests that bound a child's peak memory, which the sanitizers multiply
# (shadow memory, freed memory held back to catch a use after free), and the longest one
# about memory growth (tracemalloc, 20,000 renames: not a question for ASan).
SANITIZE_TESTS ?= tests/test_render_parity.py tests/test_encode_parity.py tests/test_damage.py \
	tests/test_hostile_cxx.py tests/test_hostile_columnar.py tests/test_hostile_compact.py \
	tests/test_hostile_tracebacks.py tests/test_hostile_stdlib.py tests/test_reader_edges.py \
	tests/test_golden.py tests/test_compact_golden.py tests/test_batches.py \
	tests/test_columnar_batches.py tests/test_typedsink.py tests/test_cxx.py tests/test_sort.py \
	tests/test_compact_c.py tests/test_channel.py tests/test_event.py tests/test_traced.py \
	tests/test_traced_paths.py tests/test_stdlib.py tests/test_stdlibcalls.py \
	tests/test_context.py tests/test_correlation.py tests/test_parts.py
SANITIZE_SKIP  ?= --deselect tests/test_reader_edges.py::test_the_cli_prints_an_amplifying_file_in_bounded_memory \
	--deselect tests/test_reader_edges.py::test_sorting_holds_a_bounded_amount_of_lines \
	--deselect tests/test_reader_edges.py::test_metadata_described_again_and_again_does_not_grow_memory

$(SANITIZE)/.built: $(VENV)/.installed setup.py Makefile $(CSRC)
	rm -rf $(SANITIZE)
	BLOG_STRICT_C=1 CFLAGS="$(SANITIZE_FLAGS)" LDFLAGS="-fsanitize=address,undefined" \
		$(PY) setup.py -q build_ext -j 2 --build-lib $(SANITIZE)/ext --build-temp $(SANITIZE)/temp
	touch $@

sanitize: $(SANITIZE)/.built
	rm -rf $(SANITIZE)/lib
	$(PY) setup.py -q build_py --build-lib $(SANITIZE)/lib
	cp -R $(SANITIZE)/ext/. $(SANITIZE)/lib/
	$(SANITIZE_ENV) $(PY) -P -c 'import sys, blog._speedups as a, bread._speedups as b, \
		bread._merge as c, bread._compact as d, bread._binlog as e; \
		sys.exit([m.__file__ for m in (a, b, c, d, e) \
		if not m.__file__.startswith("$(CURDIR)/$(SANITIZE)/lib/")] or None)'
	$(SANITIZE_ENV) $(PY) -P -m pytest -q --capture=sys -p no:cacheprovider $(PYTEST_JOBS) \
		--max-worker-restart=0 -m "not slow" $(SANITIZE_SKIP) $(SANITIZE_TESTS)

# Services with forked workers writing one rotated, compressed, compacted, shipped set with a
# crash buffer, killed at random moments for SOAK_SECONDS; then every returned event must have
# been shipped once. SOAK_SEED=N replays a run's choices; with BLOG_PURE_PYTHON=1
# BREAD_PURE_PYTHON=1, the pure-Python path. tests/test_lifecycle_soak.py runs it for seconds.
SOAK_SECONDS ?= 300
soak: $(VENV)/.installed
	$(PY) tests/lifecycle_soak.py --seconds $(SOAK_SECONDS) $(if $(SOAK_SEED),--seed $(SOAK_SEED))

# The documentation as a site (MkDocs: docs/architecture.md says why): the pages of docs/
# and the API reference made from the docstrings, into site/. --strict: a broken link,
# anchor or cross-reference is an error, not a warning. (NO_MKDOCS_2_WARNING: the theme's
# notice about a future MkDocs, printed at every build.)
DOCS = NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --site-dir site
docs: $(VENV)/.installed
	$(DOCS)

$(VENV)/.bench: $(VENV)/.installed
	$(PY) -m pip install -q -e '.[bench]'
	touch $@

bench: $(VENV)/.bench
	$(PY) benchmarks/hot_path.py

clean:
	rm -rf $(VENV) $(VENV313) build demo.blog site *.egg-info .pytest_cache .hypothesis
