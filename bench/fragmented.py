#!/usr/bin/env python3
"""A fragmented cluster for the defragmentation figures (docs/performance.md).

    bench/fragmented.py OUT_DIR [--nodes 200] [--seed 7] [--whole 200]

writes OUT_DIR/cluster.json (NODES nodes x 8 GPUs of 81920 MiB; on each GPU, as a seeded stream of
fractional pods arriving and leaving would leave it, zero to three pods of 8000-24000 MiB, each
owned by one of 40 ReplicaSets) and OUT_DIR/pods.json (WHOLE pods asking one whole GPU's memory).
Then, for each setting:

    hami-rs simulate --output json --cluster-file OUT_DIR/cluster.json --pods OUT_DIR/pods.json \\
        [--defragment=on --defrag-max-moves 3 --defrag-max-per-node 1000 --defrag-max-per-minute 1000000 --defrag-cooldown 0s]

and bench/fragmented.py --summary SIM.json prints the whole-GPU pods placed, the pods moved, and
the moved pods whose replacement found no place (lost; must be 0).
"""
import json
import random
import sys


def cluster(nodes, seed, whole):
    rng = random.Random(seed)
    items, pods = [], []
    for n in range(nodes):
        name = f"gpu-{n:03d}"
        devs = [{"id": f"GPU-{n:03d}-{i}", "index": i, "count": 10, "devmem": 81920, "devcore": 100,
                 "type": "NVIDIA-NVIDIA A100-SXM4-80GB", "numa": i // 4, "mode": "hami-core", "health": True}
                for i in range(8)]
        items.append({"apiVersion": "v1", "kind": "Node",
                      "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name},
                                   "annotations": {"hami.io/node-nvidia-register": json.dumps(devs, separators=(",", ":")),
                                                   "hami.io/node-handshake": "Requesting_2026-12-01 08:00:00"}},
                      "status": {"capacity": {"nvidia.com/gpu": "80"}, "allocatable": {"nvidia.com/gpu": "80"}}})
        for i in range(8):
            # What arrivals and departures leave: most GPUs hold a piece or two, a few are idle.
            used = 0
            for _ in range(rng.choice([0, 1, 1, 2, 2, 3])):
                mem = rng.choice([8000, 12000, 16000, 24000])
                if used + mem > 81920:
                    break
                used += mem
                k = len(pods)
                rs = f"serve-{rng.randrange(40):02d}"
                pods.append({"apiVersion": "v1", "kind": "Pod",
                             "metadata": {"name": f"p{k:05d}", "namespace": "serve", "uid": f"uid-p{k:05d}",
                                          "labels": {"app": rs},
                                          "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": rs,
                                                               "uid": f"uid-{rs}", "controller": True}],
                                          "annotations": {"hami.io/vgpu-node": name,
                                                          "hami.io/vgpu-devices-allocated": f"GPU-{n:03d}-{i},NVIDIA,{mem},0:;",
                                                          "hami.io/vgpu-devices-to-allocate": ";",
                                                          "hami.io/bind-phase": "success"}},
                             "spec": {"nodeName": name, "containers": [{"name": "m", "resources": {
                                 "limits": {"nvidia.com/gpu": "1", "nvidia.com/gpumem": str(mem)}}}]},
                             "status": {"phase": "Running"}})
    pending = [{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"whole-{k:03d}", "namespace": "train"},
                "spec": {"containers": [{"name": "m", "resources": {
                    "limits": {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "81920"}}}]}} for k in range(whole)]
    return {"apiVersion": "v1", "kind": "List", "items": items + pods}, {"apiVersion": "v1", "kind": "List", "items": pending}


def summary(path):
    sim = json.load(open(path))
    pods = sim["pods"]
    whole = [p for p in pods if p["name"].startswith("whole-")]
    placed = sum(1 for p in whole if p.get("node"))
    moved = sum(len(p.get("moved", [])) for p in whole)
    replaced = sum(len(p.get("replaced", [])) for p in whole)
    print(json.dumps({"whole_placed": placed, "whole_asked": len(whole), "moved": moved,
                      "moves_per_placed": round(moved / placed, 2) if placed else 0, "lost": moved - replaced}))


def main():
    args = sys.argv[1:]
    if args and args[0] == "--summary":
        summary(args[1])
        return
    out = args[0]
    opt = lambda k, d: int(args[args.index(k) + 1]) if k in args else d
    c, p = cluster(opt("--nodes", 200), opt("--seed", 7), opt("--whole", 200))
    json.dump(c, open(f"{out}/cluster.json", "w"))
    json.dump(p, open(f"{out}/pods.json", "w"))


if __name__ == "__main__":
    main()
