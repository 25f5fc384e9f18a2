#!/usr/bin/env bash
# ward-campaign against a kopf operator (Python, from PyPI): kopf's own
# finalizers, status patches and watches under every perturbation kind.
# Not part of `cargo test` (kopf and the kubernetes client take ~50 s to
# install); run it by hand or from the benchmarks:
#
#   bash campaign/tests/kopf/run.sh [SEEDS] [extra ward-campaign options]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
venv=${KOPF_VENV:-$root/target/kopf-venv}
if [ ! -x "$venv/bin/kopf" ]; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet kopf kubernetes
fi
seeds=${1:-20}
shift || true
cargo build --release --quiet --bin ward-campaign --manifest-path "$root/Cargo.toml"
exec "$root/target/release/ward-campaign" --seeds "$seeds" \
    --manifests "$here/crd.yaml" --workload "$here/workload.yaml" "$@" \
    -- "$venv/bin/kopf" run --standalone -n default "$here/greeting_operator.py"
