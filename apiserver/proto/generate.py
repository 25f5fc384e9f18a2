#!/usr/bin/env python3
"""Generate apiserver/src/proto/schema.rs: the protobuf wire schema of the
Kubernetes kinds ward-apiserver serves, as a table its codec reads.

Inputs: two crates already in Cargo.lock, read from cargo's registry, and
the Go API types:
- k8s-pb 0.9.0 (prost messages generated from Kubernetes' generated.proto):
  each message's fields with their tag, wire type and message type;
- k8s-openapi 0.29.0 (serde types generated from Kubernetes' OpenAPI): each
  field's JSON name, which prost's snake_case names lose (`podIP` ->
  `pod_ip`), and which proto fields are Go embedded structs (nested in
  protobuf, their fields inlined in JSON);
- the Go types of k8s.io/api and k8s.io/apimachinery (checkouts given as
  arguments): which fields are plain (non-pointer) scalars with
  `omitempty`. Go marshals those to protobuf even when zero, and its JSON
  omits them; a pointer's zero (`replicas: 0`) is kept in both. Without
  this a decoded object would carry `"nodeName": ""`.

Usage, from the workspace root:
    python3 apiserver/proto/generate.py K8S_API_DIR K8S_APIMACHINERY_DIR \
        > apiserver/src/proto/schema.rs
Kept: every GA API version (v1, v2) and the apimachinery packages kinds use.
"""
import glob
import os
import re
import subprocess
import sys

REG = os.path.expanduser("~/.cargo/registry/src")
PB = sorted(glob.glob(f"{REG}/*/k8s-pb-0.9.0/src"))[0]
OPENAPI = sorted(glob.glob(f"{REG}/*/k8s-openapi-0.29.0/src"))[0]
OPENAPI_VERSIONS = ["v1_33", "v1_34", "v1_35", "v1_36", "v1_37"]  # newest wins
APIMACHINERY = (
    "apimachinery.pkg.apis.meta.v1",
    "apimachinery.pkg.api.resource",
    "apimachinery.pkg.runtime",
    "apimachinery.pkg.util.intstr",
)
# JSON names that differ from the Go field name beyond case.
RENAMED = {
    ("apiextensions_apiserver.pkg.apis.apiextensions.v1.JsonSchemaProps", "ref"): "$ref",
}
SCALARS = {"string": "String", "bool": "Bool", "int32": "Int32", "int64": "Int64",
           "double": "Double", "bytes": "Bytes"}

# An empty message is `pub struct X {}` on one line.
STRUCT_RE = re.compile(r"pub struct (\w+) \{(\}|.*?\n\})", re.S)
FIELD_RE = re.compile(r"#\[prost\((?P<attr>[^]]*)\)\]\s*pub (?P<name>r#\w+|\w+):\s*")
RESOURCE_RE = re.compile(
    r"impl crate::Resource for (\w+) \{\s*const API_VERSION: &'static str = \"([^\"]*)\";")


def kept(module):
    head, last = module.split(".")[0], module.split(".")[-1]
    if head == "apimachinery":
        return module in APIMACHINERY
    return head != "metrics" and re.fullmatch(r"v\d+", last) is not None


def type_at(body, start):
    """The Rust type written at `start`, up to its comma at depth 0."""
    depth = 0
    for i in range(start, len(body)):
        c = body[i]
        depth += (c == "<") - (c == ">")
        if c == "," and depth == 0:
            return re.sub(r"\s+", "", body[start:i]).replace(",>", ">")
    raise ValueError(body[start:start + 80])


def resolve(module, rust_ty):
    """A message type as k8s-pb writes it, to `module.Message`."""
    t = rust_ty
    for wrapper in ("::core::option::Option<", "::prost::alloc::vec::Vec<",
                    "::prost::alloc::boxed::Box<"):
        while t.startswith(wrapper):
            t = t[len(wrapper):-1]
    parts, mod = t.split("::"), module.split(".")
    while parts[0] == "super":
        mod, parts = mod[:-1], parts[1:]
    return ".".join(mod + parts)


def norm(snake):
    return snake.replace("_", "")


def openapi_names():
    """(module, lowercased type) -> {normalized snake name: JSON name}."""
    names = {}
    for version in OPENAPI_VERSIONS:
        root = f"{OPENAPI}/{version}"
        for path in glob.glob(f"{root}/**/*.rs", recursive=True):
            src = open(path).read()
            struct = re.search(r"pub struct (\w+) \{", src)
            pairs = re.findall(r'"([^"]+)" => Field::Key_(\w+),', src)
            if struct and pairs:
                module = os.path.relpath(os.path.dirname(path), root).replace(os.sep, ".")
                names[(module, struct.group(1).lower())] = {norm(s): j for j, s in pairs}
    return names


GO_STRUCT_RE = re.compile(r"^type (\w+) struct \{\n(.*?)^\}", re.S | re.M)
GO_FIELD_RE = re.compile(
    r'^\s+(?:\w+\s+)?(?P<ty>[*\w.\[\]]+)\s+`json:"[^",]*(?P<opts>[^"]*)"\s+protobuf:"\w+,(?P<tag>\d+),',
    re.M)


def go_omit_zero(api_dir, apimachinery_dir):
    """(module, lowercased struct) -> tags of plain scalar fields with
    omitempty: their zero value is "unset"."""
    out = {}
    roots = [(api_dir, "api"), (f"{apimachinery_dir}/pkg", "apimachinery.pkg")]
    for root, prefix in roots:
        for path in glob.glob(f"{root}/**/*.go", recursive=True):
            if path.endswith("_test.go") or "generated" in os.path.basename(path):
                continue
            rel = os.path.relpath(os.path.dirname(path), root).replace(os.sep, ".")
            module = f"{prefix}.{rel}"
            for sm in GO_STRUCT_RE.finditer(open(path).read()):
                tags = out.setdefault((module, sm.group(1).lower()), set())
                for fm in GO_FIELD_RE.finditer(sm.group(2)):
                    plain = not fm.group("ty").startswith(("*", "[", "map["))
                    if plain and "omitempty" in fm.group("opts"):
                        tags.add(int(fm.group("tag")))
    return out


