"""A tiny kopf operator for running against ward-apiserver as a black box.

Each `Greeting` (kopf.ward.dev/v1) owns a ConfigMap `<name>-greeting` whose
data.message mirrors spec.message. Exercises kopf's finalizer, its status
writes (handler return values land in status.<handler-id>), its diff-base
annotation, and ownerReferences via kopf.adopt (deletion is left to the GC).

    kopf run --standalone -n default greeting_operator.py   (with KUBECONFIG set)
"""
import logging
import os

import kopf
import kubernetes
from kubernetes.client.rest import ApiException

GROUP, VERSION, PLURAL = "kopf.ward.dev", "v1", "greetings"
# GREETING_GUARDED=1: check whose ConfigMap a name conflict found (see
# reconcile); without it, the operator has the "same name, different
# object" race ward-campaign finds under gc-pause (docs/campaigns.md).
GUARDED = os.environ.get("GREETING_GUARDED") == "1"


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, **_):
    # kopf logs in on its own; the kubernetes client needs the same kubeconfig.
    kubernetes.config.load_kube_config()
    kubernetes.client.CoreV1Api()  # the first one takes ~1.7 s (client warm-up)
    settings.persistence.finalizer = "kopf.ward.dev/greeting-cleanup"
    settings.posting.loggers = True  # post handler log lines as k8s Events
    settings.posting.level = logging.INFO
    # Optional probes of the server's list/watch paths (both off by default):
    # WARD_KOPF_STREAMING=1 -> watch with sendInitialEvents instead of a LIST;
    # WARD_KOPF_CHUNK=N     -> LIST in pages of N (limit/continue).
    settings.watching.initial_streaming = os.environ.get("WARD_KOPF_STREAMING") == "1"
    if os.environ.get("WARD_KOPF_CHUNK"):
        settings.watching.chunk_size = int(os.environ["WARD_KOPF_CHUNK"])


def configmap_for(name, message, body):
    cm = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": f"{name}-greeting"},
        "data": {"message": message or ""},
    }
    kopf.adopt(cm, owner=body)  # namespace, ownerReference, owner's labels
    return cm


@kopf.on.resume(GROUP, VERSION, PLURAL, id="reconcile")
@kopf.on.create(GROUP, VERSION, PLURAL, id="reconcile")
@kopf.on.update(GROUP, VERSION, PLURAL, id="reconcile")
def reconcile(name, namespace, spec, body, logger, **_):
    api = kubernetes.client.CoreV1Api()
    cm = configmap_for(name, spec.get("message"), body)
    cm_name = cm["metadata"]["name"]
    try:
        api.create_namespaced_config_map(namespace, cm)
        logger.info(f"created ConfigMap {cm_name}")
    except ApiException as e:
        if e.status != 409:
            raise kopf.TemporaryError(f"create {cm_name}: {e.status} {e.reason}", delay=5)
        if GUARDED:
            # The ConfigMap of that name may be a previous Greeting's (the
            # garbage collector has yet to delete it): patching it would
            # be lost with it. Wait for it to go instead.
            existing = api.read_namespaced_config_map(cm_name, namespace)
            owners = existing.metadata.owner_references or []
            if not any(o.uid == body["metadata"]["uid"] for o in owners):
                raise kopf.TemporaryError(f"{cm_name} belongs to another Greeting", delay=1)
        api.patch_namespaced_config_map(cm_name, namespace, {"data": cm["data"]})
        logger.info(f"updated ConfigMap {cm_name}")
    # Returned values are written by kopf into status.reconcile.
    return {"configMap": cm_name, "message": spec.get("message")}


@kopf.on.delete(GROUP, VERSION, PLURAL)
def cleanup(name, logger, **_):
    # Nothing to do by hand: the ConfigMap goes through the ownerReference.
    # Having a delete handler makes kopf hold the object with its finalizer.
    logger.info(f"Greeting {name} deleted; ConfigMap left to the garbage collector")
