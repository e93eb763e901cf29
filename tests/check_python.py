#!/usr/bin/env python3
"""check_python.py — runs the Python package's pytest suite (python/tests/) against this
build: the package from python/ (not installed), the library and header of the build
tree (ONNXTRAIN_LIBRARY, ONNXTRAIN_HEADER), the CLI for the bitwise comparisons.
Exits 77 (skipped) when this interpreter lacks cffi or pytest (.ci/install installs
python3-cffi and python3-pytest); `pip install .` is docs/python.md's.

usage: check_python.py ONNXTRAIN LIBRARY SOURCE_DIR TMP_DIR
"""
import os
import sys

try:
    import cffi  # noqa: F401
    import pytest
except ImportError as e:
    print("skipped: %s (apt install python3-cffi python3-pytest)" % e)
    sys.exit(77)

cli, library, src, tmp = sys.argv[1:5]
os.environ.update(ONNXTRAIN_CLI=cli, ONNXTRAIN_LIBRARY=library,
                  ONNXTRAIN_HEADER=os.path.join(src, "include", "onnxtrain.h"))
sys.path.insert(0, os.path.join(src, "python"))
sys.exit(pytest.main(["-q", "-p", "no:cacheprovider", "--basetemp", tmp, os.path.join(src, "python", "tests")]))
