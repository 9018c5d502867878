#!/usr/bin/env bash
# Renders the status page (GET /) of `hami-rs serve --cluster-file examples/cluster.json` after a few
# pods were scheduled through /filter and /bind, in headless Chromium, and keeps a screenshot in
# target/artifacts/status-page.png. Fails if Chromium is missing, the page lacks the nodes or the
# decisions (with a no-fit's reasons per node), the cordoned device and the fragmented memory, or a
# search by pod does not find its node, or the screenshot is empty. Then the same at 5 000 nodes x
# 8 GPUs: the front page under 300 KB gzipped with every node linked, and a node page.
set -euo pipefail
cd "$(dirname "$0")/.."
browser=$(command -v chromium || command -v chromium-browser || true)
[[ -n "$browser" ]] || { echo "status page: Chromium is required (apt-get install chromium)" >&2; exit 1; }
bin=${HAMI_RS_BIN:-target/release/hami-rs}
[[ -x "$bin" ]] || cargo build --release --bin hami-rs
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_ready() { # PORT TENTHS
  for _ in $(seq 1 "$2"); do curl -fsS "http://127.0.0.1:$1/readyz" >/dev/null 2>&1 && return 0; sleep 0.1; done
  echo "status page: hami-rs on :$1 did not get ready" >&2
  return 1
}
port=$(free_port)
mport=$(free_port)
out=target/artifacts
mkdir -p "$out"
"$bin" serve --cluster-file examples/cluster.json --http_bind "127.0.0.1:$port" --metrics-bind-address "127.0.0.1:$mport" \
  --scheduler-name hami-scheduler >"$out/status-page-server.log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null || true' EXIT
wait_ready "$port" 100

pod() { # pod NAME MEM CORES
  printf '{"Pod":{"metadata":{"name":"%s","namespace":"demo","uid":"uid-%s"},"spec":{"containers":[{"name":"c","resources":{"limits":{"nvidia.com/gpu":"1","nvidia.com/gpumem":"%s","nvidia.com/gpucores":"%s"}}}]}},"NodeNames":["node-a","node-b","node-c","node-cpu"]}' "$1" "$1" "$2" "$3"
}
web1_node=
for spec in "web-1 4000 20" "web-2 6000 30" "train-1 20000 60" "huge 900000 10"; do
  set -- $spec
  answer=$(curl -fsS -X POST -H 'Content-Type: application/json' --data "$(pod "$1" "$2" "$3")" "http://127.0.0.1:$port/filter")
  node=$(python3 -c 'import json,sys; n=json.loads(sys.argv[1]).get("NodeNames"); print(n[0] if n else "")' "$answer")
  [[ $1 == web-1 ]] && web1_node=$node
  if [[ -n "$node" ]]; then
    curl -fsS -X POST --data "{\"PodName\":\"$1\",\"PodNamespace\":\"demo\",\"PodUID\":\"uid-$1\",\"Node\":\"$node\"}" "http://127.0.0.1:$port/bind" >/dev/null
  fi
done

flags=(--headless --no-sandbox --disable-gpu --disable-quic --no-first-run --disable-background-networking
  --disable-component-update --disable-sync --user-data-dir="$(mktemp -d)" --window-size=1500,1000)
"$browser" "${flags[@]}" --dump-dom "http://127.0.0.1:$port/" >"$out/status-page.html" 2>/dev/null
for want in node-a node-b node-c "Last decisions" "demo/web-1" "no_fit" "GiB" "Pending (1)" "1 × NVIDIA 900000 MiB" \
  "demo/huge" "CardInsufficientMemory" "<th>cordoned</th>" '<i class="c">' "fragmented" "<summary>per node</summary>" \
  "By device type"; do
  grep -q "$want" "$out/status-page.html" || { echo "status page: '$want' missing from the page" >&2; exit 1; }
done
# The node page of web-1's node lists it on its device, with the device's model and UUID.
"$browser" "${flags[@]}" --dump-dom "http://127.0.0.1:$port/?node=$web1_node" >"$out/status-node.html" 2>/dev/null
for want in "$web1_node" "demo/web-1 (4000 MiB, 20 cores)" "GPU-" "all nodes"; do
  grep -qF "$want" "$out/status-node.html" || { echo "node page: '$want' missing from the page" >&2; exit 1; }
