#!/usr/bin/env python3
"""Import circles between the workspace's source files.

A file depends on another when it names an item defined there: through a
private `use`, or a path (`crate::`, `super::`, `self::`, a child module's
name) in its code. Re-exports (`pub use`, `pub(crate) use`) are followed to
the defining file, and are dependencies only when the file's own code uses
the name too: a `mod.rs` or `lib.rs` that only declares and re-exports is
a facade. Unit-test modules and other items compiled only for tests
(`#[cfg(test)]`) are left out.

Prints every strongly connected set of more than one file (an import
circle), every circle between a crate's top-level modules (a folder module
counts as one, so a circle through a re-export shows), and every break of
the layering rules ARCHITECTURE.md states (the Ward crates a crate may
depend on; ward-apiserver's layers in order, which also keep the store
from request handling and a kind from HTTP),
and exits 1 if there is one. Generated files (`// @generated` on their
first line) are left out. Usage: python3 .ci/imports.py [ROOT [PREFIX]]
(PREFIX: also print the edges of files under it).
"""
import os, re, sys

# Items a module defines: at the start of a line (an impl's associated
# `type Measured = ...` is not one).
ITEM = re.compile(r"^(?:pub(?:\([^)]*\))?\s+)?(?:async\s+|const\s+|unsafe\s+|extern\s+\"\w+\"\s+)*"
                  r"(?:fn|struct|enum|trait|type|const|static|union|macro_rules!)\s+(\w+)", re.M)
USE = re.compile(r"(?:^|\n)\s*(pub(?:\([^)]*\))?\s+)?use\s+([^;]+);")
RAW = re.compile(r'b?r(#*)"')  # a raw string's start
CHAR = re.compile(r"'(?:\\.[^']*|[^'\\])'")  # a character literal, not a lifetime

def strip(text):
    """The code of a file without comments, and with string and character
    literals emptied (so no brace or path inside one counts)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            i = text.find("\n", i)
            i = n if i < 0 else i
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            i = n if j < 0 else j + 2
        elif (m := RAW.match(text, i)) and not (i and (text[i - 1].isalnum() or text[i - 1] == "_")):
            end = text.find('"' + m.group(1), m.end())
            out.append('""')
            i = n if end < 0 else end + 1 + len(m.group(1))
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append('""')
            i = j + 1
        elif c == "'" and (m := CHAR.match(text, i)):
            out.append("' '")
            i = m.end()
        else:
            out.append(c)
            i += 1
    text = "".join(out)
    # Items only tests compile: `#[cfg(test)]` and the item after it
    # (a module, a function, an impl) up to its closing brace.
    out, i = [], 0
    while (j := text.find("#[cfg(test)]", i)) >= 0:
        out.append(text[i:j])
        k = text.find("{", j)
        semi = text.find(";", j)
        if k < 0 or 0 <= semi < k:
            i = semi + 1 if semi >= 0 else len(text)
            continue
        depth = 0
        for n in range(k, len(text)):
            depth += {"{": 1, "}": -1}.get(text[n], 0)
            if depth == 0:
                break
        i = n + 1
    out.append(text[i:])
    return "".join(out)

def expand(tree):
    tree = tree.strip()
    i = tree.find("{")
    if i < 0:
        parts = tree.split(" as ")
        return [(parts[0].strip(), parts[-1].strip().split("::")[-1])]
    prefix, body = tree[:i], tree[i + 1:tree.rfind("}")]
    items, depth, cur = [], 0, ""
    for ch in body:
        depth += ch == "{"
        depth -= ch == "}"
        if ch == "," and depth == 0:
            items.append(cur); cur = ""
        else:
            cur += ch
    items.append(cur)
    out = []
    for p in items:
        if p.strip():
            out += [((prefix + q).replace("::self", ""), a if q != "self" else prefix.rstrip(":").split("::")[-1])
                    for q, a in expand(p)]
    return out

class Crate:
    def __init__(self, src):
        self.mods = {}
        for dp, _, fns in os.walk(src):
            for f in fns:
                if not f.endswith(".rs"):
                    continue
                parts = os.path.relpath(os.path.join(dp, f), src)[:-3].split(os.sep)
                if parts[0] == "bin":
                    continue
                if parts[-1] == "mod":
                    parts = parts[:-1]
                if parts in (["lib"], ["main"]):
                    parts = []
                self.mods[tuple(parts)] = os.path.join(dp, f)
        self.generated = {f for f in self.mods.values()
                          if open(f).readline().startswith("// @generated")}
        self.text = {m: strip(open(f).read()) for m, f in self.mods.items()}
        self.items = {m: set(ITEM.findall(t)) for m, t in self.text.items()}
        self.reexports, self.uses = {}, {}
        for m, t in self.text.items():
            re_, us = {}, []
            for vis, tree in USE.findall(t):
                for path, alias in expand(tree):
                    if vis:
                        re_[alias] = path
                    else:
                        us.append(path)
            self.reexports[m], self.uses[m] = re_, us

    def base(self, m, segs):
        if segs[0] == "crate":
            return [], segs[1:]
        if segs[0] in ("super", "self"):
            b = list(m)
            while segs and segs[0] == "super":
                b, segs = b[:-1], segs[1:]
            if segs and segs[0] == "self":
                segs = segs[1:]
            return b, segs
        if tuple(list(m) + [segs[0]]) in self.mods:
            return list(m), segs
        return None, None

    def resolve(self, m, segs, depth=0):
        b, segs = self.base(m, segs)
        if b is None or depth > 10:
            return None
        cur = b
        for i, s in enumerate(segs):
            if tuple(cur + [s]) in self.mods:
                cur = cur + [s]
                continue
            mod = tuple(cur)
            if s in self.items.get(mod, ()):
                return mod
            if s in self.reexports.get(mod, {}):
                target = self.reexports[mod][s].split("::")
                r = self.resolve(mod, target, depth + 1)
                return r if r is not None else mod
            for alias, path in self.reexports.get(mod, {}).items():
                if alias == "*":
                    r = self.resolve(mod, path.split("::")[:-1] + [s], depth + 1)
                    if r is not None:
                        return r
            return mod
        return tuple(cur)

    def top(self):
        """Each file's top-level module (`lib` for the crate root)."""
        return {f: (m[0] if m else "lib") for m, f in self.mods.items()}

    def edges(self):
        out = {}
        for m, t in self.text.items():
            paths = list(self.uses[m])
            # A `use` line is counted once, through its expanded paths; a
            # re-export is a dependency only when the file uses the name too.
            code = USE.sub("\n", t)
            paths += [path for alias, path in self.reexports[m].items()
                      if alias != "*" and re.search(r"(?<![\w:.])(?<!fn )" + re.escape(alias) + r"\b", code)]
            paths += re.findall(r"\b(?:crate|super|self)(?:::\w+)+", code)
            for ch in re.findall(r"\bmod\s+(\w+)\s*;", t):
                paths += re.findall(r"(?<![\w:])" + ch + r"(?:::\w+)+", code)
            for p in paths:
                segs = [s.strip() for s in p.split("::") if s.strip()]
                if not segs:
                    continue
                r = self.resolve(m, segs)
                if r is not None and r != m:
                    out.setdefault(self.mods[m], set()).add(self.mods[r])
        # Generated files are no part of any circle: their edges go.
        return {f: {t for t in ts if t not in self.generated}
                for f, ts in out.items() if f not in self.generated}

