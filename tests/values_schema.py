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
"""
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
    return {}


def render():
    values = yaml.safe_load(VALUES.read_text())
    schema = {"$schema": "https://json-schema.org/draft-07/schema#", "title": "hami-rs chart values"}
    schema.update(schema_of(values, ()))
    return json.dumps(schema, indent=2, sort_keys=False) + "\n"


def main():
    text = render()
    if sys.argv[1:] == ["--check"]:
        if not SCHEMA.exists() or SCHEMA.read_text() != text:
            sys.exit(f"{SCHEMA.relative_to(ROOT)} is out of date: run tests/values_schema.py")
        return
    SCHEMA.write_text(text)


if __name__ == "__main__":
    main()
