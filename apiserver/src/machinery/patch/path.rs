//! The path of a field from an object's root, as strategic merge and
//! server-side apply walk objects: field names without list indices (the
//! items of a list share the list's path), allocation-free.

/// Deepest nesting (maps and list items) walked before giving up. The JSON
/// and YAML parsers stop at 128 / 64 levels and JSON / merge patches may not
/// produce deeper objects, so this only stops hand-built values, well before
/// a 2 MiB thread stack (tokio's default) could run out even in debug builds.
pub(crate) const MAX_DEPTH: usize = 150;

/// Field-name path from the object root, without list indices (items of a
/// list share the list's path). Allocation-free: each level borrows its parent.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Path<'a> {
    name: &'a str,
    parent: Option<&'a Path<'a>>,
    depth: usize,
}

impl<'a> Path<'a> {
    /// The object root.
    pub(crate) const ROOT: Path<'static> = Path {
        name: "",
        parent: None,
        depth: 0,
    };

    /// The path of field `name` below `self`.
    pub(crate) fn child(&'a self, name: &'a str) -> Path<'a> {
        Path {
            name,
            parent: Some(self),
            depth: self.depth + 1,
        }
    }

    /// The same path one nesting level deeper (entering a list item).
    pub(crate) fn item(&self) -> Path<'a> {
        Path {
            depth: self.depth + 1,
            ..*self
        }
    }

    pub(crate) fn too_deep(&self) -> bool {
        self.depth > MAX_DEPTH
    }

    /// Whether this is the object root.
    pub(crate) fn is_root(&self) -> bool {
        self.parent.is_none()
    }

    /// Whether this is field `name` directly below the root (e.g. `.spec`).
    pub(crate) fn is_top_level(&self, name: &str) -> bool {
        self.name == name && self.parent.is_some_and(|p| p.parent.is_none())
    }

    /// The last field name (empty at the root).
    pub(crate) fn name(&self) -> &'a str {
        self.name
    }

    /// As Kubernetes prints a field path in a conflict: `.spec.replicas`
    /// (`.` for the root).
    pub(crate) fn display(&self) -> String {
        let mut names = Vec::new();
        let mut p = Some(self);
        while let Some(cur) = p {
            if cur.parent.is_some() {
                names.push(cur.name);
            }
            p = cur.parent;
        }
        names.reverse();
        if names.is_empty() {
            ".".to_string()
        } else {
            format!(".{}", names.join("."))
        }
    }
}
