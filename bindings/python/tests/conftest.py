"""Makes the package importable from the source tree (no install needed):
`python3 -m pytest bindings/python/tests` from the repo root."""

import os
import sys

_SRC = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src")
if os.environ.get("SANDGATE_TEST_INSTALLED") != "1" and _SRC not in sys.path:
    sys.path.insert(0, _SRC)
