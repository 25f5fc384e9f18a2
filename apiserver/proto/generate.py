#!/usr/bin/env python3
"""Generate apiserver/src/machinery/proto/schema.rs: the protobuf wire schema of the
Kubernetes kinds ward-apiserver serves, as a table its codec reads.

Usage, from anywhere in the repository (paths are the script's own):
    python3 apiserver/proto/generate.py            # write schema.rs
    python3 apiserver/proto/generate.py --check    # exit 1 if it differs
    python3 apiserver/proto/generate.py --extract-go
        # rewrite go_omitempty.txt and go_always.txt from the Go
        # modules k8s.io/api, apimachinery and apiextensions-apiserver at
        # RELEASES' tags (`go mod download`: Go and its module proxy), and
        # check json_names.txt against their json tags

Inputs, every one pinned:
- k8s-pb 0.9.0: prost messages generated from the generated.proto files of
  Kubernetes v1.35.0 (its justfile's KUBERNETES_VERSION): each message's
  fields with their tag, wire type and message type. Tags are never reused,
  so each field the served 1.33 has carries the same tag; the fields 1.34
  and 1.35 added are kept, as ward-apiserver (which validates no schema)
  keeps them in JSON bodies.
- k8s-openapi 0.29.0 (serde types generated from Kubernetes' OpenAPI), its
  modules in RELEASES' order (v1_33, the served release, then v1_35 for the
  fields 1.33 lacks): each field's JSON name, which prost's snake_case names
  lose (`podIP` -> `pod_ip`), and which proto fields are Go embedded structs
  (nested in protobuf, their fields inlined in JSON). Both crates are read
  where `cargo metadata` says Cargo.lock's versions are (any CARGO_HOME; run
  `cargo fetch` first if they are not downloaded).
- json_names.txt: the JSON name of each field k8s-openapi's own types do not
  name (lists' items, options and review messages, embedded structs'
  fields...), each checked against its Go json tag. A field named nowhere
  fails the run: add it there, from the Go type, never by guessing.
- go_omitempty.txt: which fields are plain (non-pointer) Go scalars with
  `omitempty`, taken once from k8s.io/api and k8s.io/apimachinery at the
  tags in RELEASES (`--extract-go`). Go marshals those to protobuf even
  when zero, and its JSON omits them; a pointer's zero (`replicas: 0`) is
  kept in both. Without this a decoded object would carry `"nodeName": ""`.
- go_always.txt: which maps, lists and structs Go's JSON always writes,
  from the same modules and apiextensions-apiserver's: a plain
  (non-pointer) struct (`spec`, `template`, a CRD's `names`; omitempty
  never leaves one out), and any field without `omitempty` (a pod's
  `containers`, `null` when nil). Kubernetes' field manager compares
  objects in that form, so a write that adds such a field does not own it
  with a `.` entry of its own in `managedFields`, as it does a map, a list
  or a pointer struct it adds.
- go_atomic.txt: the Go struct types marked `+structType=atomic` (a
  LabelSelector, an ObjectReference, a RoleRef...), which Kubernetes'
  field manager owns whole (`f:selector: {}`), for the messages
  schema.rs has.
- go_docs.txt: the API documentation of those modules' types and fields
  at the served release (their `types_swagger_doc_generated.go`), which
  kube-apiserver publishes as OpenAPI descriptions and `kubectl explain`
  prints: one JSON array per line, [message, JSON field name or "" for
  the type, text], for the messages schema.rs has.

schema.rs's header names these inputs and carries an FNV-1a 64 digest of
its body and the two data files; a Rust test (schema_types.rs) recomputes
it, so an edit by hand, or data changed without regenerating, fails
`cargo test`. `.ci/run` runs `--check`.

Refreshing for another Kubernetes release: bump the crates in Cargo.lock
and PB, OPENAPI, RELEASES here (the first release is the one
discovery::KUBE_MINOR serves, which the run checks; the last the one
k8s-pb's justfile names), run --extract-go with clones holding the new
tags (k8s.io/api and k8s.io/apimachinery tag Kubernetes 1.x.y as v0.x.y),
then add the names the run asks for to json_names.txt, from the Go types,
and regenerate.

Kept: every GA API version (v1, v2) and the apimachinery packages kinds use.

Why a table rather than k8s-pb's prost structs at run time: see the module
doc of apiserver/src/machinery/proto/mod.rs.
"""
import difflib
import functools
import glob
import json
import os
import re
import subprocess
import sys
import tarfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SCHEMA = os.path.join(ROOT, "apiserver/src/machinery/proto/schema.rs")
NAMES = os.path.join(HERE, "json_names.txt")
GO_DATA = os.path.join(HERE, "go_omitempty.txt")
GO_ALWAYS = os.path.join(HERE, "go_always.txt")
GO_DOCS = os.path.join(HERE, "go_docs.txt")
GO_ATOMIC = os.path.join(HERE, "go_atomic.txt")
ATOMIC_RE = re.compile(r"((?:^//.*\n)+)type (\w+) struct \{", re.M)
# The Go modules --extract-go reads: (module, folder of its API packages,
# k8s-pb's prefix for them, whether its omitempty scalars are taken).
GO_MODULES = [("k8s.io/api", "", "api", True),
              ("k8s.io/apimachinery", "pkg", "apimachinery.pkg", True),
              ("k8s.io/apiextensions-apiserver", "pkg", "apiextensions_apiserver.pkg", True)]