def camel(snake):
    head, *rest = snake.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


def parse_pb():
    """Every kept message as {name: [field]}, and (apiVersion, module) pairs."""
    messages, modules = {}, set()
    for path in sorted(glob.glob(f"{PB}/**/mod.rs", recursive=True)):
        module = os.path.relpath(os.path.dirname(path), PB).replace(os.sep, ".")
        if not kept(module):
            continue
        src = open(path).read()
        for sm in STRUCT_RE.finditer(src):
            body, fields = sm.group(2).removesuffix("}") + "\n", []
            for fm in FIELD_RE.finditer(body):
                attr, ty = fm.group("attr"), type_at(body, fm.end())
                field = {"name": fm.group("name").removeprefix("r#"),
                         "tag": int(re.search(r'tag = "(\d+)"', attr).group(1)),
                         "repeated": "repeated" in attr}
                if attr.startswith("btree_map"):
                    value = re.search(r'btree_map = "string, (\w+)"', attr).group(1)
                    inner = re.search(r"BTreeMap<[^,]+,(.+?),?>$", ty).group(1)
                    field["ty"] = {"string": "MapString", "bytes": "MapBytes"}.get(
                        value, f'MapMessage("{resolve(module, inner)}")')
                elif attr.startswith("message"):
                    field["message"] = resolve(module, ty)
                    field["ty"] = f'Message("{field["message"]}")'
                else:
                    field["ty"] = SCALARS[re.match(r"(\w+)", attr).group(1)]
                fields.append(field)
            messages[f"{module}.{sm.group(1)}"] = fields
        for rm in RESOURCE_RE.finditer(src):
            modules.add((rm.group(2), module))
    return messages, modules


def inlines(messages, own, message):
    """Whether `message` is a Go embedded struct of a type whose JSON
    fields are `own`: each of its fields is one of them, or embedded too."""
    nested = messages.get(message)
    return bool(nested) and all(
        norm(n["name"]) in own or inlines(messages, own, n.get("message")) for n in nested)


def mark_omit_zero(messages, omit):
    for full, fields in messages.items():
        module, msg = full.rsplit(".", 1)
        tags = omit.get((module, msg.lower()), set())
        for f in fields:
            scalar = f["ty"] in SCALARS.values() and not f["repeated"]
            f["omit_zero"] = scalar and f["tag"] in tags


def name_fields(messages, names):
    """Give each field its JSON name ("" for an embedded struct); the
    guessed ones (no k8s-openapi type or field) are returned."""
    by_module = {}
    for (module, _), fields in names.items():
        by_module.setdefault(module, {}).update(fields)
    guessed = []
    for full, fields in messages.items():
        module, msg = full.rsplit(".", 1)
        own = names.get((module, msg.lower()))
        for f in fields:
            key = norm(f["name"])
            json = RENAMED.get((full, f["name"]))
            if json is None and own is not None:
                json = own.get(key)
                if json is None and inlines(messages, own, f.get("message")):
                    json = ""  # embedded: proto nests it, JSON inlines it
            if json is None and own is None:
                json = by_module.get(module, {}).get(key)
            if json is None:
                json = camel(f["name"])
                guessed.append(f"{full}.{f['name']} -> {json}")
            f["json"] = json
    return guessed


def go_versions():
    """What the Go checkouts are: their git commit, or their directory name."""
    out = []
    for d in sys.argv[1:3]:
        try:
            rev = subprocess.run(["git", "-C", d, "rev-parse", "--short=10", "HEAD"],
                                 capture_output=True, text=True, check=True).stdout.strip()
        except (OSError, subprocess.CalledProcessError):
            rev = os.path.basename(os.path.normpath(d))
        out.append(rev)
    return out


def main():
    messages, modules = parse_pb()
    guessed = name_fields(messages, openapi_names())
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    mark_omit_zero(messages, go_omit_zero(sys.argv[1], sys.argv[2]))
    out = sys.stdout
    out.write("// @generated by apiserver/proto/generate.py from k8s-pb 0.9.0 (tags, types),\n")
    out.write("// k8s-openapi 0.29.0 (JSON names) and the Go types of k8s.io/api and\n")
    out.write(f"// k8s.io/apimachinery ({', '.join(go_versions())}). Do not edit by hand.\n\n")
    out.write("use super::schema_types::{Field, Message, Ty::*};\n\n")
    out.write("/// Each API version's k8s-pb module (where its kinds' messages are).\n")
    out.write("pub(super) static MODULES: &[(&str, &str)] = &[\n")
    for av, module in sorted(modules):
        out.write(f'    ("{av}", "{module}"),\n')
    out.write("];\n\n")
    out.write("/// Every message (`module.Message`) with its fields, sorted by name.\n")
    out.write("pub(super) static MESSAGES: &[Message] = &[\n")
    for name in sorted(messages):
        out.write(f'    Message {{ name: "{name}", fields: &[\n')
        for f in messages[name]:
            out.write(f'        Field {{ tag: {f["tag"]}, json: "{f["json"]}", ty: {f["ty"]}, '
                      f'repeated: {str(f["repeated"]).lower()}, '
                      f'omit_zero: {str(f["omit_zero"]).lower()} }},\n')
        out.write("    ] },\n")
    out.write("];\n")
    for g in guessed:
        print(f"guessed {g}", file=sys.stderr)


main()
