#!/usr/bin/env bash
# Creates the project's Python environment at ./.venv (ignored by git) and installs into it
# python/requirements.txt (torch pinned to 2.13.0, whose CPU build pip takes from the machine's
# own wheel; any other version would download a CUDA build of several GB; torchao 0.18.0 for the
# capture's tests of torchao's MX and NVFP4 tensors), torchtitan for
# examples/torchtitan (examples/torchtitan/requirements.txt, without its own dependencies) and
# the capture package from ./python, the way a user installs it. Safe to re-run: it reinstalls
# the capture package so that .venv always holds the checkout's version.
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
    "$python" -m venv .venv
fi
.venv/bin/python -m pip install --quiet -r python/requirements.txt
.venv/bin/python -m pip install --quiet --no-deps -r examples/torchtitan/requirements.txt
.venv/bin/python -m pip install --quiet --force-reinstall --no-deps ./python
rm -rf python/build python/*.egg-info  # setuptools' leftovers: a stale copy must not install
.venv/bin/python -c 'import torch, h5py, numpy, ttrace; print("python:", torch.__version__, "h5py", h5py.__version__, "numpy", numpy.__version__, "ttrace", ttrace.__version__)'
