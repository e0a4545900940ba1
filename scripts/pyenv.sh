#!/bin/sh
# Makes .venv (the project's Python environment) and installs dattn into it from this
# checkout: `pip install .` runs the C build and ships libdattn.so inside the package.
# Re-running is cheap: pinned packages already present are skipped.
set -eu
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  echo "== creating .venv with $($PY --version 2>&1)"
  "$PY" -m venv .venv
fi
echo "== installing Python dependencies (requirements-dev.txt)"
.venv/bin/python -m pip install -q --disable-pip-version-check -r requirements-dev.txt
echo "== installing dattn into .venv"
.venv/bin/python -m pip install -q --disable-pip-version-check --no-deps --force-reinstall .
