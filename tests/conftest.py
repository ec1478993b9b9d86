"""Suite-wide settings: Hypothesis runs without deadlines (the machine is shared
and loaded; timing is for benchmarks, not tests) and derandomized in CI so a
run is reproducible; and the one SparkSession every Spark test shares."""
import os

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile("spatec", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("ci", deadline=None, derandomize=True,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("ci" if os.environ.get("CI") else "spatec")


@pytest.fixture(scope="session")
def spark():
    """local[2], few shuffle partitions (streaming state keeps its count); no UI, as spatec starts every session."""
    from spatec.runners.spark.session import get_or_create

    s = get_or_create("local[2]", {
        "spark.sql.shuffle.partitions": "2",
        "spark.default.parallelism": "2",
        "spark.driver.memory": "1g",
        "spark.sql.adaptive.enabled": "false",
    }, app_name="spatec-tests")
    s.sparkContext.setLogLevel("ERROR")
    yield s
    s.stop()
