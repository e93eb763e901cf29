"""_lib.py — loads libonnxtrain and declares its C API to cffi (ABI mode).

The declarations are read from the onnxtrain.h installed beside the library, the one
header the C API has, so the binding never keeps a second copy of them: preprocessor
lines (other than integer #defines), the export macro and the C++ guards are dropped
and the rest is given to ffi.cdef as it is. cffi releases the GIL around every call.
"""
import os
import re

from cffi import FFI

_HERE = os.path.dirname(os.path.abspath(__file__))


def _declarations(header):
    out, skip_cpp = [], False
    for line in header.splitlines():
        s = line.strip()
        if s.startswith("#ifdef __cplusplus"):
            skip_cpp = True
            continue
        if skip_cpp:
            skip_cpp = not s.startswith("#endif")
            continue
        if s.startswith("#"):
            m = re.match(r"#define\s+(ONNXTRAIN_\w+)\s+(\d+)\s*$", s)
            if m:
                out.append("#define %s %s" % (m.group(1), m.group(2)))
            continue
        out.append(line.replace("ONNXTRAIN_API ", ""))
    return "\n".join(out)


def _find(name, env):
    """The library or header: $ONNXTRAIN_LIBRARY / _HEADER, else the package's own copy."""
    path = os.environ.get(env) or os.path.join(_HERE, name)
    if not os.path.exists(path):
        raise ImportError("onnxtrain: %s not found (looked at %s; install the package with `pip install .` from "
                          "the repository, or set %s)" % (name, path, env))
    return path


ffi = FFI()
with open(_find("onnxtrain.h", "ONNXTRAIN_HEADER")) as _f:
    ffi.cdef(_declarations(_f.read()))
lib = ffi.dlopen(_find("libonnxtrain.so.0", "ONNXTRAIN_LIBRARY"))
