//! The kubectl scenario's checks of what the server's schemas decide: a
//! misspelled field under each `--validate` mode, and `kubectl explain`.

use super::{CRD, Ctl, kubectl, says, text};

/// A manifest with a misspelled field fails as on a cluster: kubectl's
/// default `--validate=strict` sends `fieldValidation=Strict` (the server
/// advertises it), `--validate=warn` applies with a warning, and
/// `--validate=false` applies with the field dropped. The same for a
/// custom resource, whose CRD's schema decides what is unknown.
pub(super) async fn field_validation(k: &Ctl) {
    const DEPLOYMENT: &str = "apiVersion: apps/v1
kind: Deployment
metadata: {name: typo, namespace: default}
spec:
  replica: 2
  selector: {matchLabels: {app: typo}}
  template:
    metadata: {labels: {app: typo}}
    spec:
      containers: [{name: c, image: nginx, imagePullPolcy: Always}]
";
    let path = k.dir.path().join("typo.yaml");
    std::fs::write(&path, DEPLOYMENT).unwrap();
    let file = path.to_str().unwrap();
    let err = k.fails(&["apply", "-f", file]).await;
    says(
        &err,
        "strict decoding error: unknown field \"spec.replica\", unknown field \"spec.template.spec.containers[0].imagePullPolcy\"",
    );
    k.gone("deployment/typo").await;
    let out = kubectl(
        &k.bin,
        &k.kubeconfig,
        &["apply", "--validate=warn", "-f", file],
    )
    .await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    says(&text(&out.stderr), "unknown field \"spec.replica\"");
    let d = k.json(&["deployment", "typo"]).await;
    assert!(d["spec"].get("replica").is_none(), "{d}");
    k.ok(&["delete", "deployment", "typo"]).await;
    says(
        &k.ok(&["apply", "--validate=false", "-f", file]).await,
        "deployment.apps/typo created",
    );
    k.ok(&["delete", "deployment", "typo"]).await;

    says(&k.with_file(&["create"], "crd.yaml", CRD).await, "created");
    let crd = "crd/widgets.example.ward.dev";
    k.ok(&["wait", "--for=condition=established", "--timeout=30s", crd])
        .await;
    let widget = "apiVersion: example.ward.dev/v1\nkind: Widget\nmetadata: {name: typo}\nspec: {size: 1, colour: red}\n";
    let path = k.dir.path().join("widget-typo.yaml");
    std::fs::write(&path, widget).unwrap();
    let err = k.fails(&["apply", "-f", path.to_str().unwrap()]).await;
    says(&err, "strict decoding error: unknown field \"spec.colour\"");
    k.ok(&["delete", crd]).await;
}

/// `kubectl explain` lists the fields of built-in kinds (from /openapi/v3,
/// which every kubectl from 1.27 reads for it), with kube's descriptions
/// (from /openapi/v2 too), and of a custom resource (its CRD's schema).
pub(super) async fn explain(k: &Ctl) {
    let out = k.ok(&["explain", "deployment.spec"]).await;
    says(
        &out,
        "DeploymentSpec is the specification of the desired behavior",
    );
    says(&out, "Number of desired pods.");
    let v2 = ["explain", "deployment.spec", "--output=plaintext-openapiv2"];
    says(&k.ok(&v2).await, "Number of desired pods.");
    for f in [
        "replicas\t<integer>",
        "selector\t<LabelSelector>",
        "template\t<PodTemplateSpec>",
    ] {
        says(&out, f);
    }
    let out = k.ok(&["explain", "pod.spec.containers"]).await;
    for f in [
        "image\t<string>",
        "imagePullPolicy\t<string>",
        "ports\t<[]ContainerPort>",
    ] {
        says(&out, f);
    }
    says(&k.with_file(&["create"], "crd.yaml", CRD).await, "created");
    let crd = "crd/widgets.example.ward.dev";
    k.ok(&["wait", "--for=condition=established", "--timeout=30s", crd])
        .await;
    let out = k.ok(&["explain", "widgets.spec"]).await;
    says(&out, "size\t<integer>");
    says(&out, "color\t<string>");
    let out = k.ok(&["explain", "widgets"]).await;
    says(&out, "metadata\t<ObjectMeta>");
    says(&out, "APIVersion defines the versioned schema");
    says(
        &k.ok(&["explain", "widgets.metadata"]).await,
        "Standard object's metadata",
    );
    k.ok(&["delete", crd]).await;
}