done
# A search lists the matching node with a link to its page, and not the others.
"$browser" "${flags[@]}" --dump-dom "http://127.0.0.1:$port/?q=node-b" >"$out/status-search.html" 2>/dev/null
grep -q 'href="?node=node-b"' "$out/status-search.html" || { echo "search: node-b missing" >&2; exit 1; }
! grep -q 'href="?node=node-a"' "$out/status-search.html" || { echo "search: node-a listed for node-b" >&2; exit 1; }
# A search by a pod's name finds the node holding it.
"$browser" "${flags[@]}" --dump-dom "http://127.0.0.1:$port/?q=web-1" >"$out/status-search-pod.html" 2>/dev/null
grep -qF "<td>demo/web-1</td><td><a href=\"?node=$web1_node\">" "$out/status-search-pod.html" ||
  { echo "search: demo/web-1 not found on $web1_node" >&2; exit 1; }
# The huge pod is pending: the memory free on shared devices that it could not use is fragmented;
# the cordoned device of node-b is counted apart from the idle ones.
python3 - "$out/status-page.html" <<'PY' || exit 1
import re, sys
html = open(sys.argv[1]).read()
heads = re.search(r"<tr><th>devices</th>(.*?)</tr>", html).group(1)
cells = re.search(r"<th>devices</th>.*?</tr><tr><td></td>(.*?)</tr>", html).group(1)
heads = re.findall(r"<th[^>]*>(.*?)</th>", heads)
cells = [re.sub(r"<[^>]+>", "", c) for c in re.findall(r"<td>(.*?)</td>", cells)]
row = dict(zip(heads, cells))
assert row["cordoned"] == "1", row
free, frag = float(row["free on shared devices"].split()[0]), float(row["fragmented memory"].split()[0])
assert free > 0 and frag == free, row
PY
# HEAD is answered where GET is.
code=$(curl -s -o /dev/null -w '%{http_code}' -I "http://127.0.0.1:$port/")
[[ $code == 200 ]] || { echo "status page: HEAD / answered $code" >&2; exit 1; }
"$browser" "${flags[@]}" --screenshot="$out/status-page.png" "http://127.0.0.1:$port/" >/dev/null 2>&1
size=$(stat -c %s "$out/status-page.png" 2>/dev/null || echo 0)
(( size > 10000 )) || { echo "status page: screenshot missing or empty ($size bytes)" >&2; exit 1; }
echo "status page: ok, screenshot $out/status-page.png ($size bytes)"

# Many decisions later: in a cluster of 50 nodes x 4 GPUs, a pod asking 900 000 MiB is filtered,
# then 300 pods that fit are filtered and bound; the console still lists the pending pod with what
# it asks, a search finds it, and the pending-pods gauge counts it.
cluster50=$(mktemp)
python3 - "$cluster50" <<'PY'
import json, sys
items = []
for n in range(50):
    gpus = [{"id": f"GPU-{n:04d}-{k}", "index": k, "count": 10, "devmem": 24576, "devcore": 100,
             "type": "NVIDIA-A10", "mode": "hami-core", "health": True} for k in range(4)]
    items.append({"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"gpu-{n:02d}", "annotations": {
        "hami.io/node-nvidia-register": json.dumps(gpus), "hami.io/node-handshake": "Requesting_2026-12-01 08:00:00"}},
        "status": {"allocatable": {"nvidia.com/gpu": "40"}}})
json.dump({"apiVersion": "v1", "kind": "List", "items": items}, open(sys.argv[1], "w"))
PY
port3=$(free_port)
mport3=$(free_port)
"$bin" serve --cluster-file "$cluster50" --http_bind "127.0.0.1:$port3" --metrics-bind-address "127.0.0.1:$mport3" \
  >"$out/status-page-50.log" 2>&1 &
pid3=$!
trap 'kill $pid $pid3 2>/dev/null || true; rm -f "$cluster50"' EXIT
wait_ready "$port3" 100
python3 - "$port3" <<'PY' || exit 1
import json, sys, urllib.request
port = sys.argv[1]
names = [f"gpu-{n:02d}" for n in range(50)]
def post(path, body):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", json.dumps(body).encode(), {"Content-Type": "application/json"})
    return json.load(urllib.request.urlopen(req))
