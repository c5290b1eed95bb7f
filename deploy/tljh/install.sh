#!/bin/sh
# The course on The Littlest JupyterHub (one Debian/Ubuntu server, a class; book/instructor.md, "一个班用一台
# 服务器", says each step). Run as root FROM THE COURSE REPOSITORY ON THE SERVER, after TLJH itself:
#
#   sudo sh /root/normlab/deploy/tljh/install.sh course [WHEEL]   # the course for every learner (WHEEL: by
#                                          #   default built afresh from this repository into dist/)
#   sudo sh /root/normlab/deploy/tljh/install.sh teacher NAME     # NAME's solutions, after NAME logged in once
# (a full path, no `cd /root/normlab` first: /root is root's only, so the admin's own shell cannot enter it)
#
# The repository holds every answer: keep it where only root reads it (e.g. /root/normlab); this script
# refuses to run from a copy other accounts can read. Learners get the wheel, which carries none.
# Each step is idempotent. TLJH_PREFIX (default /opt/tljh) is for tests only.
set -eu
# Every Python this script runs (pip, the course's init) in UTF-8 mode, whatever the admin's locale (a GBK
# terminal): file names and the course's text stay UTF-8.
export PYTHONUTF8=1
TLJH=${TLJH_PREFIX:-/opt/tljh}
USER_ENV=$TLJH/user/bin
REPO=$(cd "$(dirname "$0")/../.." && pwd)
TORCH="torch==2.13.0"            # the version run.py installs (requirements-tested.txt)
TORCH_INDEX=https://download.pytorch.org/whl/cpu

say() { printf '[normlab] %s\n' "$*"; }
die() { printf '[normlab] %s\n' "$*" >&2; exit 1; }

[ -x "$USER_ENV/python" ] ||
    die "没有找到 TLJH 的用户环境 $TLJH/user：请先安装 TLJH (book/instructor.md 第 2 步)。(no TLJH user environment at $TLJH/user: install TLJH first)"
"$USER_ENV/python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' ||
    die "$TLJH/user 的 Python 是 $("$USER_ENV/python" -V 2>&1)，课程需要 3.11 或更新（新装的 TLJH 2.x 是 3.12）。(the course needs Python >= 3.11 in TLJH's user environment)"

# The answers must not be readable by the accounts learners use.
if id nobody >/dev/null 2>&1 && runuser -u nobody -- test -r "$REPO/notebooks/01_residuals.md" 2>/dev/null; then
    die "$REPO 里的课程源文件其他账户也能读到（里面有全部答案）。请把仓库放到只有 root 能读的地方，例如
    sudo mv $REPO /root/normlab，或者 sudo chmod 700 $REPO，再运行。
    (the repository, with every answer, is readable by other accounts: move it, e.g. to /root/normlab)"
fi

case "${1:-}" in
course)
    WHEEL=${2:-}
    if [ -z "$WHEEL" ]; then
        # Always afresh from the repository as it is now (after a `git pull`, an old wheel in dist/ would
        # carry the old lessons; the version number does not change with each commit).
        rm -f "$REPO"/dist/normlab-*.whl
        say "building the wheel into $REPO/dist/ ..."
        "$USER_ENV/python" -m pip wheel --no-deps -q -w "$REPO/dist" "$REPO"
        WHEEL=$(ls "$REPO"/dist/normlab-*.whl | tail -n 1)
    fi
    [ -f "$WHEEL" ] || die "no wheel at $WHEEL"
    # 1. CPU torch from PyTorch's CPU index ONLY (~0.2 GB): were that index unreachable, pip with PyPI as a
    #    second index would quietly install the ~2.6 GB CUDA build. Here it stops with the reason instead.
    say "CPU torch ($TORCH) from $TORCH_INDEX ..."
    "$USER_ENV/pip" install --timeout 30 --retries 2 --index-url "$TORCH_INDEX" "$TORCH" ||
        die "could not install $TORCH from $TORCH_INDEX (is it reachable from this server?); nothing else was changed"
    # 2. The course (torch is already there, so pip keeps it), then what run.py also removes: rfc3987-syntax
    #    costs ~0.7 s of CPU at every server start (jsonschema imports it; no Jupyter schema needs it).
    #    pip skips a local wheel whose version is already installed ("already installed with the same
    #    version as the provided wheel", pip's resolvelib/resolver.py), so an update in term would change
    #    nothing: the second call puts this wheel's files in place (--no-deps: torch and the rest stay).
    "$USER_ENV/pip" install "$WHEEL"
    "$USER_ENV/pip" install --no-deps --force-reinstall "$WHEEL"
    "$USER_ENV/pip" uninstall -y -q rfc3987-syntax || true
    # 3. Memory and CPU per learner through TLJH's own settings, from deploy/sizing.json (one source).
    MEM=$("$USER_ENV/python" -c 'import json, sys; print(json.load(open(sys.argv[1], encoding="utf-8"))["rule"]["memory_limit"])' "$REPO/deploy/sizing.json")
    CPU=$("$USER_ENV/python" -c 'import json, sys; print(json.load(open(sys.argv[1], encoding="utf-8"))["rule"]["cpu_limit"])' "$REPO/deploy/sizing.json")
    tljh-config set limits.memory "$MEM"
    tljh-config set limits.cpu "$CPU"
    # 4. Each learner's workspace at every server start, private files, terminals with the course's python.
    install -d -m 0700 "$TLJH/config/jupyterhub_config.d"
    install -m 0644 "$REPO/deploy/tljh/normlab.py" "$TLJH/config/jupyterhub_config.d/normlab.py"
    tljh-config reload
    say "done: limits.memory=$MEM limits.cpu=$CPU; each learner's ~/normlab-course is written at their first login"
    ;;
teacher)
    NAME=${2:?"usage: sudo sh deploy/tljh/install.sh teacher NAME  (NAME: the teacher's hub login name)"}
    ACCOUNT=${NORMLAB_TEACHER_ACCOUNT:-jupyter-$NAME}      # TLJH's accounts are jupyter-<login name>
    # The teacher's home from the account database: never `~`, which the admin's shell would expand to
    # the admin's own home.
    THOME=$(getent passwd "$ACCOUNT" | cut -d: -f6)
    [ -n "$THOME" ] && [ -d "$THOME" ] ||
        die "no account $ACCOUNT yet: log in once as $NAME (TLJH makes the account then), then run this again
    (a login name of 18 characters or more: TLJH shortens the account's name; give the one \`ls /home\` shows
    as NORMLAB_TEACHER_ACCOUNT=jupyter-... before sh)"
    # The lessons with their answers, readable by the teacher only for the length of one init.
    TMP=$(mktemp -d)
    trap 'rm -rf "$TMP"' EXIT
    mkdir -p "$TMP/course/book"
    cp -R "$REPO/notebooks" "$TMP/course/notebooks"
    cp "$REPO/book/glossary.md" "$TMP/course/book/glossary.md"
    chown -R "$ACCOUNT" "$TMP"
    cd /                                   # (the repository's folder is root's only)
    runuser -u "$ACCOUNT" -- env HOME="$THOME" "$USER_ENV/normlab-course" init "$THOME/normlab-course" \
        --solutions --from "$TMP/course"
    say "done: $THOME/normlab-course/solutions/ (only $ACCOUNT can read it)"
    ;;
*)
    die "usage: sudo sh deploy/tljh/install.sh course [WHEEL] | teacher NAME"
    ;;
esac
