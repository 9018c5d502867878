#!/usr/bin/env python3
"""Writes charts/hami-rs/values.schema.json from charts/hami-rs/values.yaml, or with --check fails
when the committed schema differs from what values.yaml gives.

Every mapping of values.yaml is closed (additionalProperties: false), so helm refuses a key the
chart does not read (a typo, or a name from HAMi's chart) instead of ignoring it. Mappings that
hold Kubernetes objects or user-chosen keys (resources, affinity, labels, ...) and empty mappings
stay open. Scalars are not typed: Helm's --set and HAMi's values pass numbers and booleans as
strings and the templates accept both.

HAMi's names that hami-rs spells differently are listed too, so that they pass the schema and the
chart's own check refuses them naming the hami-rs value (a schema error cannot say that).

HAMi's chart's other keys (charts/hami/values.yaml at 4707fb02, and the keys its templates read
without declaring) are listed below with what this chart does with each, so that HAMi's own values
file installs: the schema accepts exactly those paths (nested mappings stay closed, so a misspelt key
under them still fails), the keys HAMi sets to null accept null, and the chart reads the mapped ones.
The ignored ones (node side: they configure HAMi's device plugin chart) must match the list the
chart's NOTES name ("hami-rs.hamiIgnored" in templates/_helpers.tpl); this script checks that too.
"""
import re
import json
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
VALUES = ROOT / "charts/hami-rs/values.yaml"
SCHEMA = ROOT / "charts/hami-rs/values.schema.json"

# Keys whose mapping is a Kubernetes object or holds keys the user chooses.
OPEN = {
    "resources", "affinity", "nodeSelector", "tolerations", "strategy", "labels", "annotations",
    "podAnnotations", "nodeLabelSelector", "securityContext", "global",
}

# HAMi's value names and the hami-rs value to set instead (templates/_helpers.tpl refuses them).
HAMI_NAMES = {
    ("scheduler", "kubeQPS"): "scheduler.extender.kubeQPS",
    ("scheduler", "nodeLockRetryTimeout"): "scheduler.extender.nodeLockRetryTimeout",
    ("scheduler", "extenderHTTPTimeout"): "scheduler.kubeScheduler.extender.httpTimeout",
    ("podDisruptionBudget",): "scheduler.podDisruptionBudget",
}


# HAMi-only keys the chart reads (templates and README.md say how).
HAMI_MAPPED = {
    "global.imageTag": "HAMi's tag for HAMi's images; never applied to hami-rs's image (NOTES says so when set)",
    "prometheus.enabled": "HAMi's switch for its ServiceMonitors: renders this chart's ServiceMonitor, as serviceMonitor.enabled",
    "scheduler.kubeScheduler.extraNewArgs": "HAMi's kube-scheduler args for Kubernetes >= 1.22: appended to the sidecar's args, less --config and --policy-config-file",
    "scheduler.patch.imageNew.registry": "HAMi's certgen image for Kubernetes >= 1.22: when repository is set, the certgen image instead of scheduler.patch.image",
    "scheduler.patch.imageNew.repository": "see scheduler.patch.imageNew.registry",
    "scheduler.patch.imageNew.tag": "see scheduler.patch.imageNew.registry",
    "scheduler.patch.imageNew.pullPolicy": "see scheduler.patch.imageNew.registry",
    "scheduler.patch.imageNew.pullSecrets": "see scheduler.patch.imageNew.registry",
    "scheduler.admissionWebhook.manageNamespaceSelector": "false: the webhooks carry no namespaceSelector (AKS owns that field)",
    "scheduler.service.httpTargetPort": "HAMi's HTTPS targetPort; hami-rs's is fixed at 443 (NOTES says so when it differs)",
    "scheduler.service.monitorTargetPort": "HAMi's metrics targetPort; hami-rs's is the scheduler.metricsBindAddress port (NOTES says so when it differs)",
}
for vendor in ("amd", "awsneuron", "kunlun", "enflame", "mthreads", "vastai", "biren", "ascend", "iluvatar"):
    HAMI_MAPPED[f"devices.{vendor}.customresources"] = (
        "HAMi's managedResources list: appended to the sidecar's managedResources (ignoredByScheduler) while the vendor is enabled")

