"""Suite-wide settings: Hypothesis runs without deadlines (the machine is shared
and loaded; timing is for benchmarks, not tests) and derandomized in CI so a
run is reproducible."""
import os

from hypothesis import HealthCheck, settings

settings.register_profile("spatec", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("ci", deadline=None, derandomize=True,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("ci" if os.environ.get("CI") else "spatec")
