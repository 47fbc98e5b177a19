"""A Spark standalone cluster on 127.0.0.1 for tests: a master and workers started from
the pyspark installation (``spark-class ...deploy.master.Master`` / ``...deploy.worker.Worker``),
and a SparkSession that submits to it.

    with Cluster(tmp_dir, workers=2) as cluster:      # both registered when this returns
        spark = cluster.session("my-test")            # or session(url, ...) elsewhere
        ...
        spark.stop()

Every port is chosen by Spark (port 0) and read back from the master's log; the master's
REST submission server (a fixed port, 6066) is off; nothing listens or connects beyond
127.0.0.1. The daemons run in process groups of their own, so ``stop`` (also run when
``start`` fails) ends them and the executors they started, however the test ended.

The workers get the test's environment without ``PYTHONPATH``: their executors start
``PYSPARK_PYTHON`` (this interpreter) as a deployment does, importing the packages
installed in its environment, never the driver's source tree by accident; they inherit
``BLOG_PURE_PYTHON``/``BREAD_PURE_PYTHON``, so the suite's pure pass reads on the pure path
there too. Other tests (object storage, for one) start the same cluster with ``env=``
holding what their executors need (an endpoint, credentials).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from typing import Any, Mapping

import pyspark

#: Spark's home in a pip installation of pyspark: its ``bin/spark-class`` starts the daemons.
SPARK_HOME = os.path.dirname(os.path.abspath(pyspark.__file__))
#: How long the daemons may take to start and register (a loaded 2-core machine: seconds).
START_TIMEOUT = 180.0
#: The master's settings (``--properties-file``): no REST server on its fixed port.
MASTER_PROPERTIES = "spark.master.rest.enabled false\nspark.ui.showConsoleProgress false\n"
#: The JVMs of the daemons and executors: small and short-lived, so the quick JIT only and
#: the serial collector (less CPU at start on a loaded 2-core machine).
JAVA_OPTS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"

_MASTER_URL = re.compile(r"Starting Spark master at (spark://\S+)")
_MASTER_UI = re.compile(r"Successfully started service 'MasterUI' on port (\d+)")


def installed_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The test's environment as a deployment's workers would have it: no ``PYTHONPATH``."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(extra or {})
    return env


class Cluster:
    """A master and ``workers`` workers of ``cores`` cores and ``memory`` each, whose files
    (logs, the workers' directories) are all under ``directory``."""

    def __init__(self, directory: str, workers: int = 2, cores: int = 1, memory: str = "1g",
                 env: Mapping[str, str] | None = None) -> None:
        self.directory = directory
        self.workers = workers
        self.cores = cores
        self.memory = memory
        self.env = installed_env(env)
        self.env.update(SPARK_HOME=SPARK_HOME, SPARK_LOCAL_IP="127.0.0.1",
                        SPARK_LOG_DIR=os.path.join(directory, "logs"),
                        SPARK_DAEMON_MEMORY="256m", SPARK_DAEMON_JAVA_OPTS=JAVA_OPTS)
        self.url = ""           # spark://127.0.0.1:PORT once started
        self.ui = ""            # the master's web UI (its /json/ says the workers)
        self._procs: list[subprocess.Popen] = []
        self._logs: list[str] = []

    def __enter__(self) -> "Cluster":
        self.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    # --- the daemons -------------------------------------------------------------------

    def start(self, wait: bool = True) -> None:
        """Start the master, then the workers; return once all are registered with it, or
        with ``wait=False`` once they are started (then ``wait_registered()``: a driver
        can start meanwhile)."""
        try:
            props = os.path.join(self.directory, "master.properties")
            with open(props, "w") as f:
                f.write(MASTER_PROPERTIES)
            master = self._daemon("master", "org.apache.spark.deploy.master.Master",
                                  "--host", "127.0.0.1", "--port", "0", "--webui-port", "0",
                                  "--properties-file", props)
            self.url = self._wait_for(master, _MASTER_URL)
            self.ui = f"http://127.0.0.1:{self._wait_for(master, _MASTER_UI)}"
            for k in range(self.workers):
                work = os.path.join(self.directory, f"worker{k}")
                os.makedirs(work, exist_ok=True)
                self._daemon(f"worker{k}", "org.apache.spark.deploy.worker.Worker", self.url,
                             "--host", "127.0.0.1", "--cores", str(self.cores),
                             "--memory", self.memory, "--webui-port", "0", "--work-dir", work)
            if wait:
                self.wait_registered()
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """End every daemon and what it started (executors): SIGTERM to each process group,
        SIGKILL to what is left after 20 s. Safe to call twice."""
        for p in self._procs:
            _signal_group(p, signal.SIGTERM)
        deadline = time.monotonic() + 20
        for p in self._procs:
            try:
                p.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
            _signal_group(p, signal.SIGKILL)   # the group: executors outlive a worker's TERM
            p.wait()
        self._procs.clear()

    def state(self) -> dict[str, Any]:
        """What the master says of itself and its workers (its web UI's JSON)."""
        # No proxy, whatever the environment says: only 127.0.0.1 is contacted.
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with opener.open(f"{self.ui}/json/", timeout=10) as r:
            return dict(json.load(r))

    def log(self, name: str = "master") -> str:
        """The console output of a daemon (``master``, ``worker0``, ...), for failures."""
        with open(os.path.join(self.directory, f"{name}.log"), errors="replace") as f:
            return f.read()

    def _daemon(self, name: str, cls: str, *args: str) -> subprocess.Popen:
        path = os.path.join(self.directory, f"{name}.log")
        with open(path, "wb") as out:
            p = subprocess.Popen([os.path.join(SPARK_HOME, "bin", "spark-class"), cls, *args],
                                 stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                 env=self.env, cwd=self.directory, start_new_session=True)
        self._procs.append(p)
        self._logs.append(path)
        return p

    def _wait_for(self, proc: subprocess.Popen, pattern: re.Pattern[str]) -> str:
        """The first group of ``pattern`` once the daemon's log has it."""
        name = os.path.basename(self._logs[self._procs.index(proc)])[:-len(".log")]
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            m = pattern.search(self.log(name))
            if m:
                return m.group(1)
            self._check_running(deadline, f"{name}: no line matching {pattern.pattern!r}")
            time.sleep(0.1)

    def wait_registered(self) -> None:
        """Return once every worker is registered with the master (its web UI says so)."""
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            try:
                if self.state()["aliveworkers"] >= self.workers:
                    return
            except OSError:       # the web UI not answering yet
                pass
            self._check_running(deadline, f"fewer than {self.workers} workers registered")
            time.sleep(0.2)

    def _check_running(self, deadline: float, waiting_for: str) -> None:
        for p, path in zip(self._procs, self._logs):
            if p.poll() is not None:
                raise RuntimeError(f"{path} exited ({p.returncode}):\n{_tail(path)}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"after {START_TIMEOUT:.0f} s, {waiting_for}:\n"
                               f"{_tail(self._logs[0])}")

    def session(self, app: str, **conf: str) -> Any:
        """A SparkSession submitting to this cluster (``session``)."""
        return session(self.url, app, **conf)


def session(url: str, app: str, **conf: str) -> Any:
    """A SparkSession submitting to the cluster at ``url``, its driver on 127.0.0.1, its
    executors (1 core, 512 MiB each) running this interpreter; ``conf`` adds settings."""
    from pyspark.sql import SparkSession
    # A session started in-process reads PYSPARK_PYTHON once, as its context starts
    # (spark.pyspark.python is spark-submit's), and the driver's JVM, if this starts it,
    # SPARK_LOCAL_IP; both put back afterwards.
    ours = {"PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}
    before = {k: os.environ.get(k) for k in ours}
    os.environ.update(ours)
    try:
        b = (SparkSession.builder.master(url).appName(app)
             .config("spark.pyspark.python", sys.executable)
             .config("spark.driver.host", "127.0.0.1")
             .config("spark.driver.bindAddress", "127.0.0.1")
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.executor.cores", "1").config("spark.executor.memory", "512m")
             .config("spark.executor.extraJavaOptions", JAVA_OPTS)
             .config("spark.driver.extraJavaOptions", JAVA_OPTS)   # if this starts it
             .config("spark.sql.shuffle.partitions", "2")
             .config("spark.sql.session.timeZone", "UTC"))
        for k, v in conf.items():
            b = b.config(k, v)
        s = b.getOrCreate()
    finally:
        for name, old in before.items():
            if old is None:
                del os.environ[name]
            else:
                os.environ[name] = old
    if s.sparkContext.master != url:    # another session was still active
        raise RuntimeError(f"a Spark session on {s.sparkContext.master} is still active")
    s.sparkContext.setLogLevel("ERROR")
    return s


def _signal_group(p: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(p.pid, sig)     # start_new_session: the group is the daemon's pid
    except ProcessLookupError:
        pass


def _tail(path: str, lines: int = 30) -> str:
    with open(path, errors="replace") as f:
        return "".join(f.readlines()[-lines:])