# HAMi-only keys this chart accepts and ignores: they configure HAMi's device plugin (or nothing).
HAMI_IGNORED = [
    "global.gpuHookPath", "global.managedNodeSelectorEnable", "global.managedNodeSelector",
    "podSecurityPolicy.enabled", "scheduler.serviceAccountName",
    "devicePlugin.enabled",
    "devicePlugin.gpuOperatorToolkitReady.enabled", "devicePlugin.gpuOperatorToolkitReady.hostPath",
    "devicePlugin.gpuOperatorToolkitReady.securityContext",
    "devicePlugin.image.registry", "devicePlugin.image.repository", "devicePlugin.image.tag",
    "devicePlugin.image.pullPolicy", "devicePlugin.image.pullSecrets",
    "devicePlugin.monitor.image.registry", "devicePlugin.monitor.image.repository", "devicePlugin.monitor.image.tag",
    "devicePlugin.monitor.image.pullPolicy", "devicePlugin.monitor.image.pullSecrets",
    "devicePlugin.monitor.ctrPath", "devicePlugin.monitor.resyncInterval", "devicePlugin.monitor.extraArgs",
    "devicePlugin.monitor.extraEnvs", "devicePlugin.monitor.securityContext", "devicePlugin.monitor.resources",
    "devicePlugin.nodeConfiguration.config", "devicePlugin.nodeConfiguration.externalConfigName",
    "devicePlugin.createRuntimeClass", "devicePlugin.migStrategy", "devicePlugin.passDeviceSpecsEnabled",
    "devicePlugin.deviceListStrategy", "devicePlugin.nvidiaHookPath", "devicePlugin.nvidiaDriverRoot",
    "devicePlugin.gdrcopyEnabled", "devicePlugin.gdsEnabled", "devicePlugin.mofedEnabled",
    "devicePlugin.extraArgs", "devicePlugin.extraEnvs",
    "devicePlugin.service.type", "devicePlugin.service.httpPort", "devicePlugin.service.labels",
    "devicePlugin.service.annotations",
    "devicePlugin.pluginPath", "devicePlugin.libPath", "devicePlugin.podAnnotations", "devicePlugin.hostPID",
    "devicePlugin.hostNetwork", "devicePlugin.securityContext", "devicePlugin.nvidiaNodeSelector",
    "devicePlugin.tolerations", "devicePlugin.updateStrategy", "devicePlugin.resources",
    "mockDevicePlugin.enabled", "mockDevicePlugin.tag",
    "mockDevicePlugin.image.registry", "mockDevicePlugin.image.repository", "mockDevicePlugin.image.tag",
    "mockDevicePlugin.image.pullPolicy", "mockDevicePlugin.image.pullSecrets",
    "devices.ascend.image", "devices.ascend.imagePullPolicy", "devices.ascend.extraArgs",
    "devices.ascend.nodeSelector", "devices.ascend.tolerations",
]

# Values HAMi's values.yaml sets to null (an empty YAML key) that this chart declares.
NULLABLE = {
    ("scheduler", "admissionWebhook", "whitelistNamespaces"),
    ("scheduler", "admissionWebhook", "namespaceSelector", "matchLabels"),
}

HELPERS = ROOT / "charts/hami-rs/templates/_helpers.tpl"

# What a value may be, where a misspelt one would otherwise render and fail later (the scheduler
# exits at start on a flag it cannot read, or a template says something less clear). Numbers and
# durations also accept their text, since --set and HAMi's values may pass them as strings.
GO_DURATION = r"^(0|([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+)$"
DURATION = {"type": "string", "pattern": GO_DURATION,
            "description": "a Go duration, e.g. 30s, 5m, 1h30m"}
WHOLE = {"anyOf": [{"type": "integer", "minimum": 0}, {"type": "string", "pattern": "^[0-9]+$"}],
         "description": "a whole number"}
PULL_POLICY = {"enum": ["Always", "IfNotPresent", "Never"]}
VALUE_RULES = {
    ("scheduler", "defaultSchedulerPolicy", "nodeSchedulerPolicy"): {"enum": ["binpack", "spread"]},
    ("scheduler", "defaultSchedulerPolicy", "gpuSchedulerPolicy"):
        {"enum": ["binpack", "spread", "topology-aware", "mutex", "numa"]},
    ("scheduler", "replicas"): WHOLE,
    ("scheduler", "nodeLockExpire"): DURATION,
    ("scheduler", "kubeScheduler", "extender", "httpTimeout"): DURATION,
    ("scheduler", "extender", "reservationTTL"): DURATION,
    ("scheduler", "extender", "gangClaimTTL"): DURATION,
    ("scheduler", "extender", "defragment"): {"enum": ["off", "dry-run", "on"]},
    ("scheduler", "extender", "preemption", "hold"): DURATION,
    ("scheduler", "extender", "bindLockWait"): DURATION,
    ("scheduler", "extender", "nodeLockRetryTimeout"): DURATION,
    ("scheduler", "kubeScheduler", "image", "pullPolicy"): PULL_POLICY,
    ("scheduler", "extender", "image", "pullPolicy"): PULL_POLICY,
    ("scheduler", "patch", "image", "pullPolicy"): PULL_POLICY,
    ("scheduler", "admissionWebhook", "failurePolicy"): {"enum": ["Ignore", "Fail"]},
    ("scheduler", "admissionWebhook", "updateGuard", "failurePolicy"): {"enum": ["Ignore", "Fail"]},
}


