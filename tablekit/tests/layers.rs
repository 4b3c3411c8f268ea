//! The structure of the workspace, checked. The layers of `tablekit-core/src`
//! and `tablekit/src`: each module may use the modules of its own layer and
//! the layers below it, never one above (see ARCHITECTURE.md); the core
//! crate holds the bottom three layers, and `tablekit` re-exports them at
//! the same paths. The check reads every `crate::…` and `super::…` path
//! (in `use` trees too) outside comments, and fails with the file, the line
//! and the two layers for an import that points up.
//!
//! The edges that still point up are listed in [`KNOWN_UPWARD`], to be
//! removed as the code moves; the check also fails when a listed edge is
//! gone, so the list only shrinks.
//!
//! The rules of every library crate (the conformance suite counts as one):
//! no function over 100 lines, no file over 1,000 lines, no files that
//! import each other round a cycle, and crates that depend only down (the
//! backends on the core crate, never on `tablekit`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The layers, bottom up, and the modules in each. A module path names a
/// top-level module, or `table::…` for the typed client's submodules.
const LAYERS: &[(&str, &[&str])] = &[
    (
        "model",
        &[
            "datetime", "edm", "value", "entity", "keyorder", "key", "error", "hex",
        ],
    ),
    ("rules and wire", &["validate", "filter", "json", "props"]),
    (
        "contracts",
        &[
            "backend",
            "blob",
            "queue",
            "clock",
            "exec",
            "order",
            "layer",
            "pacing",
            "pending",
            "telemetry",
        ],
    ),
    ("schema", &["schema"]),
    (
        "typed client",
        &[
            "table",
            "table::stored",
            "table::write",
            "table::query",
            "table::batch",
            "table::bulk",
            "table::merge",
            "table::migrate",
        ],
    ),
    (
        "patterns",
        &[
            "encryption",
            "index",
            "table::wide",
            "table::offload",
            "table::spanning",
            "outbox",
            "changes",
            "bucket",
            "shard",
            "log",
            "upkeep",
            "copy",
        ],
    ),
];

/// Modules outside the layers: the crate root's re-exports, the derive's
/// support module, and the conformance suite's hooks, which use everything.
const OUTSIDE: &[&str] = &["lib", "private", "hooks"];

/// Upward edges that are still there, `(from, to)`: none. An edge listed
/// here makes the check pass over it, and fails the check once it is gone.
const KNOWN_UPWARD: &[(&str, &str)] = &[];

/// The layer of a module path (`table::plan`, `schema`, …): its own entry,
/// else that of the module it is in (`table::plan::typed` is in
/// `table::plan`'s), else its top-level module's.
fn layer_of(module: &str) -> Option<usize> {
    let find = |name: &str| {
        LAYERS
            .iter()
            .position(|(_, modules)| modules.contains(&name))
    };
    // A file below a module of its own (`table::plan::typed`) is in that
    // module's layer.
    let two: String = module.split("::").take(2).collect::<Vec<_>>().join("::");
    find(module)
        .or_else(|| find(&two))
        .or_else(|| find(module.split("::").next()?))
}

/// The module a file holds: `table/plan.rs` is `table::plan`, `schema/mod.rs`
/// is `schema`.
fn module_of(relative: &Path) -> String {
    let mut parts: Vec<String> = relative
        .with_extension("")
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    parts.join("::")
}

/// The module a path names, as far as the layers care: `crate::table::plan`
/// is `table::plan` when that is a module of its own, else `table`.
fn target(first: &str, second: Option<&str>) -> String {
    if let Some(second) = second {
        let nested = format!("{first}::{second}");
        if layer_of(&nested).is_some() && LAYERS.iter().any(|(_, m)| m.contains(&nested.as_str())) {
            return nested;
        }
    }
    first.to_owned()
}

/// `line` without its comment.
fn code(line: &str) -> &str {
    match line.find("//") {
        Some(at) => &line[..at],
        None => line,
    }
}

fn identifier(text: &str) -> Option<&str> {
    let end = text
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(text.len());
    (end > 0).then(|| &text[..end])
}

/// The first two segments of each path that follows `prefix` in `text`: a
/// plain path, or each entry of a `{…}` group (one level of nesting deep).
fn paths_after<'a>(text: &'a str, prefix: &str) -> Vec<(&'a str, Option<&'a str>)> {
    let mut found = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find(prefix) {
        let before = &rest[..at];
        rest = &rest[at + prefix.len()..];
        // A longer name that ends in the prefix (`my_crate::`) is not it.
        if before.ends_with(|c: char| c.is_ascii_alphanumeric() || c == '_') {
            continue;
        }
        if let Some(group) = rest.strip_prefix('{') {
            let mut depth = 0;
            let end = group
                .char_indices()
                .find(|&(_, c)| {
                    match c {
                        '{' => depth += 1,
                        '}' if depth == 0 => return true,
                        '}' => depth -= 1,
                        _ => {}
                    }
                    false
                })
                .map_or(group.len(), |(i, _)| i);
            let mut depth = 0;
            let mut start = 0;
            let inner = &group[..end];
            for (i, c) in inner.char_indices().chain([(inner.len(), ',')]) {
                match c {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        let entry = inner[start..i].trim();
                        start = i + 1;
                        if let Some(first) = identifier(entry) {
                            let second =
                                entry[first.len()..].strip_prefix("::").and_then(identifier);
                            found.push((first, second));
                        }
                    }
                    _ => {}
                }
            }
        } else if let Some(first) = identifier(rest) {
            let second = rest[first.len()..].strip_prefix("::").and_then(identifier);
            found.push((first, second));
        }
    }
    found
}

