#!/usr/bin/env bash
# .ci/install_zoo.sh — installs what the model zoo's export needs (samples/zoo/,
# ctest check_zoo) on a fresh Debian 12 machine, after .ci/install: torchvision from
# Debian (it matches Debian's PyTorch 1.13) and a venv with transformers<4.40 that sees
# Debian's torch. Venvs live outside the repo. Run as root (or it re-runs through sudo).
# ONNXTRAIN_ZOO_VENV overrides the venv's place (default /work/venvs/hf, DESIGN.md's).
set -euo pipefail
if [ "$(id -u)" != 0 ]; then exec sudo --preserve-env=ONNXTRAIN_ZOO_VENV bash "$0" "$@"; fi
export DEBIAN_FRONTEND=noninteractive
VENV=${ONNXTRAIN_ZOO_VENV:-/work/venvs/hf}
apt-get update -qq
apt-get install -y -qq --no-install-recommends python3-venv python3-torch python3-torchvision >/dev/null
mkdir -p "$(dirname "$VENV")"
[ -x "$VENV/bin/python" ] || /usr/bin/python3 -m venv --system-site-packages "$VENV"
"$VENV/bin/pip" install -q --disable-pip-version-check 'transformers<4.40'
# PEFT for ctest check_peft (samples/zoo/peft_check.py). --no-deps: peft's and accelerate's
# requirements would replace Debian's torch 1.13 with a current one; 0.10.0 and 0.28.0
# still run on 1.13; psutil and pyyaml have no requirements; safetensors and huggingface_hub
# come with transformers.
"$VENV/bin/pip" install -q --disable-pip-version-check --no-deps 'peft==0.10.0' 'accelerate==0.28.0' psutil pyyaml
# diffusers for the zoo's UNet2DModel (issue 26). --no-deps for the same reason: 0.30.3
# runs UNet2DModel on torch 1.13 (0.27.2 still imports huggingface_hub's removed
# cached_download); importlib_metadata (and zipp) is its one requirement that
# transformers does not bring.
"$VENV/bin/pip" install -q --disable-pip-version-check --no-deps 'diffusers==0.30.3' importlib_metadata zipp
"$VENV/bin/python" -c "import torch, torchvision, transformers, peft, diffusers; print('zoo venv', '$VENV:', 'torch', torch.__version__, 'torchvision', torchvision.__version__, 'transformers', transformers.__version__, 'diffusers', diffusers.__version__)"