DISCOVERY = os.path.join(ROOT, "apiserver/src/http/discovery.rs")

PB = ("k8s-pb", "0.9.0")  # generated from Kubernetes v1.35.0's protos
OPENAPI = ("k8s-openapi", "0.29.0")
# Kubernetes releases, first wins for each field: the one served, then the
# one k8s-pb's protos are from. (release, k8s-openapi module, Go module tag)
RELEASES = [("v1.33.0", "v1_33", "v0.33.0"), ("v1.35.0", "v1_35", "v0.35.0")]
APIMACHINERY = (
    "apimachinery.pkg.apis.meta.v1",
    "apimachinery.pkg.api.resource",
    "apimachinery.pkg.runtime",
    "apimachinery.pkg.util.intstr",
)
SCALARS = {"string": "String", "bool": "Bool", "int32": "Int32", "int64": "Int64",
           "double": "Double", "bytes": "Bytes"}

# An empty message is `pub struct X {}` on one line.
STRUCT_RE = re.compile(r"pub struct (\w+) \{(\}|.*?\n\})", re.S)
FIELD_RE = re.compile(r"#\[prost\((?P<attr>[^]]*)\)\]\s*pub (?P<name>r#\w+|\w+):\s*")
RESOURCE_RE = re.compile(
    r"impl crate::Resource for (\w+) \{\s*const API_VERSION: &'static str = \"([^\"]*)\";")
GO_STRUCT_RE = re.compile(r"^type (\w+) struct \{\n(.*?)^\}", re.S | re.M)
SWAGGER_MAP_RE = re.compile(r"^var map_(\w+) = map\[string\]string\{\n(.*?)^\}", re.S | re.M)
SWAGGER_ENTRY_RE = re.compile(r'^\s*"((?:[^"\\]|\\.)*)":\s*"((?:[^"\\]|\\.)*)",$', re.M)
GO_FIELD_RE = re.compile(r"^\s+(?:\w+\s+)?(?P<ty>[*\w.\[\]]+)\s+`(?P<tags>[^`]*)`", re.M)


def fail(msg):
    raise SystemExit(f"generate.py: {msg}")


@functools.cache
def packages():
    meta = subprocess.run(["cargo", "metadata", "--format-version", "1", "--locked"],
                          cwd=ROOT, capture_output=True, text=True)
    if meta.returncode != 0:
        fail(f"cargo metadata failed:\n{meta.stderr}")
    return json.loads(meta.stdout)["packages"]


def crate_src(name, version):
    """The src directory of a crate at the version Cargo.lock has."""
    found = [p for p in packages() if p["name"] == name]
    for p in found:
        if p["version"] == version:
            return os.path.join(os.path.dirname(p["manifest_path"]), "src")
    fail(f"Cargo.lock has {name} {[p['version'] for p in found]}, generate.py pins "
         f"{version}: update the pin (and RELEASES) and regenerate")


def check_served():
    minor = re.search(r'KUBE_MINOR: &str = "(\d+)"', open(DISCOVERY).read()).group(1)
    if not RELEASES[0][0].startswith(f"v1.{minor}."):
        fail(f"ward-apiserver serves 1.{minor} (discovery::KUBE_MINOR) but RELEASES "
             f"starts with {RELEASES[0][0]}")


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


