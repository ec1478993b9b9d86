"""Suite-wide settings: Hypothesis runs without deadlines (the machine is shared
and loaded; timing is for benchmarks, not tests) and derandomized in CI so a
run is reproducible; the one SparkSession every Spark test shares; and, when the
suite runs on several pytest-xdist workers (``scripts/test.sh``: ``-n 2 --dist
loadgroup``), every test that takes that session in one group, so the run still
starts one SparkSession, on one worker, while the other worker takes the rest."""
import os

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile("spatec", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("ci", deadline=None, derandomize=True,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("ci" if os.environ.get("CI") else "spatec")


def pytest_collection_modifyitems(config, items):
    """Tests that take the shared SparkSession run on one xdist worker (one session per run)."""
    for item in items:
        if "spark" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.xdist_group("spark"))


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