/// Every `.rs` file under `root`, in order.
fn rust_files(root: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("read the source directory") {
            let path = entry.expect("an entry").path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

/// The names the crate root (`lib.rs` under `root`) re-exports from its
/// modules (`pub use table::{Table, …}`), each with the module it comes
/// from: `Table` → `table`.
fn root_exports(root: &Path) -> BTreeMap<String, String> {
    let Ok(text) = std::fs::read_to_string(root.join("lib.rs")) else {
        return BTreeMap::new();
    };
    let code: String = text
        .lines()
        .map(|line| format!("{}\n", code(line)))
        .collect();
    full_paths(&code, "pub use ")
        .into_iter()
        .filter(|path| path.len() >= 2)
        .filter_map(|path| {
            let name = path.last()?.clone();
            let home = target(
                &path[0],
                path.get(1).map(String::as_str).filter(|_| path.len() > 2),
            );
            Some((name, home))
        })
        .collect()
}

/// An upward edge: where, and between which layers.
#[derive(Debug)]
struct Upward {
    file: PathBuf,
    line: usize,
    from: String,
    to: String,
}

/// Every upward edge of the files under `root`. Test-only files
/// (`tests.rs`) are left out.
fn upward_edges(root: &Path) -> Vec<Upward> {
    let files = rust_files(root);
    let exports = root_exports(root);
    let mut edges = Vec::new();
    for file in files {
        let relative = file.strip_prefix(root).expect("under the root");
        if relative.file_name().is_some_and(|n| n == "tests.rs") {
            continue;
        }
        let module = module_of(relative);
        if OUTSIDE.contains(&module.split("::").next().unwrap_or_default()) {
            continue;
        }
        let Some(from_layer) = layer_of(&module) else {
            panic!(
                "{}: module `{module}` is in no layer: add it to LAYERS",
                file.display()
            );
        };
        // `super::` names the module a file's module is in.
        let parent: Vec<&str> = {
            let mut parts: Vec<&str> = module.split("::").collect();
            parts.pop();
            parts
        };
        let text = std::fs::read_to_string(&file).expect("read a source file");
        // A file's own `#[cfg(test)] mod tests` is test code: stop there.
        let body = text
            .split("#[cfg(test)]\nmod tests")
            .next()
            .unwrap_or(&text);
        // A module names its own submodules by their bare names.
        let children: Vec<&str> = body
            .lines()
            .filter_map(|line| {
                let line = code(line).trim();
                let line = line
                    .strip_prefix("pub(crate) ")
                    .or_else(|| line.strip_prefix("pub(super) "))
                    .or_else(|| line.strip_prefix("pub "))
                    .unwrap_or(line);
                line.strip_prefix("mod ")?.strip_suffix(';')
            })
            .collect();
        for (n, line) in body.lines().enumerate() {
            let line_code = code(line);
            // A name the crate root re-exports (`crate::Error`) is judged
            // as the module it comes from.
            let mut targets: Vec<String> = paths_after(line_code, "crate::")
                .into_iter()
                .map(|(first, second)| match exports.get(first) {
                    Some(home) => home.clone(),
                    None => target(first, second),
                })
                .collect();
            for child in &children {
                let named = format!("{child}::");
                let bare = paths_after(line_code, &named);
                let grouped = paths_after(line_code, "self::")
                    .into_iter()
                    .filter(|(first, _)| first == child);
                if !bare.is_empty() || grouped.count() > 0 {
                    targets.push(target(&module, Some(child)));
                }
            }
            for (first, second) in paths_after(line_code, "super::") {
                let mut path = parent.clone();
                path.push(first);
                let joined = path.join("::");
                let mut split = joined.splitn(2, "::");
                let (a, b) = (split.next().unwrap_or_default(), split.next());
                let named = match b {
                    Some(b) => target(a, Some(b)),
                    None => target(a, second),
                };
                targets.push(named);
            }
            for to in targets {
                if let Some(to_layer) = layer_of(&to)
                    && to_layer > from_layer
                {
                    edges.push(Upward {
                        file: file.clone(),
                        line: n + 1,
                        from: module.clone(),
                        to,
                    });
                }
            }
        }
    }
    edges
}

fn layer_name(module: &str) -> &'static str {
    layer_of(module).map_or("?", |i| LAYERS[i].0)
}

/// Groups edges by `(from, to)`, as [`KNOWN_UPWARD`] lists them: a `table::…`
/// module of the typed client counts as itself, a pattern's as itself.
fn pairs(edges: &[Upward]) -> BTreeSet<(String, String)> {
    edges
        .iter()
        .map(|e| (e.from.clone(), e.to.clone()))
        .collect()
}

/// The two crates the layers span: the core, then `tablekit`.
fn layered_roots() -> [PathBuf; 2] {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    [here.join("../tablekit-core/src"), here.join("src")]
}

#[test]
fn no_module_imports_a_higher_layer() {
    let edges: Vec<Upward> = layered_roots()
        .iter()
        .flat_map(|root| upward_edges(root))
        .collect();
    let known: BTreeSet<(String, String)> = KNOWN_UPWARD
        .iter()
        .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
        .collect();
    let new: Vec<String> = edges
        .iter()
        .filter(|e| !known.contains(&(e.from.clone(), e.to.clone())))
        .map(|e| {
            format!(
                "{}:{}: `{}` ({}) imports `{}` ({}), a higher layer",
                e.file.display(),
                e.line,
                e.from,
                layer_name(&e.from),
                e.to,
                layer_name(&e.to)
            )
        })
        .collect();
    assert!(
        new.is_empty(),
        "imports that point up the layers (move the code, or the type it needs, to the right layer):\n{}",
        new.join("\n")
    );
    let present = pairs(&edges);
    let gone: Vec<_> = known.difference(&present).collect();
    assert!(
        gone.is_empty(),
        "these edges are gone: remove them from KNOWN_UPWARD: {gone:?}"
    );
}

/// The check itself: an upward import, plain, in a group or through a name
/// the crate root re-exports, is found with its file, line and layers; a
/// downward one is not.
#[test]
fn the_check_finds_an_upward_import() {
    let dir = std::env::temp_dir().join(format!("tablekit-layers-{}", std::process::id()));
    let src = dir.join("src");
    std::fs::create_dir_all(src.join("table")).expect("make a tree");
    std::fs::write(
        src.join("value.rs"),
        "use crate::datetime::DateTime;\nuse crate::{error::Error, index::IndexDef};\nfn g(r: crate::IndexReader) {}\nfn h(e: crate::Error) {}\n",
    )
    .expect("write");
    std::fs::write(
        src.join("lib.rs"),
        "pub use error::Error;\npub use index::{\n    IndexPage, IndexReader,\n};\n",
    )
    .expect("write");
    std::fs::write(
        src.join("table").join("plan.rs"),
        "use super::{Table, wide};\n// use crate::upkeep::Upkeep;\nfn f() { crate::schema::x(); }\n",
    )
    .expect("write");
    let edges = upward_edges(&src);
    let found: Vec<(String, usize, String)> = edges
        .iter()
        .map(|e| {
            (
                e.file.file_name().unwrap().to_string_lossy().into_owned(),
                e.line,
                e.to.clone(),
            )
        })
        .collect();
    assert_eq!(
        found,
        [
            ("plan.rs".to_owned(), 1, "table::wide".to_owned()),
            ("value.rs".to_owned(), 2, "index".to_owned()),
            ("value.rs".to_owned(), 3, "index".to_owned()),
        ]
    );
    std::fs::remove_dir_all(&dir).expect("clean up");
}

/// The paths that follow `prefix` in `text`, each as its segments: a plain
/// path (`crate::filter::parse::parse`), or one per entry of a `{…}` group,
/// nested groups included.
fn full_paths(text: &str, prefix: &str) -> Vec<Vec<String>> {
    /// The paths of `text`, which starts right after a `::`.
    fn expand(text: &str, base: &[String], out: &mut Vec<Vec<String>>) {
        let mut segments = base.to_vec();
        let mut rest = text.trim_start();
        loop {
            if let Some(group) = rest.strip_prefix('{') {
                let mut depth = 0;
                let mut start = 0;
                for (i, c) in group.char_indices() {
                    match c {
                        '{' => depth += 1,
                        '}' if depth == 0 => {
                            expand(&group[start..i], &segments, out);
                            return;
                        }
                        '}' => depth -= 1,
                        ',' if depth == 0 => {
                            expand(&group[start..i], &segments, out);
                            start = i + 1;
                        }
                        _ => {}
                    }
                }
                return;
            }
            let Some(name) = identifier(rest) else { break };
            segments.push(name.to_owned());
            match rest[name.len()..].strip_prefix("::") {
                Some(more) => rest = more.trim_start(),
                None => break,
            }
        }
        if segments.len() > base.len() {
            out.push(segments);
        }
    }
    let mut found = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find(prefix) {
        let before = &rest[..at];
        rest = &rest[at + prefix.len()..];
        if before.ends_with(|c: char| c.is_ascii_alphanumeric() || c == '_') {
            continue;
        }
        expand(rest, &[], &mut found);
    }
    found
}

/// The file under `root` that holds the module path `segments` (relative
/// to the crate): the longest prefix of it that is a file. `None` for the
/// crate root's own items and re-exports.
fn file_of(root: &Path, segments: &[String]) -> Option<PathBuf> {
    (1..=segments.len()).rev().find_map(|n| {
        let base = segments[..n].join("/");
        [format!("{base}.rs"), format!("{base}/mod.rs")]
            .into_iter()
            .map(PathBuf::from)
            .find(|candidate| root.join(candidate).is_file())
    })
}

/// The imports between the files under `root`, as `(from, to)` file pairs
/// relative to it. An import of the crate root (`crate::Error`, a
/// re-export) or of one of the file's own enclosing modules (`super::…`,
/// which every submodule may use) is left out: those are not cycles of
/// files, but how modules nest.
fn file_edges(root: &Path) -> BTreeSet<(PathBuf, PathBuf)> {
    let files = rust_files(root);
    let mut edges = BTreeSet::new();
    for file in files {
        let relative = file
            .strip_prefix(root)
            .expect("under the root")
            .to_path_buf();
        if relative.file_name().is_some_and(|n| n == "tests.rs") {
            continue;
        }
        let module: Vec<String> = module_of(&relative)
            .split("::")
            .map(str::to_owned)
            .collect();
        let text = std::fs::read_to_string(&file).expect("read a source file");
        let body = text
            .split("#[cfg(test)]\nmod tests")
            .next()
            .unwrap_or(&text);
        let code: String = body.lines().map(|l| code(l).to_owned() + "\n").collect();
        let mut paths: Vec<Vec<String>> = full_paths(&code, "crate::");
        let parent = &module[..module.len().saturating_sub(1)];
        for path in full_paths(&code, "super::") {
            paths.push(parent.iter().cloned().chain(path).collect());
        }
        for path in full_paths(&code, "self::") {
            paths.push(module.iter().cloned().chain(path).collect());
        }
        for path in paths {
            let Some(to) = file_of(root, &path) else {
                continue;
            };
            let to_module: Vec<String> = module_of(&to).split("::").map(str::to_owned).collect();
            let encloses = module.starts_with(&to_module);
            if to != relative && !encloses {
                edges.insert((relative.clone(), to));
            }
        }
    }
    edges
}

/// The cycles of `edges`, each as the files along it (one per cycle found
/// by a depth-first walk).
fn file_cycles(edges: &BTreeSet<(PathBuf, PathBuf)>) -> Vec<Vec<PathBuf>> {
    use std::collections::BTreeMap;
    let mut next: BTreeMap<&PathBuf, Vec<&PathBuf>> = BTreeMap::new();
    for (from, to) in edges {
        next.entry(from).or_default().push(to);
    }
    // 0: not seen; 1: on the walk's path; 2: done.
    let mut state: BTreeMap<&PathBuf, u8> = BTreeMap::new();
    let mut cycles = Vec::new();
    fn walk<'a>(
        at: &'a PathBuf,
        next: &BTreeMap<&'a PathBuf, Vec<&'a PathBuf>>,
        state: &mut BTreeMap<&'a PathBuf, u8>,
        path: &mut Vec<&'a PathBuf>,
        cycles: &mut Vec<Vec<PathBuf>>,
    ) {
        state.insert(at, 1);
        path.push(at);
        for &to in next.get(at).map(Vec::as_slice).unwrap_or_default() {
            match state.get(to).copied().unwrap_or(0) {
                0 => walk(to, next, state, path, cycles),
                1 => {
                    let start = path.iter().position(|p| *p == to).unwrap_or(0);
                    cycles.push(path[start..].iter().map(|p| (*p).clone()).collect());
                }
                _ => {}
            }
        }
        path.pop();
        state.insert(at, 2);
    }
    let starts: Vec<&PathBuf> = next.keys().copied().collect();
    for start in starts {
        if state.get(start).copied().unwrap_or(0) == 0 {
            walk(start, &next, &mut state, &mut Vec::new(), &mut cycles);
        }
    }
    cycles
}

