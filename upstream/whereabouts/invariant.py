#!/usr/bin/env python3
"""The whereabouts seed's invariant, read from the settled run's end state
(ward-campaign's --invariant, KUBECONFIG set): no address is held by two
live pods, and every live pod's address is still allocated to it.

A pod's address is the one its network-status annotation shows (what
Multus wrote after the plugin's ADD); an allocation is an IPPool's entry
(`spec.allocations`, keyed by the offset from the range's first address,
`podref` naming the pod). Exit 1 with one line per violation.
"""
import ipaddress
import json
import subprocess
import sys

STATUS = "k8s.v1.cni.cncf.io/network-status"


def get(kind):
    out = subprocess.run(["kubectl", "get", kind, "--all-namespaces", "-o", "json"],
                         capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"invariant: kubectl get {kind}: {out.stderr.strip()}")
    return json.loads(out.stdout)["items"]


holders = {}
for pod in get("pods"):
    meta = pod["metadata"]
    if meta.get("deletionTimestamp") or pod.get("status", {}).get("phase") in ("Succeeded", "Failed"):
        continue
    ref = f"{meta['namespace']}/{meta['name']}"
    for net in json.loads(meta.get("annotations", {}).get(STATUS, "[]")):
        for ip in net.get("ips", []):
            holders.setdefault(ip, []).append(ref)

allocated = {}
for pool in get("ippools"):
    first = ipaddress.ip_network(pool["spec"]["range"], strict=False).network_address
    for offset, entry in pool["spec"].get("allocations", {}).items():
        allocated[str(first + int(offset))] = entry.get("podref")

bad = []
for ip, refs in sorted(holders.items()):
    if len(refs) > 1:
        bad.append(f"{ip} is held by {len(refs)} live pods: {', '.join(sorted(refs))}")
    for ref in refs:
        if allocated.get(ip) != ref:
            owner = allocated.get(ip)
            bad.append(f"live pod {ref}'s {ip} is " + (f"allocated to {owner}" if owner else "not allocated"))
for line in bad:
    print(line)
sys.exit(1 if bad else 0)
