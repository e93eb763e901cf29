#!/bin/bash
# setup_peers.sh — makes the ONNX Runtime training venv that bench/peers.py measures
# against (issue 14). Not part of CI: benchmarks only, never needed at run time.
#
#     bash bench/setup_peers.sh [VENV]      # default: $OT_ORT_VENV, else /work/venvs/ort
#
# onnxruntime-training-cpu 1.19.2 is the last CPU training wheel on PyPI; it is built
# against numpy 1.x and protobuf 3/4, hence the pins (onnx 1.16.2 is the release its
# artifact generator was tested with). The wheel for CPython 3.11 exists (cp311, manylinux_2_28).
# The package's __init__ imports torch; peers_ort.py imports onnxruntime.training.artifacts
# and .api without running it, so the venv needs no torch.
# The PyTorch side of the benchmark uses Debian's /usr/bin/python3 (PyTorch 1.13,
# torchvision); the BERT case also needs /work/venvs/hf (transformers<4.40 over that torch),
# made by:  /usr/bin/python3 -m venv --system-site-packages /work/venvs/hf &&
#           /work/venvs/hf/bin/pip install 'transformers<4.40'
# Exit status: 0 when the venv imports everything, 1 otherwise.
set -euo pipefail

VENV=${1:-${OT_ORT_VENV:-/work/venvs/ort}}
PY=${OT_ORT_BASE_PYTHON:-python3}

case "$(cd "$(dirname "$0")/.." && pwd)/" in
"$(realpath -m "$VENV")"/*) echo "setup_peers: $VENV is inside the repository; put it outside" >&2; exit 1 ;;
esac

if [ ! -x "$VENV/bin/python" ]; then
    "$PY" -m venv "$VENV"
fi
"$VENV/bin/python" -m pip install --quiet --upgrade pip
"$VENV/bin/python" -m pip install --quiet \
    "onnxruntime-training-cpu==1.19.2" "onnx==1.16.2" "numpy<2" "protobuf<5"
"$VENV/bin/python" - <<'EOF'
import os, sys, types
import numpy, onnx, onnxruntime
# as bench/peers_ort.py does: the training package's __init__ imports torch (for ORTModule
# and amp), so register the package without running it and import the two modules
pkg = types.ModuleType("onnxruntime.training")
pkg.__path__ = [os.path.join(os.path.dirname(onnxruntime.__file__), "training")]
sys.modules["onnxruntime.training"] = pkg
import onnxruntime.training.api  # noqa: F401,E402
import onnxruntime.training.artifacts  # noqa: F401,E402
print(f"setup_peers: onnxruntime {onnxruntime.__version__} (training), onnx {onnx.__version__}, "
      f"numpy {numpy.__version__}")
EOF
echo "setup_peers: ready: $VENV/bin/python (pass it to bench/peers.py --ort-python, or set OT_ORT_VENV)"
