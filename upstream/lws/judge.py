"""The LWS campaign's history judge (`ward-campaign --judge`), for the
real controller and Ward's rebuild alike.

Reads the run's history (one JSON object a line: rv, type, key, object)
and exits 1 when a LeaderWorkerSet took anything from a StatefulSet that
was not its own (kubernetes-sigs/lws#732):

- a ControllerRevision made for LeaderWorkerSet U under the revision key
  of a StatefulSet another LeaderWorkerSet (an earlier incarnation of the
  same name) owns: the new object's template recorded under the old one's
  key;
- a terminating StatefulSet given another pod template: the new object's
  spec applied onto the old, dying set.

Neither needs to last: v0.7.0 deletes the wrong revision again once the
old set is gone, so nothing shows at the end.
"""
import json
import sys

KEY = "leaderworkerset.sigs.k8s.io/template-revision-hash"


def owner(meta):
    """The uid of the LeaderWorkerSet that controls an object, if any."""
    for ref in meta.get("ownerReferences") or []:
        if ref.get("kind") == "LeaderWorkerSet" and ref.get("controller"):
            return ref["uid"]
    for ref in meta.get("ownerReferences") or []:
        if ref.get("kind") == "LeaderWorkerSet":
            return ref["uid"]
    return None


sets = {}  # StatefulSet key -> its object as last written
wrong = []
for line in sys.stdin:
    event = json.loads(line)
    obj, rv = event["object"], event["rv"]
    kind, meta = obj.get("kind"), obj.get("metadata", {})
    if kind == "StatefulSet":
        before = sets.get(event["key"])
        if event["type"] == "DELETED":
            sets.pop(event["key"], None)
            continue
        if (
            before is not None
            and before["metadata"].get("uid") == meta.get("uid")
            and before["metadata"].get("deletionTimestamp")
            and before["spec"].get("template") != obj["spec"].get("template")
        ):
            wrong.append(
                f"rv {rv}: terminating StatefulSet {meta.get('name')} "
                f"(of LeaderWorkerSet uid {owner(before['metadata'])}) given another pod template"
            )
        sets[event["key"]] = obj
    elif kind == "ControllerRevision" and event["type"] == "ADDED":
        mine, key = owner(meta), (meta.get("labels") or {}).get(KEY)
        for s in sets.values():
            theirs = owner(s["metadata"])
            if (
                mine
                and theirs
                and theirs != mine
                and (s["metadata"].get("labels") or {}).get(KEY) == key
            ):
                state = "terminating" if s["metadata"].get("deletionTimestamp") else "live"
                wrong.append(
                    f"rv {rv}: ControllerRevision {meta.get('name')} of LeaderWorkerSet uid {mine} "
                    f"takes key {key} from the {state} StatefulSet {s['metadata'].get('name')} "
                    f"of LeaderWorkerSet uid {theirs}"
                )
for w in wrong:
    print(w)
sys.exit(1 if wrong else 0)
