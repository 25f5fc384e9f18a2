"""The LWS race's history judge for `ward-campaign --judge`.

Reads the run's history (one JSON object a line: rv, type, key, object)
and exits 1 if one LeaderWorkerSet ever had two ControllerRevisions of the
same template under two hashes: the naive controller, reconciling a
re-made LeaderWorkerSet while the old StatefulSet lingers, takes the old
set's hash and records the new template under it — and may delete that
revision again at once, so nothing shows at the end.
"""
import json
import sys

live = {}  # revision name -> (owner uid, template as JSON)
wrong = []
for line in sys.stdin:
    event = json.loads(line)
    obj = event["object"]
    if obj.get("kind") != "ControllerRevision":
        continue
    meta = obj["metadata"]
    if event["type"] == "DELETED":
        live.pop(meta["name"], None)
        continue
    owners = [r["uid"] for r in meta.get("ownerReferences", []) if r.get("kind") == "LeaderWorkerSet"]
    template = json.dumps(obj.get("data"), sort_keys=True)
    for owner in owners:
        for name, (other, same) in live.items():
            if name != meta["name"] and other == owner and same == template:
                wrong.append(f"rv {event['rv']}: revisions {name} and {meta['name']} of one "
                             f"LeaderWorkerSet (uid {owner}) record the same template")
    live[meta["name"]] = (owners[0] if owners else None, template)
for w in wrong:
    print(w)
sys.exit(1 if wrong else 0)
