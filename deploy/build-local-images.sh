#!/usr/bin/env bash
# Build dxrf:latest on a Debian machine that reaches Debian's packages and PyPI but no
# container registry (run as root):
#
#   1. installs docker (docker.io), docker-compose (v1, the one bookworm packages) and
#      debootstrap with apt-get when they are missing, and starts dockerd when it is not running;
#   2. builds a base image from Debian packages, Debian bookworm with Python 3.11 in a venv at
#      /opt/venv (first on PATH, so `python` and `pip` are the venv's, as in python:3.11-slim);
#      kept once built;
#   3. downloads the wheels the image needs (dxrf's dependencies, its workflows extra, bokeh,
#      jupyterlab, nbclient, ipykernel, and setuptools/wheel to build dxrf) for the base image's
#      Python, pinned to the versions installed here, into deploy/wheels/; kept while the pins hold;
#   4. builds dxrf:latest from ./Dockerfile on that base, installing only from those wheels.
#
# Settings (environment): DXRF_BASE_IMAGE (default dxrf-base:bookworm), DXRF_IMAGE (default
# dxrf:latest), DEBIAN_MIRROR (default http://deb.debian.org/debian), DXRF_DOCKERD_LOG
# (default /var/log/dxrf-dockerd.log), PYTHON (default python3: whose installed versions pin the wheels).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BASE_IMAGE=${DXRF_BASE_IMAGE:-dxrf-base:bookworm}
IMAGE=${DXRF_IMAGE:-dxrf:latest}
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
DOCKERD_LOG=${DXRF_DOCKERD_LOG:-/var/log/dxrf-dockerd.log}
PYTHON=${PYTHON:-python3}
WHEELS=$ROOT/deploy/wheels
# what the Dockerfile installs besides the project (keep in step with its pip install line)
EXTRAS=("bokeh>=3.1" "jupyterlab>=4" nbclient ipykernel "setuptools>=68" wheel)
# docker's legacy builder: the compose v1 of bookworm builds with it too, and buildx may be absent
export DOCKER_BUILDKIT=0

say() { printf 'build-local-images: %s\n' "$*" >&2; }

# 1. the tools -----------------------------------------------------------------------------
missing=()
command -v dockerd >/dev/null || missing+=(docker.io)
command -v docker-compose >/dev/null || missing+=(docker-compose)
command -v debootstrap >/dev/null || missing+=(debootstrap)
if ((${#missing[@]})); then
    say "installing ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}" >/dev/null
fi

if ! docker info >/dev/null 2>&1; then
    say "starting dockerd (log: $DOCKERD_LOG)"
    # its own session, so that it outlives this script and the test that ran it
    setsid dockerd >"$DOCKERD_LOG" 2>&1 </dev/null &
    for _ in $(seq 60); do
        docker info >/dev/null 2>&1 && break
        sleep 1
    done
    if ! docker info >/dev/null 2>&1; then
        say "dockerd did not answer within 60 s; the end of its log:"
        tail -n 30 "$DOCKERD_LOG" >&2
        exit 1
    fi
fi

# 2. the base image ------------------------------------------------------------------------
if docker image inspect "$BASE_IMAGE" >/dev/null 2>&1; then
    say "base image $BASE_IMAGE exists"
else
    say "building $BASE_IMAGE with debootstrap from $MIRROR"
    rootfs=$(mktemp -d /var/tmp/dxrf-rootfs.XXXXXX)
    trap 'rm -rf "$rootfs"' EXIT
    debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates \
        bookworm "$rootfs" "$MIRROR" >/dev/null
    chroot "$rootfs" python3 -m venv /opt/venv
    rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
    tar -C "$rootfs" -c . | docker import \
        --change 'ENV PATH=/opt/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
        --change 'ENV LANG=C.UTF-8' \
        --change 'CMD ["python"]' \
        - "$BASE_IMAGE" >/dev/null
    rm -rf "$rootfs"
    trap - EXIT
fi

# 3. the wheels ----------------------------------------------------------------------------
# binary wheels for the base image's Python (Debian's 3.11 can be older than this machine's,
# and some releases need a newer patch level), pinned to the versions installed here; dxrf
# itself is built from its sources in the image
base_python=$(docker run --rm "$BASE_IMAGE" python -c 'import platform; print(platform.python_version())')
requirements=$("$PYTHON" - "$ROOT/pyproject.toml" <<'PY'
import sys, tomllib
project = tomllib.load(open(sys.argv[1], "rb"))["project"]
print("\n".join(project["dependencies"] + project["optional-dependencies"]["workflows"]))
PY
)
pins=$("$PYTHON" -m pip freeze --exclude-editable | grep -v -e '^-e ' -e ' @ ' -e '^dxrf==' || true)
stamp=$(printf '%s\n' "$base_python" "$requirements" "${EXTRAS[@]}" "$pins" | sha256sum | cut -d' ' -f1)
if [[ -f $WHEELS/.stamp && $(cat "$WHEELS/.stamp") == "$stamp" ]]; then
    say "wheels in deploy/wheels are up to date"
else
    say "downloading wheels for Python $base_python into deploy/wheels"
    find "$WHEELS" -name '*.whl' -delete
    constraints=$(mktemp)
    printf '%s\n' "$pins" >"$constraints"
    mapfile -t reqs <<<"$requirements"
    "$PYTHON" -m pip download --quiet --dest "$WHEELS" --only-binary=:all: --python-version "$base_python" \
        --constraint "$constraints" "${reqs[@]}" "${EXTRAS[@]}"
    rm -f "$constraints"
    echo "$stamp" >"$WHEELS/.stamp"
fi

# 4. the image -----------------------------------------------------------------------------
say "building $IMAGE on $BASE_IMAGE"
previous=$(docker image inspect --format '{{.Id}}' "$IMAGE" 2>/dev/null || true)
# --force-rm: a failed step leaves no container behind
docker build --force-rm --build-arg BASE_IMAGE="$BASE_IMAGE" --build-arg WHEELS=1 -t "$IMAGE" "$ROOT" >&2
current=$(docker image inspect --format '{{.Id}}' "$IMAGE")
if [[ -n $previous && $previous != "$current" ]]; then
    docker rmi "$previous" >/dev/null 2>&1 || true  # the image it replaces (kept while a container uses it)
fi
say "built $IMAGE"
