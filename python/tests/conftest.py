import os
import sys

# Tests import the package from this checkout (python/) and wtconv_reference from this folder, unless an
# installed lkjit is asked for explicitly (LKJIT_TEST_INSTALLED=1).
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
if os.environ.get("LKJIT_TEST_INSTALLED") != "1":
    sys.path.insert(0, os.path.dirname(HERE))
