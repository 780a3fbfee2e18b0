"""Spark sessions for the Spark engine (:mod:`tessera.data.spark_source`): the active one, or a
new one on a master URL; and :func:`spark_scope`, the run that owns the sessions it starts.

A run that starts its own session (the CLI wraps every command in a scope) stops it at its end:
a JVM left to exit with a live SparkContext races Spark's shutdown hooks ("Shutdown hooks cannot
be modified during shutdown") and a cluster records the application as *failed*. Quiet, a new
session logs errors only, draws no progress bars, and PySpark's FutureWarnings are ignored
(docs/spark.md, "On a cluster"). PySpark is imported only when a session is asked for.
"""

from __future__ import annotations

import os
import re
import signal
import sys
import threading
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, nullcontext
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tessera.errors import DataError

__all__ = ["QUIET_LOG_CONFIG", "pyspark_sql", "spark_scope", "spark_session"]

_INSTALL_HINT = ('install PySpark: pip install "tessera-dp[spark]" '
                 '(pip install ".[spark]" in a clone)')
_JAVA_HINT = "Spark needs Java 17 or newer: check `java -version` (and JAVA_HOME)"
#: Spark's driver log in a quiet :func:`spark_scope`: errors only, on stderr.
QUIET_LOG_CONFIG = Path(__file__).with_name("spark_log4j2.properties")
#: What a quiet scope drops from the JVM's own stderr, printed outside any log configuration:
#: the JVM's note on the incubator module Spark loads, and the shell's log-level notice.
_JVM_NOISE = re.compile(rb"^(WARNING: Using incubator modules|Setting default log level to|"
                        rb"To adjust logging level use sc.setLogLevel)")


def pyspark_sql() -> Any:
    """``pyspark.sql``, or a :class:`DataError` saying how to install it."""
    try:
        import pyspark.sql as sql
    except ImportError:
        raise DataError("the Spark engine needs PySpark, which is not installed",
                        hint=_INSTALL_HINT) from None
    return sql


@dataclass
class _Scope:
    """An open :func:`spark_scope`: whether it is quiet, the sessions started in it, and the
    Ctrl-C handler before the first of them (PySpark installs its own, see :func:`spark_scope`)."""

    quiet: bool
    started: list[Any] = field(default_factory=list)
    sigint: list[Any] = field(default_factory=list)


_SCOPE: ContextVar[_Scope | None] = ContextVar("tessera_spark_scope", default=None)


@contextmanager
def spark_scope(quiet: bool = True) -> Iterator[None]:
    """A run that owns the Spark sessions :func:`spark_session` starts inside it (the CLI wraps
    each command in one): on exit, normal or not, they are stopped, so the application ends
    *finished* — a JVM left to exit with a live context races Spark's shutdown hooks ("Shutdown
    hooks cannot be modified during shutdown") and a cluster records it as *failed*. Sessions
    that already existed (a notebook's, ``spark-submit``'s) are used and left running.

    ``quiet``: sessions start with Spark's log at ERROR (:data:`QUIET_LOG_CONFIG`), no console
    progress bars and without the JVM's incubator-module note; PySpark's FutureWarnings (about
    the pandas version) are ignored inside the scope.

    A SparkContext started on the main thread installs PySpark's SIGINT handler (cancel the
    jobs, then raise KeyboardInterrupt), which stays after the context stops and then fails on
    Ctrl-C (its context is gone); the scope puts back the handler it found."""
    scope = _Scope(quiet)
    token = _SCOPE.set(scope)
    try:
        with warnings.catch_warnings():
            if quiet:
                warnings.filterwarnings("ignore", category=FutureWarning, module=r"pyspark\b")
            yield
    finally:
        _SCOPE.reset(token)
        for session in scope.started:
            session.stop()
        if scope.sigint and scope.sigint[0] is not None and \
                threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGINT, scope.sigint[0])


def spark_session(master: str | None = None, config: Sequence[tuple[str, str]] = ()) -> Any:
    """The active SparkSession (``spark-submit``, a notebook) or a new one on ``master``; in a
    :func:`spark_scope`, a session started here is stopped with the scope (and quiet if it is).

    A JVM that does not start (no Java, too old a Java) is a :class:`DataError` with the check
    to run.
    """
    sql = pyspark_sql()
    active = sql.SparkSession.getActiveSession()
    if active is not None and master is None:
        return active
    scope = _SCOPE.get()
    quiet = scope is not None and scope.quiet and active is None
    builder = sql.SparkSession.builder.appName("tessera")
    if master is not None:
        builder = builder.master(master)
    if quiet:
        builder = builder.config("spark.ui.showConsoleProgress", "false").config(
            "spark.driver.extraJavaOptions",
            f"-Dlog4j2.configurationFile={QUIET_LOG_CONFIG.as_uri()}")
    for key, value in config:  # the caller's settings win
        builder = builder.config(key, value)
    before = signal.getsignal(signal.SIGINT)
    try:
        with _jvm_stderr_without(_JVM_NOISE) if quiet else nullcontext():
            session = builder.getOrCreate()
    except Exception as e:  # the JVM did not start: Py4J/PySpark raise plain exceptions
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        raise DataError(f"cannot start Spark ({master or 'default master'}): {first}",
                        hint=_JAVA_HINT) from None
    if scope is not None and active is None:
        scope.started.append(session)
        if not scope.sigint:
            scope.sigint.append(before)
    return session


@contextmanager
def _jvm_stderr_without(noise: re.Pattern[bytes]) -> Iterator[None]:
    """File descriptor 2 of the processes started inside (the JVM of a new session) is a pipe;
    a daemon thread copies its lines, except those ``noise`` matches, to this process's
    stderr for as long as they live. This process's own stderr is restored on exit."""
    sys.stderr.flush()
    read, write = os.pipe()
    target = os.dup(2)
    os.dup2(write, 2)
    os.close(write)

    def copy() -> None:
        with os.fdopen(read, "rb") as lines, os.fdopen(target, "wb", buffering=0) as out:
            for line in lines:
                if not noise.match(line):
                    out.write(line)

    threading.Thread(target=copy, name="tessera-spark-stderr", daemon=True).start()
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(target, 2)