def schema_of(value, path):
    if isinstance(value, dict):
        if not value or (path and path[-1] in OPEN):
            return {"type": "object"}
        props = {k: schema_of(v, path + (k,)) for k, v in value.items()}
        for hami, ours in HAMI_NAMES.items():
            if hami[:-1] == path and hami[-1] not in props:
                props[hami[-1]] = {"description": f"HAMi's name; hami-rs reads {ours}"}
        return {"type": "object", "additionalProperties": False, "properties": props}
    if isinstance(value, list):
        return {"type": "array"}
    return dict(VALUE_RULES.get(path, {}))


def allow_null(schema, path):
    if path in NULLABLE:
        schema["type"] = [schema["type"], "null"]
    for k, sub in (schema.get("properties") or {}).items():
        allow_null(sub, path + (k,))


def add_hami_key(schema, dotted, description):
    """Accepts HAMi's key `dotted`: closed mappings down to it, any value at it."""
    node = schema
    parts = dotted.split(".")
    for i, part in enumerate(parts):
        if node.get("type") == "object" and "additionalProperties" not in node:
            return  # an open mapping (global) takes any key already
        props = node.setdefault("properties", {})
        if i == len(parts) - 1:
            if part in props:
                raise SystemExit(f"{dotted} is declared in values.yaml: drop it from the HAMi key lists")
            props[part] = {"description": f"HAMi's key: {description}"}
            return
        node = props.setdefault(part, {"type": "object", "additionalProperties": False, "properties": {}})
        if node.get("type") != "object":
            raise SystemExit(f"{dotted}: {'.'.join(parts[:i + 1])} is not a mapping in values.yaml")


def ignored_in_notes():
    """The HAMi value paths the NOTES line names (templates/_helpers.tpl, hami-rs.hamiIgnored)."""
    m = re.search(r'define "hami-rs\.hamiIgnored".*?\$paths := list ([^}]*?)-?}}', HELPERS.read_text(), re.S)
    if not m:
        raise SystemExit("templates/_helpers.tpl has no hami-rs.hamiIgnored path list")
    return re.findall(r'"([^"]+)"', m.group(1))


def check_notes_list():
    units = ignored_in_notes()
    under = lambda leaf, unit: leaf == unit or leaf.startswith(unit + ".")
    problems = [f"{leaf} is ignored but no NOTES path covers it" for leaf in HAMI_IGNORED
                if not any(under(leaf, u) for u in units)]
    problems += [f"NOTES path {u} covers no ignored HAMi key" for u in units
                 if not any(under(leaf, u) for leaf in HAMI_IGNORED)]
    if problems:
        raise SystemExit("tests/values_schema.py and hami-rs.hamiIgnored disagree:\n  " + "\n  ".join(problems))


def check_value_rules(values):
    for path in VALUE_RULES:
        node = values
        for part in path:
            if not isinstance(node, dict) or part not in node:
                raise SystemExit(f"VALUE_RULES: {'.'.join(path)} is not a value of values.yaml")
            node = node[part]


def render():
    values = yaml.safe_load(VALUES.read_text())
    check_value_rules(values)
    schema = {"$schema": "https://json-schema.org/draft-07/schema#", "title": "hami-rs chart values"}
    schema.update(schema_of(values, ()))
    allow_null(schema, ())
    for dotted, description in HAMI_MAPPED.items():
        add_hami_key(schema, dotted, description)
    for dotted in HAMI_IGNORED:
        add_hami_key(schema, dotted, "accepted and ignored (HAMi's device plugin side, or read by no HAMi scheduler template)")
    return json.dumps(schema, indent=2, sort_keys=False) + "\n"


def main():
    check_notes_list()
    text = render()
    if sys.argv[1:] == ["--check"]:
        if not SCHEMA.exists() or SCHEMA.read_text() != text:
            sys.exit(f"{SCHEMA.relative_to(ROOT)} is out of date: run tests/values_schema.py")
        return
    SCHEMA.write_text(text)


if __name__ == "__main__":
    main()
