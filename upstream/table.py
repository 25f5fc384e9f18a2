"""The table of upstream/campaign: one row per campaign (`--json` of
ward-campaign), named by its file (`<controller>-<workload>.json`).

Exit 1 unless the buggy release broke at least once on the seed's
workload and nothing that should hold broke: the fixed release on the
seed's workload, Ward's guarded rebuild on every workload. (On
workload-gc-lag the fixed release may break: that is what it shows.)
"Broken" is the judge's verdict; "differs" (the differential oracle's) is
counted apart: v0.8.0's revision numbers depend on its cache's timing
(upstream/README.md).
"""
import json
import os
import sys

BUGGY = {"lws-v0.7.0", "whereabouts-v0.9.2"}
FIXED_ON_SEED_WORKLOAD = {"lws-v0.8.0", "whereabouts-v0.6.1"}

rows, bad = [], []
for path in sys.argv[1:]:
    label = os.path.basename(path)[: -len(".json")]
    controller, _, workload = label.partition("-workload")
    workload = "workload" + workload
    o = json.load(open(path))
    runs = o["runs"]
    verdicts = [j["verdict"]["verdict"] for j in runs]
    broken = [j["run"]["seed"] for j in runs if j["verdict"]["verdict"] == "broken"]
    differs = verdicts.count("differs")
    unperturbed = sum(j["verdict"]["verdict"] == "broken" for j in o["unperturbed"])
    could_not = verdicts.count("could-not-run")
    per_seed = o["seconds"] / max(1, len(runs) + len(o["unperturbed"]))
    first = broken[0] if broken else None
    rows.append((controller, workload, len(runs), len(broken), differs, unperturbed, could_not,
                 per_seed, "-" if first is None else str(first)))
    if could_not:
        bad.append(f"{label}: {could_not} runs could not run")
    if controller in BUGGY and workload == "workload" and not broken and not unperturbed:
        bad.append(f"{label}: the buggy release never broke")
    if (controller in FIXED_ON_SEED_WORKLOAD and workload == "workload" or controller == "ward-guarded") and (broken or unperturbed):
        bad.append(f"{label}: broke (seeds {broken}, {unperturbed} unperturbed runs)")

print("| controller | workload | seeds | broken | differs | unperturbed broken | could not run | s/run | first broken seed |")
print("|---|---|---|---|---|---|---|---|---|")
for r in sorted(rows):
    print(f"| {r[0]} | {r[1]} | {r[2]} | {r[3]} | {r[4]} | {r[5]} | {r[6]} | {r[7]:.1f} | {r[8]} |")
for b in bad:
    print(f"upstream/campaign: {b}", file=sys.stderr)
sys.exit(1 if bad else 0)