def circles(edges):
    index, low, stack, on, found, n = {}, {}, [], set(), [], [0]
    def visit(v):
        index[v] = low[v] = n[0]; n[0] += 1
        stack.append(v); on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w); low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop(); on.discard(w); comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))
    sys.setrecursionlimit(10000)
    for v in list(edges):
        if v not in index:
            visit(v)
    return found

# The Ward crates each crate may depend on (normal dependencies; tests may
# use any): ARCHITECTURE.md's table. A crate not listed may use any.
CRATES = {
    "ward-base": set(),
    "ward-apiserver": {"ward-base"},
    "ward-runtime": {"ward-base"},
    "ward-guards": {"ward-base", "ward-runtime"},
    "ward-campaign": {"ward-base", "ward-apiserver"},
    "ward-campaign-cli": {"ward-campaign"},
}

# ward-apiserver's layers, lowest first (ARCHITECTURE.md): a top-level
# module never imports one listed after it, so the store (`storage`) knows
# no request (`auth`, `admission`, `http`, `server`) and a kind
# (`registry`) no HTTP. `lib`, `store` and `internals` are the facade
# (re-exports only).
LAYERS = {
    "apiserver": ["faults", "machinery", "schema", "registry", "storage", "auth",
                  "admission", "conversion", "controllers", "http", "server",
                  "store", "internals", "lib"],
}

def layer_order_breaks(crate, name, edges):
    order = LAYERS.get(name)
    if order is None:
        return []
    top = crate.top()
    out = [f"{name}: top-level module {m} is in no layer (imports.py's LAYERS)"
           for m in sorted(set(top.values())) if m not in order]
    for f, ts in edges.items():
        for t in ts:
            a, b = top[f], top[t]
            if a in order and b in order and order.index(b) > order.index(a):
                out.append(f"{f} imports {t}: layer {a} is below {b}")
    return out

# Import circles between a crate's top-level modules (a folder module and
# its files count as one, so a circle through a re-export is seen).
def module_circles(crate, name, edges):
    top = crate.top()
    me = {}
    for f, ts in edges.items():
        for t in ts:
            if top[f] != top[t]:
                me.setdefault(top[f], set()).add(top[t])
    return [f"{name}: import circle between top-level modules: {' '.join(comp)}"
            for comp in circles(me)]

def crate_breaks(root):
    import json, subprocess
    meta = json.loads(subprocess.run(
        ["cargo", "metadata", "--format-version", "1", "--no-deps", "--offline"],
        cwd=root, check=True, capture_output=True, text=True).stdout)
    out = []
    for p in meta["packages"]:
        allowed = CRATES.get(p["name"])
        if allowed is None:
            continue
        for d in p["dependencies"]:
            if d["kind"] is None and d["name"].startswith("ward") and d["name"] not in allowed:
                out.append(f"crate {p['name']} depends on {d['name']} (allowed: {', '.join(sorted(allowed)) or 'no Ward crate'})")
    return out


if __name__ == "__main__":
    root = sys.argv[1] if len(sys.argv) > 1 else "."
    show = sys.argv[2] if len(sys.argv) > 2 else None
    bad = 0
    for c in ["base", "apiserver", "framework", "guards", "campaign", "examples", "."]:
        src = os.path.join(root, c, "src")
        if not os.path.isdir(src):
            continue
        crate = Crate(src)
        e = crate.edges()
        for line in layer_order_breaks(crate, c, e) + module_circles(crate, c, e):
            bad += 1
            print(line)
        if show:
            for f in sorted(e):
                r = os.path.relpath(f, root)
                if r.startswith(show):
                    print(r, "->", sorted(os.path.relpath(x, root) for x in e[f]))
        for comp in circles(e):
            bad += 1
            print(f"{len(comp)} files:", " ".join(os.path.relpath(x, root) for x in comp))
    for line in crate_breaks(root):
        bad += 1
        print(line)
    sys.exit(1 if bad else 0)