def pod(name, mem):
    return {"metadata": {"name": name, "namespace": "team", "uid": f"uid-{name}"}, "spec": {"containers": [{"name": "c",
            "resources": {"limits": {"nvidia.com/gpu": "1", "nvidia.com/gpumem": str(mem)}}}]}}
r = post("/filter", {"Pod": pod("huge", 900000), "NodeNames": names})
assert not r.get("NodeNames") and r.get("FailedNodes"), r
for k in range(300):
    r = post("/filter", {"Pod": pod(f"fit-{k}", 1000), "NodeNames": names})
    node = (r.get("NodeNames") or [None])[0]
    assert node, r
    b = post("/bind", {"PodName": f"fit-{k}", "PodNamespace": "team", "PodUID": f"uid-fit-{k}", "Node": node})
    assert not b.get("Error"), b
PY
"$browser" "${flags[@]}" --dump-dom "http://127.0.0.1:$port3/?q=huge" >"$out/status-pending.html" 2>/dev/null
for want in "Pending (1)" "<td>team/huge</td>" "1 × NVIDIA 900000 MiB" "50 nodes do not meet: 50 CardInsufficientMemory"; do
  grep -qF "$want" "$out/status-pending.html" || { echo "pending after 300 pods: '$want' missing" >&2; exit 1; }
done
curl -fsS "http://127.0.0.1:$mport3/metrics" >"$out/status-pending.metrics"
grep -qx 'hami_scheduler_pending_pods{outcome="no_fit"} 1' "$out/status-pending.metrics" ||
  { echo "pending after 300 pods: the gauge does not count it" >&2; exit 1; }
echo "status page: the pending pod is listed, found and counted after 300 pods placed"

# At 5 000 nodes x 8 GPUs with 20 000 running pods (the load test's cluster): the front page stays
# under 300 KB gzipped, every node is linked, and a node's page lists its devices.
lt=${HAMI_LOADTEST_BIN:-target/release/hami-loadtest}
[[ -x "$lt" ]] || cargo build --release --bin hami-loadtest
gen=$("$lt" run --embedded --nodes 5000 --gpus-per-node 8 --running-pods 20000 --pods 200 --keep-files 2>&1 | sed -n 's/^kept //p')
[[ -s "$gen/cluster.json" ]] || { echo "status page: the load test wrote no cluster file" >&2; exit 1; }
port2=$(free_port)
mport2=$(free_port)
"$bin" serve --cluster-file "$gen/cluster.json" --http_bind "127.0.0.1:$port2" --metrics-bind-address "127.0.0.1:$mport2" \
  >"$out/status-page-5000.log" 2>&1 &
pid2=$!
trap 'kill $pid $pid2 $pid3 2>/dev/null || true; rm -rf "$gen" "$cluster50"' EXIT
wait_ready "$port2" 300
curl -fsS -H 'Accept-Encoding: gzip' -o "$out/status-5000.html.gz" "http://127.0.0.1:$port2/"
zipped=$(stat -c %s "$out/status-5000.html.gz")
(( zipped < 300 * 1024 )) || { echo "status page at 5000 nodes: $zipped bytes gzipped, over 300 KB" >&2; exit 1; }
"$browser" "${flags[@]}" --dump-dom "http://127.0.0.1:$port2/" >"$out/status-5000.html" 2>/dev/null
grep -q "5000 nodes, 40000 devices" "$out/status-5000.html" || { echo "status page at 5000 nodes: no summary" >&2; exit 1; }
links=$(grep -o 'href="?node=' "$out/status-5000.html" | wc -l)
(( links == 5000 )) || { echo "status page at 5000 nodes: $links node links, not 5000" >&2; exit 1; }
"$browser" "${flags[@]}" --dump-dom "http://127.0.0.1:$port2/?node=fake-gpu-17" >"$out/status-5000-node.html" 2>/dev/null
rows=$(grep -o '<td>[0-7]</td><td>' "$out/status-5000-node.html" | wc -l)
(( rows == 8 )) || { echo "node page at 5000 nodes: $rows device rows, not 8" >&2; exit 1; }
echo "status page at 5000 nodes x 8 GPUs, 20000 running pods: $zipped bytes gzipped, 5000 node links, node page with 8 devices"