/// No cycle of imports between the files of `tablekit/src` (the module
/// check sees modules, and a module inlined in a file, such as the limits
/// once were in `validate.rs`, hid one from it).
#[test]
fn no_file_imports_itself_round_a_cycle() {
    let mut cycles = Vec::new();
    let mut read = 0;
    for root in library_roots() {
        let edges = file_edges(&root);
        read += edges.len();
        cycles.extend(
            file_cycles(&edges)
                .into_iter()
                .map(|c| c.into_iter().map(|p| root.join(p)).collect::<Vec<_>>()),
        );
    }
    assert!(read > 300, "the check reads the imports: {read}");
    assert!(
        cycles.is_empty(),
        "files that import each other round a cycle:\n{}",
        cycles
            .iter()
            .map(|c| c
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(" -> "))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// The file check itself: the cycle the module check missed is found
/// (`filter/mod.rs` uses `parse.rs`, which uses an inline module of
/// `validate.rs`, which uses `filter`), and a submodule's use of its parent
/// is not a cycle.
#[test]
fn the_file_check_finds_a_cycle_through_an_inline_module() {
    let dir = std::env::temp_dir().join(format!("tablekit-files-{}", std::process::id()));
    let src = dir.join("src");
    std::fs::create_dir_all(src.join("filter")).expect("make a tree");
    let write = |path: &str, text: &str| std::fs::write(src.join(path), text).expect("write");
    write(
        "lib.rs",
        "pub mod filter;\npub mod validate;\npub use filter::Filter;\n",
    );
    write(
        "filter/mod.rs",
        "mod parse;\npub struct Filter;\nfn f() { parse::parse(); }\nuse self::parse::parse;\n",
    );
    write(
        "filter/parse.rs",
        "use super::Filter;\nuse crate::{Filter as F, validate::limits::MAX_DEPTH};\n",
    );
    write(
        "validate.rs",
        "use crate::filter::Filter;\npub mod limits { pub const MAX_DEPTH: usize = 64; }\n",
    );
    let cycles = file_cycles(&file_edges(&src));
    let named: Vec<Vec<String>> = cycles
        .iter()
        .map(|c| c.iter().map(|p| p.display().to_string()).collect())
        .collect();
    assert_eq!(
        named,
        [["filter/mod.rs", "filter/parse.rs", "validate.rs"]],
        "{named:?}"
    );
    // The limits in a file of their own: no cycle.
    std::fs::create_dir_all(src.join("validate")).expect("make a tree");
    std::fs::remove_file(src.join("validate.rs")).expect("move");
    write(
        "validate/mod.rs",
        "use crate::filter::Filter;\npub mod limits;\n",
    );
    write("validate/limits.rs", "pub const MAX_DEPTH: usize = 64;\n");
    assert!(file_cycles(&file_edges(&src)).is_empty());
    std::fs::remove_dir_all(&dir).expect("clean up");
}

/// The names the crate root re-exports (`pub use module::{A, B};`), each
/// with its home module.
fn root_reexports(lib: &str) -> Vec<(String, String)> {
    let mut found = Vec::new();
    let mut rest = lib;
    while let Some(at) = rest.find("\npub use ") {
        rest = &rest[at + "\npub use ".len()..];
        let end = rest.find(';').unwrap_or(rest.len());
        let statement: String = rest[..end].split_whitespace().collect();
        let Some((module, names)) = statement.split_once("::") else {
            continue;
        };
        // Other crates' items (`uuid`, the derive's macros) are not homes here.
        if module == "uuid" || module.starts_with("tablekit_") {
            continue;
        }
        let names = names.trim_start_matches('{').trim_end_matches('}');
        for name in names.split(',').filter(|n| !n.is_empty()) {
            found.push((module.to_owned(), name.to_owned()));
        }
    }
    found
}

/// Inside the crate, a name is imported from its home module, never through
/// the crate root's re-exports: the layer check judges the edge only when
/// it sees where the name lives.
#[test]
fn imports_name_the_home_module() {
    let mut found = Vec::new();
    for root in layered_roots() {
        found.extend(imports_through_the_root(&root));
    }
    found.sort();
    assert!(
        found.is_empty(),
        "imports through the crate root:\n{}",
        found.join("\n")
    );
}

/// The imports of the files under `root` that name an item through the
/// crate root's re-exports.
fn imports_through_the_root(root: &Path) -> Vec<String> {
    let lib = std::fs::read_to_string(root.join("lib.rs")).expect("read lib.rs");
    let names = root_reexports(&lib);
    assert!(
        names.len() > 20,
        "the check reads the re-exports: {names:?}"
    );
    let mut found = Vec::new();
    for path in rust_files(root) {
        let relative = path.strip_prefix(root).expect("under the root");
        if ["lib.rs", "private.rs", "hooks.rs"]
            .iter()
            .any(|n| relative == Path::new(n))
        {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("read a source file");
        for (n, line) in text.lines().enumerate() {
            for path in full_paths(code(line), "crate::") {
                if let Some((home, name)) = names.iter().find(|(_, name)| path[0] == *name) {
                    found.push(format!(
                        "{}:{}: `crate::{name}` (import it from `crate::{home}`)",
                        relative.display(),
                        n + 1
                    ));
                }
            }
        }
    }
    found
}

/// The library crates of the workspace, in dependency order: each may
/// depend (for its build, not its tests) on the crates listed for it and
/// nothing else of the workspace.
const CRATES: &[(&str, &[&str])] = &[
    ("tablekit-derive", &[]),
    ("tablekit-core", &[]),
    ("tablekit-encrypt", &["tablekit-core"]),
    (
        "tablekit",
        &["tablekit-core", "tablekit-derive", "tablekit-encrypt"],
    ),
    ("tablekit-mem", &["tablekit-core"]),
    ("tablekit-local", &["tablekit-core"]),
    ("tablekit-azure", &["tablekit-core"]),
    (
        "tablekit-stores",
        &[
            "tablekit-core",
            "tablekit-mem",
            "tablekit-local",
            "tablekit-azure",
        ],
    ),
    ("tablekit-conformance", &["tablekit", "tablekit-core"]),
    // The program checks a local store's files itself (`tablekit check`).
    (
        "tablekit-cli",
        &[
            "tablekit",
            "tablekit-core",
            "tablekit-stores",
            "tablekit-local",
        ],
    ),
];

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The `src` folder of every library crate.
fn library_roots() -> Vec<PathBuf> {
    CRATES
        .iter()
        .map(|(name, _)| workspace().join(name).join("src"))
        .collect()
}

/// `line` with its strings, characters and comments taken out;
/// `in_block` carries a block comment over from one line to the next.
fn strip_line(line: &str, in_block: &mut bool) -> String {
    let chars: Vec<char> = line.chars().collect();
    let mut out = String::new();
    let mut i = 0;
    while i < chars.len() {
        let rest = &chars[i..];
        if *in_block {
            match (0..rest.len().saturating_sub(1)).find(|&j| rest[j] == '*' && rest[j + 1] == '/')
            {
                Some(j) => {
                    *in_block = false;
                    i += j + 2;
                    continue;
                }
                None => break,
            }
        }
        match rest {
            ['/', '/', ..] => break,
            ['/', '*', ..] => {
                *in_block = true;
                i += 2;
            }
            ['r', '#', ..] | ['r', '"', ..] => {
                let hashes = rest[1..].iter().take_while(|c| **c == '#').count();
                if rest.get(1 + hashes) != Some(&'"') {
                    out.push('r');
                    i += 1;
                    continue;
                }
                let start = i + 2 + hashes;
                let end = (start..chars.len()).find(|&j| {
                    chars[j] == '"'
                        && chars[j + 1..].iter().take_while(|c| **c == '#').count() >= hashes
                });
                i = end.map_or(chars.len(), |j| j + 1 + hashes);
            }
            ['"', ..] => {
                let mut j = i + 1;
                while j < chars.len() && chars[j] != '"' {
                    j += if chars[j] == '\\' { 2 } else { 1 };
                }
                i = j + 1;
            }
            ['\'', '\\', _, '\'', ..] => i += 4,
            ['\'', c, '\'', ..] if *c != '\\' => i += 3,
            [c, ..] => {
                out.push(*c);
                i += 1;
            }
            [] => break,
        }
    }
    out
}

/// The name of the function a code line starts, if it starts one.
fn function_name(code: &str) -> Option<&str> {
    let mut rest = code.trim_start();
    for prefix in ["pub(crate) ", "pub(super) ", "pub "] {
        rest = rest.strip_prefix(prefix).unwrap_or(rest);
    }
    if rest.starts_with("pub(in ") {
        rest = rest.split_once(") ")?.1;
    }
    for qualifier in ["default ", "const ", "async ", "unsafe ", "extern \"C\" "] {
        rest = rest.strip_prefix(qualifier).unwrap_or(rest);
    }
    identifier(rest.strip_prefix("fn ")?)
}

/// Where the item that starts at line `at` of `code` ends: at its closing
/// brace, or at its `;` if it has no body. `None` when it opens no body.
fn item_end(code: &[String], at: usize) -> (usize, bool) {
    let (mut depth, mut opened) = (0i64, false);
    for (j, line) in code.iter().enumerate().skip(at) {
        depth += line.matches('{').count() as i64 - line.matches('}').count() as i64;
        opened |= line.contains('{');
        if opened && depth <= 0 {
            return (j, true);
        }
        if !opened && line.trim_end().ends_with(';') {
            return (j, false);
        }
    }
    (code.len().saturating_sub(1), opened)
}

/// The code lines of `text`, with strings, characters and comments taken
/// out, and whether each is test code (in an item under `#[cfg(test)]`).
fn library_code(text: &str) -> (Vec<String>, Vec<bool>) {
    let mut in_block = false;
    let code: Vec<String> = text
        .lines()
        .map(|line| strip_line(line, &mut in_block))
        .collect();
    let mut test = vec![false; code.len()];
    let mut i = 0;
    while i < code.len() {
        if code[i].trim_start().starts_with("#[cfg(test)]") {
            let end = item_end(&code, i + 1).0.min(code.len() - 1);
            test[i..=end].fill(true);
            i = end + 1;
            continue;
        }
        i += 1;
    }
    (code, test)
}

/// The functions of `text` longer than `limit` lines, from the signature's
/// line to the closing brace, as `(line, name, lines)`. Test code (an item
/// under `#[cfg(test)]`) is left out.
fn long_functions(text: &str, limit: usize) -> Vec<(usize, String, usize)> {
    let (code, test) = library_code(text);
    let mut found = Vec::new();
    let mut i = 0;
    while i < code.len() {
        if test[i] {
            i += 1;
            continue;
        }
        if let Some(name) = function_name(&code[i]) {
            let (end, body) = item_end(&code, i);
            let lines = end - i + 1;
            if body && lines > limit {
                found.push((i + 1, name.to_owned(), lines));
            }
        }
        i += 1;
    }
    found
}

/// A file that holds only tests: `tests.rs`, or one under a `tests/` folder.
fn test_only(relative: &Path) -> bool {
    relative.file_name().is_some_and(|n| n == "tests.rs")
        || relative.components().any(|c| c.as_os_str() == "tests")
}

#[test]
fn no_library_function_is_over_100_lines() {
    let mut found = Vec::new();
    let mut read = 0;
    for root in library_roots() {
        for file in rust_files(&root) {
            if test_only(file.strip_prefix(&root).expect("under the root")) {
                continue;
            }
            let text = std::fs::read_to_string(&file).expect("read a source file");
            read += 1;
            for (line, name, lines) in long_functions(&text, 100) {
                found.push(format!(
                    "{}:{line}: `{name}` is {lines} lines",
                    file.display()
                ));
            }
        }
    }
    assert!(read > 150, "the check reads the files: {read}");
    assert!(
        found.is_empty(),
        "functions over 100 lines (split them into steps that have names):\n{}",
        found.join("\n")
    );
}

/// The length check itself: a long function is found, with its name and
/// length; braces in strings and comments, a function under
/// `#[cfg(test)]`, and a signature without a body are not counted.
#[test]
fn the_length_check_finds_a_long_function() {
    let body = "    let x = 1;\n".repeat(101);
    let text = format!(
        "fn short() {{ \"}}}}\"; }} // {{\n\
         /* {{ */ pub(crate) async fn long(a: u8) {{\n{body}}}\n\
         #[cfg(test)]\nmod tests {{\n    fn also_long() {{\n{body}    }}\n}}\n\
         trait T {{ fn declared(&self); }}\n\
         fn r() {{ let s = r#\"{{\"#; let c = '{{'; }}\n"
    );
    assert_eq!(long_functions(&text, 100), [(2, "long".to_owned(), 103)]);
    assert!(long_functions(&text, 103).is_empty());
}

#[test]
fn no_library_file_is_over_1000_lines() {
    let mut found = Vec::new();
    let mut read = 0;
    for root in library_roots() {
        for file in rust_files(&root) {
            if test_only(file.strip_prefix(&root).expect("under the root")) {
                continue;
            }
            let lines = std::fs::read_to_string(&file)
                .expect("read a source file")
                .lines()
                .count();
            read += lines;
            if lines > 1000 {
                found.push(format!("{}: {lines} lines", file.display()));
            }
        }
    }
    assert!(read > 50_000, "the check reads the files: {read} lines");
    assert!(
        found.is_empty(),
        "files over 1,000 lines (split them by what their parts do):\n{}",
        found.join("\n")
    );
}

/// The workspace crates a crate's manifest names under `[dependencies]`
/// (its build, not its tests or benches).
fn build_dependencies(manifest: &str) -> BTreeSet<String> {
    let mut section = "";
    let mut found = BTreeSet::new();
    for line in manifest.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            section = line;
            continue;
        }
        if section != "[dependencies]" {
            continue;
        }
        let name = line
            .split(['=', '.', ' '])
            .next()
            .unwrap_or_default()
            .trim();
        if name.starts_with("tablekit") {
            found.insert(name.to_owned());
        }
    }
    found
}

#[test]
fn crates_depend_only_down() {
    let mut found = Vec::new();
    for (name, allowed) in CRATES {
        let manifest = std::fs::read_to_string(workspace().join(name).join("Cargo.toml"))
            .expect("read a manifest");
        for dependency in build_dependencies(&manifest) {
            if !allowed.contains(&dependency.as_str()) {
                found.push(format!("{name} depends on {dependency}"));
            }
        }
    }
    assert!(
        found.is_empty(),
        "crates that depend up or across (see CRATES and ARCHITECTURE.md):\n{}",
        found.join("\n")
    );
    // The check reads a manifest as cargo does: the build's section only.
    let manifest = "[package]\nname = \"x\"\n[dependencies]\ntablekit-core.workspace = true\n\
                    tablekit = { path = \"../tablekit\" }\nserde = \"1\"\n\
                    [dev-dependencies]\ntablekit-mem = { path = \"../tablekit-mem\" }\n";
    assert_eq!(
        build_dependencies(manifest),
        BTreeSet::from(["tablekit".to_owned(), "tablekit-core".to_owned()])
    );
}

/// The backend crates, whose stores stand behind the core's `Served` layer.
const BACKENDS: &[&str] = &["tablekit-mem", "tablekit-local", "tablekit-azure"];

/// What a backend must not write by hand: the door checks and the
/// telemetry of a call are the `Served` layer's.
const SERVED_ONLY: &[&str] = &["door::", "checks::", "Call::storage", "telemetry::Call"];

/// Where `text` (a backend's source file) makes a check or records a call
/// by hand, or implements a contract itself: a backend implements its raw
/// contracts (`RawTables`, …), and `serve!` implements the contracts.
fn served_by_hand(text: &str) -> Vec<(usize, String)> {
    let mut in_block = false;
    let mut found = Vec::new();
    for (number, line) in text.lines().enumerate() {
        let code = strip_line(line, &mut in_block);
        for call in SERVED_ONLY {
            if code.contains(call) {
                found.push((number + 1, (*call).to_owned()));
            }
        }
        for contract in ["TableBackend", "BlobStore", "QueueStore"] {
            if let Some(at) = code.find(&format!("impl {contract} for ")) {
                found.push((number + 1, code[at..].trim().to_owned()));
            }
        }
    }
    found
}

#[test]
fn no_backend_checks_or_records_a_call_by_hand() {
    let mut found = Vec::new();
    let mut served = 0;
    for name in BACKENDS {
        let root = workspace().join(name).join("src");
        for file in rust_files(&root) {
            let text = std::fs::read_to_string(&file).expect("read a source file");
            // `serve!(Raw for X, info: …, contracts: [A, B])`.
            for serve in text.split("tablekit_core::serve!(").skip(1) {
                let list = serve.split("contracts: [").nth(1).unwrap_or("");
                let list = list.split(']').next().unwrap_or("");
                served += list.split(',').filter(|c| !c.trim().is_empty()).count();
            }
            for (line, what) in served_by_hand(&text) {
                found.push(format!("{}:{line}: {what}", file.display()));
            }
        }
    }
    assert!(
        found.is_empty(),
        "checks or telemetry written by hand in a backend (the Served layer makes them):\n{}",
        found.join("\n")
    );
    // Each backend serves its three contracts (the memory store's blob and
    // queue stores are types of their own).
    assert_eq!(served, 9, "the contracts the backends serve");
}

/// The check itself: a door check, a telemetry call and a contract
/// implemented by hand are found; the same words in a comment or a string,
/// and a raw contract's implementation, are not.
#[test]
fn the_served_check_finds_a_check_by_hand() {
    let text = "fn f() { door::get_entity(t, p, r, o)?; }\n\
                // Call::storage in a comment\n\
                let s = \"checks::query\";\n\
                impl TableBackend for MemBackend {\n\
                impl tablekit_core::layer::RawBlobs for LocalStorage {\n\
                impl RawQueues for MemQueueStore {\n\
                let c = tablekit_core::telemetry::Call::storage(info, op, t);\n";
    assert_eq!(
        served_by_hand(text),
        [
            (1, "door::".to_owned()),
            (4, "impl TableBackend for MemBackend {".to_owned()),
            (7, "Call::storage".to_owned()),
            (7, "telemetry::Call".to_owned()),
        ]
    );
}

/// The calls that send a write to the store.
const STORE_WRITES: &[&str] = &[
    ".submit_transaction(",
    ".write_entity(",
    ".insert_entity(",
    ".update_entity(",
    ".upsert_entity(",
    ".delete_entity(",
];

/// Where `text` (a source file of tablekit) sends a write to the store
/// itself, outside its tests.
fn store_writes(text: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    let (code, test) = library_code(text);
    for (i, code) in code.iter().enumerate().filter(|(i, _)| !test[*i]) {
        for call in STORE_WRITES {
            if code.contains(call) {
                found.push((i + 1, call.trim_matches(['.', '(']).to_owned()));
            }
        }
    }
    found
}

/// The typed layer and the patterns decide what to write; `exec.rs` alone
/// sends it to the store.
#[test]
fn only_the_executor_sends_writes_to_the_store() {
    let root = workspace().join("tablekit").join("src");
    let mut found = Vec::new();
    let mut senders = 0;
    for file in rust_files(&root) {
        let relative = file.strip_prefix(&root).expect("under the root");
        if test_only(relative) {
            continue;
        }
        let text = std::fs::read_to_string(&file).expect("read a source file");
        let writes = store_writes(&text);
        if relative == Path::new("exec.rs") {
            senders += writes.len();
            continue;
        }
        for (line, call) in writes {
            found.push(format!("{}:{line}: {call}", file.display()));
        }
    }
    assert!(
        found.is_empty(),
        "writes sent to the store outside `exec.rs` (hand them to it):\n{}",
        found.join("\n")
    );
    assert!(senders >= 2, "exec.rs sends the writes: {senders}");
}

/// The check itself: a write sent over several lines is found; the same
/// words in a comment, a string or a test module are not.
#[test]
fn the_executor_check_finds_a_write_sent_by_hand() {
    let text = "fn f() {\n\
                    backend\n\
                        .delete_entity(t, p, r, &IfMatch::Any)\n\
                        .await;\n\
                    // backend.insert_entity(t, &row)\n\
                    let s = \"x.upsert_entity(\";\n\
                }\n\
                #[cfg(test)]\n\
                mod tests {\n\
                    fn g() { backend.submit_transaction(t, &ops); }\n\
                }\n";
    assert_eq!(store_writes(text), [(3, "delete_entity".to_owned())]);
}
