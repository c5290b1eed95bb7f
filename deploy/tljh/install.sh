#!/bin/sh
# The course on The Littlest JupyterHub (one Ubuntu server, a class of up to ~50): run as root on the
# server AFTER installing TLJH itself (its documentation's one-line installer, with --admin <you>).
# NOT RUN HERE (the course's machines have no systemd). Each step is idempotent.
set -eu
WHEEL=${1:?"usage: sh install.sh normlab-<version>-py3-none-any.whl"}
USER_ENV=/opt/tljh/user/bin

# 1. CPU torch first (the course never needs a GPU; the CPU build is ~0.2 GB instead of ~2.6 GB),
#    at the version run.py installs (requirements-tested.txt), then the course itself.
"$USER_ENV/pip" install --extra-index-url https://download.pytorch.org/whl/cpu "torch==2.13.0"
"$USER_ENV/pip" install "$WHEEL"

# 2. Each learner's workspace at every server start (deploy/tljh/normlab.py), one torch thread per kernel.
install -m 0644 "$(dirname "$0")/normlab.py" /opt/tljh/config/jupyterhub_config.d/normlab.py
tljh-config reload

# 3. A learner's first login creates their account and their ~/normlab-course; a teacher's copy with
#    the solutions:  sudo -u jupyter-<teacher> /opt/tljh/user/bin/normlab-course init ~/teacher --solutions