def parse_pb(pb):
    """Every kept message as {name: [field]}, and (apiVersion, module) pairs."""
    messages, modules = {}, set()
    for path in sorted(glob.glob(f"{pb}/**/mod.rs", recursive=True)):
        module = os.path.relpath(os.path.dirname(path), pb).replace(os.sep, ".")
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


def openapi_names(openapi):
    """(module, lowercased type) -> {normalized snake name: JSON name}, each
    field from the first of RELEASES' modules that has it."""
    names = {}
    for _, version, _ in RELEASES:
        root = f"{openapi}/{version}"
        for path in sorted(glob.glob(f"{root}/**/*.rs", recursive=True)):
            src = open(path).read()
            struct = re.search(r"pub struct (\w+) \{", src)
            pairs = re.findall(r'"([^"]+)" => Field::Key_(\w+),', src)
            if struct and pairs:
                module = os.path.relpath(os.path.dirname(path), root).replace(os.sep, ".")
                own = names.setdefault((module, struct.group(1).lower()), {})
                for j, s in pairs:
                    own.setdefault(norm(s), j)
    return names


def read_listed_names():
    """json_names.txt: (message, field) -> JSON name."""
    listed = {}
    for line in open(NAMES):
        words = line.split("#", 1)[0].split()
        if words:
            message, field, json_name = words
            listed[(message, field)] = json_name
    return listed


def inlines(messages, own, message):
    """Whether `message` is a Go embedded struct of a type whose JSON
    fields are `own`: each of its fields is one of them, or embedded too."""
    nested = messages.get(message)
    return bool(nested) and all(
        norm(n["name"]) in own or inlines(messages, own, n.get("message")) for n in nested)


def name_fields(messages, names, listed):
    """Give each field its JSON name ("" for an embedded struct): from its
    k8s-openapi type, else from json_names.txt. Fails on a field named by
    neither, and on a listed name no field uses."""
    unnamed, used = [], set()
    for full, fields in messages.items():
        module, msg = full.rsplit(".", 1)
        own = names.get((module, msg.lower()), {})
        for f in fields:
            json_name = own.get(norm(f["name"]))
            if json_name is None and own and inlines(messages, own, f.get("message")):
                json_name = ""  # embedded: proto nests it, JSON inlines it
            if json_name is None:
                json_name = listed.get((full, f["name"]))
                used.add((full, f["name"]))
            if json_name is None:
                unnamed.append(f"{full} {f['name']}")
            f["json"] = json_name
    stale = sorted(f"{m} {f}" for m, f in set(listed) - used)
    if unnamed or stale:
        fail("json_names.txt is out of step with the inputs.\n"
             + "".join(f"  no JSON name (add it, from the Go json tag): {u}\n" for u in unnamed)
             + "".join(f"  listed but named by k8s-openapi or gone (remove it): {s}\n"
                       for s in stale))


def read_go_data(path=GO_DATA):
    """go_omitempty.txt or go_always.txt: {message: tags}, checked to
    be from RELEASES."""
    text = open(path).read()
    name = os.path.basename(path)
    tags = re.search(r"^# tags: (.*)$", text, re.M)
    if tags is None or tags.group(1).split() != [t for _, _, t in RELEASES]:
        fail(f"{name} is not from RELEASES' tags: run --extract-go")
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            message, *numbers = line.split()
            # A tag may carry a letter: `s` for a plain struct (go_always.txt).
            out[message] = {n if n[-1].isalpha() else int(n) for n in numbers}
    return out


