"""The CNS campaign's invariant (ward-campaign --invariant): once the run
has settled, the agent's IPAM state (the file it writes with --state-file,
in the seed's folder WARD_RUN_DIR) is the live node's: it serves, every IP
config names a network container it holds (the example's I1), and the
containers it holds are those of the NodeNetworkConfig the live Node
controls. Exit 1 with what is wrong, 0 when all holds."""

import json
import os
import subprocess
import sys

NODE = "node-a"


def kubectl(*args):
    out = subprocess.run(["kubectl", *args, "-o", "json"], check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


def main():
    path = os.path.join(os.environ["WARD_RUN_DIR"], "cns-state.json")
    with open(path) as f:
        state = json.load(f)
    wrong = []
    if not state["ready"]:
        wrong.append("CNS has ingested no NodeNetworkConfig")
    orphans = sorted({c["nc"] for c in state["ips"] if c["nc"] not in state["ncs"]})
    for nc in orphans:
        n = sum(1 for c in state["ips"] if c["nc"] == nc)
        wrong.append(f"I1: {n} IP configs name network container {nc}, which is not in state")
    node_uid = kubectl("get", "node", NODE)["metadata"]["uid"]
    nncs = kubectl("get", "nodenetworkconfigs", "-n", "kube-system")["items"]
    live = [
        nc["id"]
        for nnc in nncs
        if nnc["metadata"]["name"] == NODE
        and any(r.get("controller") and r["uid"] == node_uid for r in nnc["metadata"].get("ownerReferences", []))
        for nc in nnc.get("status", {}).get("networkContainers", [])
    ]
    if sorted(state["ncs"]) != sorted(live):
        wrong.append(f"CNS holds network containers {sorted(state['ncs'])}; the live node's NNC carries {sorted(live)}")
    for w in wrong:
        print(w)
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
