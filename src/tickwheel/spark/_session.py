"""A SparkSession for tickwheel's tests, demo and benchmark: local and on loopback.

``local_session`` starts (or returns) the process's one SparkSession, by default on
``local[N]`` with the driver bound to 127.0.0.1, no UI, no console progress bar, UTC
session time zone, few shuffle partitions (Spark's default of 200 means 200
state-store tasks per streaming micro-batch, and the number is fixed in a query's
checkpoint), Spark's own logging cut to errors, Python workers running this
interpreter, and the ``tickwheel`` data source registered. Under ``spark-submit`` (or
with an explicit ``master``) it keeps the cluster's master and addresses and only adds
the SQL settings. Settings such as driver memory take effect only on the first call in
a process: the JVM starts once.

Concurrency: call from one thread; SparkSession itself is thread-safe afterwards.
"""

from __future__ import annotations

import os
import sys
from importlib import resources

from pyspark.sql import SparkSession

from tickwheel.spark._source import KafkaDataSource

LOOPBACK = "127.0.0.1"
DEFAULT_SHUFFLE_PARTITIONS = 2
DEFAULT_CORES = 2
# spark-submit starts the JVM first and hands the Python driver its gateway port here.
_SUBMIT_GATEWAY_ENV = "PYSPARK_GATEWAY_PORT"


def register(spark: SparkSession) -> None:
    """Make ``format("tickwheel")`` available in ``spark``."""
    spark.dataSource.register(KafkaDataSource)


def local_session(
    app_name: str,
    *,
    cores: int = DEFAULT_CORES,
    shuffle_partitions: int = DEFAULT_SHUFFLE_PARTITIONS,
    master: str | None = None,
    extra_conf: dict[str, str] | None = None,
) -> SparkSession:
    """The process's SparkSession with ``tickwheel`` registered.

    Without ``master`` it is ``local[cores]`` bound to loopback, unless the process runs
    under ``spark-submit``, whose master and addresses are then kept.
    """
    builder = (
        SparkSession.builder.appName(app_name)
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
    )
    if master is not None:
        builder = builder.master(master)
    elif _SUBMIT_GATEWAY_ENV not in os.environ:
        builder = _local(builder.master(f"local[{cores}]"))
    for key, value in (extra_conf or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    register(spark)
    return spark


def _local(builder: SparkSession.Builder) -> SparkSession.Builder:
    # The JVM reads these at launch; the driver's own settings follow below.
    os.environ["SPARK_LOCAL_IP"] = LOOPBACK
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    log_config = resources.files("tickwheel.spark").joinpath("log4j2.properties")
    return (
        builder.config("spark.driver.host", LOOPBACK)
        .config("spark.driver.bindAddress", LOOPBACK)
        .config("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile=file:{log_config}")
        .config("spark.ui.enabled", "false")
    )