def fnv1a64(parts):
    h = 0xcbf29ce484222325
    for part in parts:
        for b in part.encode():
            h = ((h ^ b) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


def render(messages, modules, omit, plain):
    """schema.rs: a header naming the inputs and the digest, then the body."""
    body = ["use super::schema_types::{Field, Message, Ty::*};\n\n",
            "/// Each API version's k8s-pb module (where its kinds' messages are).\n",
            "pub(super) static MODULES: &[(&str, &str)] = &[\n"]
    body += [f'    ("{av}", "{module}"),\n' for av, module in sorted(modules)]
    body += ["];\n\n",
             "/// Every message (`module.Message`) with its fields, sorted by name.\n",
             "pub(super) static MESSAGES: &[Message] = &[\n"]
    for name in sorted(messages):
        body.append(f'    Message {{ name: "{name}", fields: &[\n')
        for f in messages[name]:
            omit_zero = f["tag"] in omit.get(name, ())
            tags = plain.get(name, ())
            struct = f"{f['tag']}s" in tags
            always = struct or f["tag"] in tags or f"{f['tag']}z" in tags
            body.append(f'        Field {{ tag: {f["tag"]}, json: "{f["json"]}", ty: {f["ty"]}, '
                        f'repeated: {str(f["repeated"]).lower()}, '
                        f'omit_zero: {str(omit_zero).lower()}, always: {str(always).lower()}, '
                        f'plain_struct: {str(struct).lower()} }},\n')
        body.append("    ] },\n")
    body.append("];\n")
    body = "".join(body)
    releases = ", then ".join(r for r, _, _ in RELEASES)
    modules_used = ", then ".join(m for _, m, _ in RELEASES)
    digest = fnv1a64([body, open(NAMES).read(), open(GO_DATA).read(), open(GO_ALWAYS).read()])
    header = (
        "// @generated by apiserver/proto/generate.py; do not edit by hand: run it\n"
        f"// (`--check` compares). Inputs: k8s-pb {PB[1]} (tags, types: Kubernetes\n"
        f"// {RELEASES[-1][0]}'s protos), k8s-openapi {OPENAPI[1]} modules {modules_used} and\n"
        "// apiserver/proto/json_names.txt (JSON names), apiserver/proto/\n"
        "// go_omitempty.txt (Go's omitempty scalars, from k8s.io/api and\n"
        f"// k8s.io/apimachinery of Kubernetes {releases}) and go_always.txt\n"
        "// (what Go's JSON always writes, apiextensions-apiserver's too); each field\n"
        "// from the first release that has it. The digest is FNV-1a 64 of this\n"
        "// file after the header, then json_names.txt, go_omitempty.txt and\n"
        "// go_always.txt:\n"
        f"// digest: {digest}\n\n")
    return header + body


def generate():
    check_served()
    pb, openapi = crate_src(*PB), crate_src(*OPENAPI)
    messages, modules = parse_pb(pb)
    name_fields(messages, openapi_names(openapi), read_listed_names())
    return render(messages, modules, read_go_data(), read_go_data(GO_ALWAYS))


def go_module(module, tag):
    """(folder, go.sum line hash) of Go module `module` at `tag`, downloaded
    through Go's module proxy (or found in its cache)."""
    try:
        run = subprocess.run(["go", "mod", "download", "-json", f"{module}@{tag}"],
                             capture_output=True, text=True)
    except FileNotFoundError:
        fail("--extract-go needs Go (the `go` command) and its module proxy")
    info = json.loads(run.stdout or "{}")
    if run.returncode != 0 or "Dir" not in info:
        fail(f"go mod download {module}@{tag}: {info.get('Error') or run.stderr.strip()}")
    return info["Dir"], info["Sum"]


def go_sources(folder, under, prefix):
    """(k8s-pb module, text) of each hand-written Go file in
    `folder`/`under` (not a test, not generated)."""
    root = os.path.join(folder, under)
    for here, _, files in os.walk(root):
        dirs = os.path.relpath(here, root).split(os.sep)
        module = ".".join([prefix] + [d for d in dirs if d != "."])
        for base in files:
            if (not base.endswith(".go") or base.endswith("_test.go")
                    or "generated" in base):
                continue
            with open(os.path.join(here, base)) as f:
                yield module, f.read()


def go_structs(folder, under, prefix):
    """(module, lowercased struct) -> {protobuf tag: (json name, plain type
    with omitempty, omitempty, omitzero)} of the hand-written Go files in
    `folder`/`under` (plain: not a pointer, slice or map)."""
    out = {}
    for module, source in go_sources(folder, under, prefix):
        for sm in GO_STRUCT_RE.finditer(source):
            fields = out.setdefault((module, sm.group(1).lower()), {})
            for fm in GO_FIELD_RE.finditer(sm.group(2)):
                proto = re.search(r'protobuf:"\w+,(\d+),', fm.group("tags"))
                js = re.search(r'json:"([^",]*)([^"]*)"', fm.group("tags"))
                if proto:
                    plain = not fm.group("ty").startswith(("*", "[", "map["))
                    options = js.group(2) if js else ""
                    omitempty = "omitempty" in options
                    fields[int(proto.group(1))] = (js.group(1) if js else None,
                                                   plain and omitempty,
                                                   (plain, omitempty, "omitzero" in options))
    return out


def go_atomic(folder, under, prefix):
    """The module.Type names of the structs marked `+structType=atomic`
    in the hand-written Go files in `folder`/`under`."""
    out = set()
    for module, source in go_sources(folder, under, prefix):
        for m in ATOMIC_RE.finditer(source):
            if re.search(r"^//\s*\+structType=atomic\s*$", m.group(1), re.M):
                out.add(f"{module}.{m.group(2)}")
    return out


def go_docs(folder, under, prefix):
    """{(module.Type, json field or ""): text} of the swagger docs Go
    generates beside the types in `folder`/`under`."""
    out = {}
    root = os.path.join(folder, under)
    for here, _, files in os.walk(root):
        if "types_swagger_doc_generated.go" not in files:
            continue
        dirs = os.path.relpath(here, root).split(os.sep)
        module = ".".join([prefix] + [d for d in dirs if d != "."])
        with open(os.path.join(here, "types_swagger_doc_generated.go")) as f:
            source = f.read()
        for mm in SWAGGER_MAP_RE.finditer(source):
            for em in SWAGGER_ENTRY_RE.finditer(mm.group(2)):
                # Go's interpreted string literals escape as JSON does here.
                key, text = (json.loads(f'"{g}"') for g in em.groups())
                out[(f"{module}.{mm.group(1)}", key)] = text
    return out


def extract_go():
    """Write go_omitempty.txt and go_always.txt from the Go types at
    RELEASES' tags, and check json_names.txt against their json tags."""
    messages, _ = parse_pb(crate_src(*PB))
    releases, sources = [], []
    for release, _, tag in RELEASES:
        source, omitting = {}, set()
        line = f"#   Kubernetes {release}:"
        for module, under, prefix, omitempty in GO_MODULES:
            folder, digest = go_module(module, tag)
            structs = go_structs(folder, under, prefix)
            source.update(structs)
            if omitempty:
                omitting.update(structs)
            line += f"\n#     {module} {tag} {digest}"
        sources.append((source, omitting))
        releases.append(line + "\n")
    docs, atomic = {}, set()
    for module, under, prefix, _ in GO_MODULES:
        folder, _ = go_module(module, RELEASES[0][2])
        docs.update(go_docs(folder, under, prefix))
        atomic |= go_atomic(folder, under, prefix)
    omit_lines, plain_lines, go_names = [], [], {}
    for name in sorted(messages):
        module, msg = name.rsplit(".", 1)
        key = (module, msg.lower())
        omit, plain = [], []
        for f in messages[name]:
            # The first release whose Go struct has the field decides.
            go = next(((s[key][f["tag"]], key in o) for s, o in sources
                       if f["tag"] in s.get(key, {})), None)
            if go is None:
                continue
            (json_name, plain_omitempty, (plain_type, omitempty, omitzero)), omitting = go
            go_names[(name, f["name"])] = json_name
            single = not f["repeated"]
            scalar = f["ty"] in SCALARS.values() and single
            if omitting and plain_omitempty and scalar:
                omit.append(f["tag"])
            # Written whatever its value: a plain struct (omitempty never
            # leaves one out) or anything without omitempty, unless
            # omitzero leaves its zero out; a plain scalar without
            # omitempty (`z`: its zero, "" or 0 or false, is written).
            struct = f["ty"].startswith("Message(") and single and plain_type
            time = f["ty"] in ('Message("apimachinery.pkg.apis.meta.v1.Time")',
                               'Message("apimachinery.pkg.apis.meta.v1.MicroTime")')
            if scalar and plain_type and not omitempty and not omitzero:
                plain.append((f["tag"], "z"))
            elif time:
                # A plain Time is a struct to Go: omitempty never leaves it
                # out (its zero is `null`), omitzero does, as the later
                # releases add it (`creationTimestamp`).
                later = any(s.get(key, {}).get(f["tag"], (0, 0, (0, 0, False)))[2][2]
                            for s, _ in sources)
                if single and plain_type and not later:
                    plain.append((f["tag"], "z"))
            elif not scalar and not omitzero and (struct or not omitempty):
                plain.append((f["tag"], "s" if struct else ""))
        if omit:
            omit_lines.append(f"{name} {' '.join(map(str, sorted(omit)))}\n")
        if plain:
            plain_lines.append(f"{name} {' '.join(f'{t}{s}' for t, s in sorted(plain))}\n")
    tags = f"# tags: {' '.join(t for _, _, t in RELEASES)}\n"
    with open(GO_DATA, "w") as out:
        out.write(
            "# The plain (non-pointer) Go scalar fields with `omitempty` of the\n"
            "# messages in apiserver/src/machinery/proto/schema.rs: a message (k8s-pb's name),\n"
            "# then those fields' protobuf tags. Go writes them to protobuf even when\n"
            "# zero and leaves them out of JSON. Taken by `generate.py --extract-go`\n"
            "# from the Go types of these modules, each field from the first that\n"
            "# has it (the served release, then the one k8s-pb's protos are from):\n"
            + "".join(releases) + tags
            + "# Messages from kube-aggregator are not read: they keep their zeros.\n"
            + "".join(omit_lines))
    with open(GO_ALWAYS, "w") as out:
        out.write(
            "# The maps, lists and structs Go's JSON always writes, of the messages\n"
            "# in apiserver/src/machinery/proto/schema.rs: a message (k8s-pb's name),\n"
            "# then those fields' protobuf tags: a plain (non-pointer) struct (`s`),\n"
            "# which omitempty never leaves out (`{}` when empty), a plain scalar or\n"
            "# Time without omitempty (`z`: its zero, or null, written), and any other\n"
            "# field without\n"
            "# omitempty (`null` when nil). Kubernetes' field manager compares\n"
            "# objects in that form, so a write that adds one owns no `.` entry for it.\n"
            "# Taken by `generate.py --extract-go` from the Go types of these\n"
            "# modules, each field from the first that has it:\n"
            + "".join(releases) + tags
            + "# Messages from kube-aggregator are not read.\n"
            + "".join(plain_lines))
    with open(GO_ATOMIC, "w") as out:
        out.write(
            "# The messages of apiserver/src/machinery/proto/schema.rs whose Go struct\n"
            "# is marked `+structType=atomic`: Kubernetes' field manager owns one\n"
            "# whole. Taken by `generate.py --extract-go` from these modules:\n"
            + releases[0] + "".join(f"{m}\n" for m in sorted(atomic) if m in messages))
    with open(GO_DOCS, "w") as out:
        out.write(
            "# The API documentation of the messages in\n"
            "# apiserver/src/machinery/proto/schema.rs, as kube-apiserver publishes it in\n"
            "# its OpenAPI documents: [message (k8s-pb's name), JSON field (\"\" for the\n"
            "# type), text] per line. Taken by `generate.py --extract-go` from the\n"
            "# types_swagger_doc_generated.go files of these modules:\n"
            + releases[0] + "".join(
                json.dumps([m, k, t], ensure_ascii=False) + "\n"
                for (m, k), t in sorted(docs.items()) if m in messages))
    wrong = [f"  {m} {f}: listed {j}, Go says {go_names[(m, f)]}"
             for (m, f), j in sorted(read_listed_names().items())
             if go_names.get((m, f)) not in (None, "", "-", j)]
    if wrong:
        fail("json_names.txt disagrees with the Go json tags:\n" + "\n".join(wrong))


def main():
    args = sys.argv[1:]
    if args == ["--extract-go"]:
        extract_go()
    elif args == ["--check"]:
        committed, fresh = open(SCHEMA).read(), generate()
        if fresh != committed:
            diff = list(difflib.unified_diff(committed.splitlines(), fresh.splitlines(),
                                             "committed", "generated", lineterm="", n=0))
            print("\n".join(diff[:40] + ["..."] * (len(diff) > 40)), file=sys.stderr)
            fail("apiserver/src/machinery/proto/schema.rs differs from what its inputs generate: "
                 "run `python3 apiserver/proto/generate.py` (never edit schema.rs by "
                 "hand) and commit the result")
        print("apiserver/src/machinery/proto/schema.rs is as generated")
    elif not args:
        schema = generate()
        with open(SCHEMA, "w") as out:
            out.write(schema)
    else:
        fail("usage: generate.py [--check | --extract-go]")


main()
