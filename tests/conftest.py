"""pytest configuration for the suite: the plugin through which test modules name the extra they
need (:mod:`extras`), and shared fixtures.  ``spark``: one local[2] SparkSession for the whole
test session (a session starts in 8-17 s here), UI off, the Python workers pinned to this
interpreter.  ``counting``: the compiled modules built with their cost counters
(:mod:`costcount`), for the tests that bound growth by counting.  Hypothesis runs without a
deadline or its too-slow health check: no test is timed."""
import os
import sys

import pytest
from hypothesis import HealthCheck, settings

pytest_plugins = ["extras"]

# No property test is timed: no per-example deadline, and no health check that fails a test
# because generating its examples was slow on a busy machine (issue 30 part 4).
settings.register_profile("rocketpy", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("rocketpy")


@pytest.fixture(scope="session")
def spark():
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession
    session = (SparkSession.builder.master("local[2]").appName("rocketpy-capture-tests")
               .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "4").getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def counting():
    import costcount
    return costcount.counting_modules()


@pytest.fixture(autouse=True)
def _rocketpy_log_level_reset():
    """Tests start service trees (``makeService``, with its ``--logLevel`` service) without
    stopping them; the level they set is process-wide (rocketpy's twisted.logger filter and its
    stdlib logger's level), so each test starts with every level."""
    yield
    import logging

    from rocketpy.transport import logs
    logs.predicate.clearLogLevels()
    logging.getLogger(logs.STDLIB_LOGGER).setLevel(logging.NOTSET)
