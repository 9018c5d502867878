#!/usr/bin/env bash
# A real Kubernetes control plane on 127.0.0.1 for the end-to-end tests: etcd and kube-apiserver
# (RBAC, token auth), with a PKI and one kubeconfig per identity. kube-scheduler is started by the
# tests themselves, since its config names the extender's port.
#
#   control-plane.sh start DIR            # writes DIR/env (BIN, ports, flags, kubeconfigs), starts etcd + apiserver
#   control-plane.sh stop DIR             # stops everything started under DIR
#   control-plane.sh stop-apiserver DIR   # stops kube-apiserver only (SIGTERM, SIGKILL after 15 s); etcd runs on
#   control-plane.sh start-apiserver DIR  # starts kube-apiserver again with the same flags, waits for /readyz
#
# Ports come from HAMI_E2E_ETCD_PORT / HAMI_E2E_APISERVER_PORT (defaults 23790 / 26443). The binaries are
# build-bins.sh's for HAMI_E2E_K8S_VERSION (default 1.34.2); HAMI_E2E_APISERVER_FLAGS adds flags to
# kube-apiserver (space-separated, none by default; kept in DIR/env for start-apiserver), e.g. the
# feature gates and API groups of a newer version's native gang.
set -euo pipefail

cmd=${1:?usage: control-plane.sh start|stop DIR}
dir=${2:?usage: control-plane.sh start|stop DIR}
here=$(cd "$(dirname "$0")" && pwd)

