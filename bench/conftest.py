import os
import sys

# the reference simulator and the test helpers
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
