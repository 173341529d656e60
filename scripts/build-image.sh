#!/usr/bin/env bash
# build-image.sh [BUILD-OPTION...]: the container image (Containerfile) from the Debian package, with Podman or
# Docker. `make image` runs it. The build context is a temporary folder holding the Containerfile and the package
# as sleepproxyd.deb, nothing else of the repository.
#
# Environment:
#   ENGINE  the command that builds: podman or docker (the first found); it may carry the engine's own options
#           ("podman --cgroup-manager cgroupfs").
#   DEB     the package (default: the newest dist/sleepproxyd_*.deb; `make deb` builds it).
#   BASE    the base image (default: debian:12-slim).
#   IMAGE   the image's name (default: sleepproxyd), tagged with the package's version and `latest`.
# BUILD-OPTIONs go to the engine's build command (--network none, --pull=never, ...).
# Prints `figure: image_bytes: N` (the image's size, base included) and `figure: image_build_seconds: N`.
set -euo pipefail
cd "$(dirname "$0")/.."

engine=${ENGINE:-}
if [[ -z $engine ]]; then
    for candidate in podman docker; do
        if command -v "$candidate" >/dev/null; then
            engine=$candidate
            break
        fi
    done
fi
[[ -n $engine ]] || { echo "build-image: neither podman nor docker is installed (apt-get install podman)" >&2; exit 1; }
read -r -a engine_command <<<"$engine"

deb=${DEB:-}
if [[ -z $deb ]]; then
    deb=$(ls -t dist/sleepproxyd_*.deb 2>/dev/null | head -n 1 || true)
fi
[[ -n $deb && -f $deb ]] || { echo "build-image: no package${deb:+ at $deb}: run \`make deb\` first, or set DEB" >&2; exit 1; }
# sleepproxyd_<version>_<arch>.deb
name=$(basename "$deb" .deb)
version=${name#sleepproxyd_}
version=${version%_*}
[[ $version != "$name" && -n $version ]] || { echo "build-image: $deb is not named sleepproxyd_<version>_<arch>.deb" >&2; exit 1; }
image=${IMAGE:-sleepproxyd}
base=${BASE:-debian:12-slim}

context=$(mktemp -d)
trap 'rm -rf "$context"' EXIT
cp Containerfile "$context/Containerfile"
cp "$deb" "$context/sleepproxyd.deb"

# HEALTHCHECK is a field of Docker's image format; Podman writes OCI images unless told otherwise.
format=()
[[ $(basename "${engine_command[0]}") == podman ]] && format=(--format docker)

echo "build-image: $image:$version from $deb on $base with ${engine_command[*]}"
start=$SECONDS
"${engine_command[@]}" build "${format[@]}" --build-arg "BASE=$base" --build-arg "VERSION=$version" \
    --tag "$image:$version" --tag "$image:latest" --file "$context/Containerfile" "$@" "$context"
echo "build-image: built $image:$version and $image:latest"
echo "figure: image_bytes: $("${engine_command[@]}" image inspect --format '{{.Size}}' "$image:$version")"
echo "figure: image_build_seconds: $((SECONDS - start))"