stop() {
  for f in "$dir"/pids/*; do
    [[ -e "$f" ]] || continue
    pid=$(cat "$f")
    kill "$pid" 2>/dev/null || true
  done
  sleep 0.5
  for f in "$dir"/pids/*; do
    [[ -e "$f" ]] || continue
    kill -9 "$(cat "$f")" 2>/dev/null || true
    rm -f "$f"
  done
}

start_bg() { # start_bg NAME CMD...
  local name=$1; shift
  "$@" >>"$dir/logs/$name.log" 2>&1 &
  echo $! > "$dir/pids/$name"
}

start_apiserver() { # needs BIN, ETCD_PORT, API_PORT, APISERVER_FLAGS
  # shellcheck disable=SC2086 # APISERVER_FLAGS is a list of flags
  start_bg apiserver "$BIN/kube-apiserver" \
    --etcd-servers="http://127.0.0.1:$ETCD_PORT" \
    --bind-address=127.0.0.1 --advertise-address=127.0.0.1 --secure-port="$API_PORT" \
    --tls-cert-file="$dir/pki/apiserver.crt" --tls-private-key-file="$dir/pki/apiserver.key" --client-ca-file="$dir/pki/ca.crt" \
    --token-auth-file="$dir/pki/tokens.csv" \
    --service-account-issuer=https://kubernetes.default.svc.cluster.local \
    --service-account-key-file="$dir/pki/sa.pub" --service-account-signing-key-file="$dir/pki/sa.key" \
    --service-cluster-ip-range=10.0.0.0/24 \
    --authorization-mode=RBAC \
    --disable-admission-plugins=ServiceAccount \
    --allow-privileged=true --profiling=false ${APISERVER_FLAGS:-}

  for _ in $(seq 1 300); do
    curl -fsS --cacert "$dir/pki/ca.crt" -H "Authorization: Bearer e2e-admin-token" "https://127.0.0.1:$API_PORT/readyz" >/dev/null 2>&1 && break
    sleep 0.2
  done
  curl -fsS --cacert "$dir/pki/ca.crt" -H "Authorization: Bearer e2e-admin-token" "https://127.0.0.1:$API_PORT/readyz" >/dev/null \
    || { echo "e2e: kube-apiserver did not become ready; see $dir/logs/apiserver.log" >&2; tail -30 "$dir/logs/apiserver.log" >&2; exit 1; }
}

case "$cmd" in
  stop)
    stop
    exit 0
    ;;
  stop-apiserver)
    f="$dir/pids/apiserver"
    [[ -e "$f" ]] || { echo "e2e: no kube-apiserver pid under $dir/pids" >&2; exit 1; }
    pid=$(cat "$f")
    echo "---- e2e: kube-apiserver (pid $pid) stopped with SIGTERM ----" >> "$dir/logs/apiserver.log"
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 150); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    if kill -0 "$pid" 2>/dev/null; then
      echo "e2e: kube-apiserver (pid $pid) still running 15 s after SIGTERM; SIGKILL" >&2
      kill -9 "$pid" 2>/dev/null || true
      sleep 0.5
    fi
    rm -f "$f"
    exit 0
    ;;
  start-apiserver)
    # shellcheck disable=SC1091
    source "$dir/env"
    [[ ! -e "$dir/pids/apiserver" ]] || ! kill -0 "$(cat "$dir/pids/apiserver")" 2>/dev/null \
      || { echo "e2e: kube-apiserver already runs (pid $(cat "$dir/pids/apiserver"))" >&2; exit 1; }
    echo "---- e2e: kube-apiserver started again ----" >> "$dir/logs/apiserver.log"
    start_apiserver
    exit 0
    ;;
  start) ;;
  *) echo "unknown command $cmd" >&2; exit 2 ;;
esac

command -v openssl >/dev/null || { echo "e2e: openssl is required (apt-get install openssl)" >&2; exit 1; }
command -v curl >/dev/null || { echo "e2e: curl is required (apt-get install curl)" >&2; exit 1; }
BIN=$("$here/build-bins.sh" | tail -n 1)
for b in etcd kube-apiserver kube-scheduler; do
  [[ -x "$BIN/$b" ]] || { echo "e2e: $BIN/$b missing; run tests/e2e/build-bins.sh and read its output" >&2; exit 1; }
done

ETCD_PORT=${HAMI_E2E_ETCD_PORT:-23790}
ETCD_PEER_PORT=$((ETCD_PORT + 1))
API_PORT=${HAMI_E2E_APISERVER_PORT:-26443}
APISERVER_FLAGS=${HAMI_E2E_APISERVER_FLAGS:-}
mkdir -p "$dir/pki" "$dir/pids" "$dir/logs"

# --- PKI: a CA, serving certs for the apiserver and for hami-rs (SAN 127.0.0.1), SA keys, tokens
(
  cd "$dir/pki"
  openssl req -x509 -newkey rsa:2048 -nodes -days 2 -keyout ca.key -out ca.crt -subj /CN=e2e-ca \
    -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign 2>/dev/null
  for n in apiserver hami; do
    openssl req -newkey rsa:2048 -nodes -keyout $n.key -out $n.csr -subj /CN=$n 2>/dev/null
    printf 'subjectAltName=IP:127.0.0.1,IP:10.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\nbasicConstraints=CA:FALSE\n' > $n.ext
    openssl x509 -req -in $n.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 -out $n.crt -extfile $n.ext 2>/dev/null
  done
  openssl genrsa -out sa.key 2048 2>/dev/null && openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
  cat > tokens.csv <<'EOF'
e2e-admin-token,e2e-admin,uid-admin,"system:masters"
e2e-sched-token,system:kube-scheduler,uid-ks,
e2e-hami-token,system:serviceaccount:kube-system:hami-scheduler,uid-hami,"system:serviceaccounts,system:serviceaccounts:kube-system,system:authenticated"
e2e-plugin-token,e2e-device-plugin,uid-plugin,"system:masters"
EOF
)

kubeconfig() {
  cat > "$1" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: e2e
  cluster: {server: "https://127.0.0.1:$API_PORT", certificate-authority: "$dir/pki/ca.crt"}
users:
- name: e2e
  user: {token: "$2"}
contexts:
- name: e2e
  context: {cluster: e2e, user: e2e}
current-context: e2e
EOF
}
kubeconfig "$dir/admin.kubeconfig" e2e-admin-token
kubeconfig "$dir/scheduler.kubeconfig" e2e-sched-token
kubeconfig "$dir/hami.kubeconfig" e2e-hami-token
kubeconfig "$dir/plugin.kubeconfig" e2e-plugin-token

start_bg etcd "$BIN/etcd" --data-dir "$dir/etcd" --name e2e \
  --listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
  --listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
  --initial-cluster "e2e=http://127.0.0.1:$ETCD_PEER_PORT" --unsafe-no-fsync --log-level warn

for _ in $(seq 1 100); do
  curl -fsS "http://127.0.0.1:$ETCD_PORT/health" >/dev/null 2>&1 && break
  sleep 0.2
done
curl -fsS "http://127.0.0.1:$ETCD_PORT/health" >/dev/null || { echo "e2e: etcd did not start; see $dir/logs/etcd.log" >&2; tail -20 "$dir/logs/etcd.log" >&2; exit 1; }

start_apiserver

cat > "$dir/env" <<EOF
BIN=$BIN
API_PORT=$API_PORT
ETCD_PORT=$ETCD_PORT
APISERVER_FLAGS="$APISERVER_FLAGS"
CA=$dir/pki/ca.crt
EOF
echo "$dir"
