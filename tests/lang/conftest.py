"""Makes the package importable when the tests run from a checkout that was not installed."""
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
try:
    import spatec  # noqa: F401
except ModuleNotFoundError:
    sys.path.insert(0, str(ROOT))
