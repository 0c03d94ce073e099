# Makes tests/reader importable as plain modules (import compare) for pytest.
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
