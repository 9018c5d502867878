#!/usr/bin/env bash
# Release archives of kubectl-hami, one per platform, with checksums and the krew manifest filled
# in for them:
#
#   release/archives.sh [OUT]            # every platform whose Rust target is installed
#   PLATFORMS="linux-amd64" release/archives.sh out
#   KUBECTL_HAMI_BIN=target/release/kubectl-hami PLATFORMS=linux-amd64 release/archives.sh out
#
# Writes OUT/kubectl-hami-v<version>-<os>-<arch>.tar.gz (the binary and a README),
# OUT/sha256sums.txt and OUT/hami.yaml (release/krew/hami.yaml with the version,
# URLs and checksums of the archives made; platforms not built are left out of it). A platform
# whose target is missing fails with the rustup command that adds it. KUBECTL_HAMI_BIN packages a
# binary already built (for one platform: the host's).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-target/release-archives}
version=v$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
declare -A triple=(
  [linux-amd64]=x86_64-unknown-linux-gnu [linux-arm64]=aarch64-unknown-linux-gnu
  [darwin-amd64]=x86_64-apple-darwin [darwin-arm64]=aarch64-apple-darwin
)
host=$(rustc -vV | sed -n 's/^host: //p')
if [[ -z ${PLATFORMS:-} ]]; then
  installed=$(rustup target list --installed 2>/dev/null || echo "$host")
  PLATFORMS=$(for p in "${!triple[@]}"; do grep -qx "${triple[$p]}" <<<"$installed" && echo "$p"; done | sort | xargs)
fi
[[ -n $PLATFORMS ]] || { echo "archives: no platform to build (host $host)" >&2; exit 1; }
rm -rf "$out" && mkdir -p "$out"
manifest=$(cat release/krew/hami.yaml)
manifest=${manifest//v0.1.0/$version}
made=()
for p in $PLATFORMS; do
  t=${triple[$p]:-}
  [[ -n $t ]] || { echo "archives: unknown platform $p (one of ${!triple[*]})" >&2; exit 1; }
  if [[ -n ${KUBECTL_HAMI_BIN:-} ]]; then
    [[ $t == "$host" ]] || { echo "archives: KUBECTL_HAMI_BIN is the host's ($host), not $t" >&2; exit 1; }
    bin=$KUBECTL_HAMI_BIN
  else
    if [[ $t != "$host" ]] && ! rustup target list --installed | grep -qx "$t"; then
      echo "archives: the $t target is missing: rustup target add $t (and a linker for it)" >&2; exit 1
    fi
    cargo build --profile dist --locked --bin kubectl-hami --target "$t"
    bin=target/$t/dist/kubectl-hami
  fi
  stage=$(mktemp -d)
  install -m 0755 "$bin" "$stage/kubectl-hami"
  cat >"$stage/README.txt" <<TXT
kubectl-hami $version ($p): put kubectl-hami on your PATH, then run \`kubectl hami --help\`.
TXT
  name=kubectl-hami-$version-$p.tar.gz
  # Reproducible: fixed order, owner and time.
  tar --sort=name --owner=0 --group=0 --numeric-owner --mtime='2026-01-01 00:00Z' -C "$stage" -czf "$out/$name" \
    kubectl-hami README.txt
  rm -rf "$stage"
  sum=$(sha256sum "$out/$name" | cut -d' ' -f1)
  echo "$sum  $name" >>"$out/sha256sums.txt"
  key=SHA256_$(tr 'a-z-' 'A-Z_' <<<"$p")
  manifest=${manifest//$key/$sum}
  made+=("$p")
done
# Platforms not built leave the manifest.
printf '%s\n' "$manifest" >"$out/hami.yaml"
python3 - "$out/hami.yaml" "${made[@]}" <<'PY'
import sys, yaml
path, made = sys.argv[1], set(sys.argv[2:])
m = yaml.safe_load(open(path))
m["spec"]["platforms"] = [p for p in m["spec"]["platforms"]
    if f'{p["selector"]["matchLabels"]["os"]}-{p["selector"]["matchLabels"]["arch"]}' in made]
for p in m["spec"]["platforms"]:
    assert len(p["sha256"]) == 64, p
def text(dumper, s):
    return dumper.represent_scalar("tag:yaml.org,2002:str", s, style="|" if "\n" in s else None)
yaml.SafeDumper.add_representer(str, text)
open(path, "w").write(yaml.safe_dump(m, sort_keys=False))
PY
(cd "$out" && sha256sum -c sha256sums.txt >/dev/null)
echo "archives: ${made[*]} in $out (sha256sums.txt, hami.yaml)"
