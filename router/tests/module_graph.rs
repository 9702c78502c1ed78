//! The router's module structure: no import cycle among the crate's top-level modules, nor among
//! the files of any directory module. Every `.rs` file under `src/` is read, comments and string
//! literals are stripped, and each path it names through `crate::`, `super::` or `self::`
//! (`use` groups included) is resolved to the module that holds it. The crate root (`lib.rs`),
//! which declares every module and holds the `Router`, and each directory's `mod.rs`, which
//! declares its files, take no part in the graphs they declare.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

type Module = Vec<String>;
type Graph = BTreeMap<String, BTreeSet<String>>;

/// Every `.rs` file under `dir`, sorted.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The module a file under `src` defines: `lib.rs` is the root (`[]`), `a/mod.rs` and `a.rs`
/// are `[a]`, `a/b.rs` is `[a, b]`.
fn module_of(src: &Path, file: &Path) -> Module {
    let relative = file.strip_prefix(src).unwrap();
    let mut parts: Module = relative
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    let last = parts.pop().unwrap();
    let stem = last.trim_end_matches(".rs");
    if stem != "mod" && !(parts.is_empty() && stem == "lib") {
        parts.push(stem.to_string());
    }
    parts
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The source without comments (nested block comments included), string literals (plain, byte
/// and raw) and character literals; each literal leaves an empty one behind. Lifetimes stay.
fn strip(source: &str) -> String {
    let chars: Vec<char> = source.chars().collect();
    let mut out = String::with_capacity(source.len());
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        let prev_ident = i > 0 && is_ident(chars[i - 1]);
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
            continue;
        }
        if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
            out.push(' ');
            continue;
        }
        // Raw strings: r"..", r#".."#, br"..", br#".."#.
        if !prev_ident && (c == 'r' || (c == 'b' && next == Some('r'))) {
            let mut j = if c == 'b' { i + 2 } else { i + 1 };
            let mut hashes = 0;
            while chars.get(j) == Some(&'#') {
                hashes += 1;
                j += 1;
            }
            if chars.get(j) == Some(&'"') {
                j += 1;
                loop {
                    if j >= chars.len() {
                        break;
                    }
                    if chars[j] == '"' && (1..=hashes).all(|k| chars.get(j + k) == Some(&'#')) {
                        j += 1 + hashes;
                        break;
                    }
                    j += 1;
                }
                out.push_str("\"\"");
                i = j;
                continue;
            }
        }
        if c == '"' {
            let mut j = i + 1;
            while j < chars.len() && chars[j] != '"' {
                j += if chars[j] == '\\' { 2 } else { 1 };
            }
            out.push_str("\"\"");
            i = j + 1;
            continue;
        }
        if c == '\'' {
            // A character literal ('a', '\n', '\u{1F600}', '\''), not a lifetime ('a).
            if next == Some('\\') {
                let mut j = i + 2;
                while j < chars.len() && chars[j] != '\'' {
                    j += 1;
                }
                out.push_str("' '");
                i = j + 1;
                continue;
            }
            if chars.get(i + 2) == Some(&'\'') {
                out.push_str("' '");
                i += 3;
                continue;
            }
        }
        out.push(c);
        i += 1;
    }
    out
}

/// Reads an identifier at `i` (after whitespace).
fn ident_at(chars: &[char], mut i: usize) -> Option<(String, usize)> {
    while i < chars.len() && chars[i].is_whitespace() {
        i += 1;
    }
    let start = i;
    while i < chars.len() && is_ident(chars[i]) {
        i += 1;
    }
    (i > start).then(|| (chars[start..i].iter().collect(), i))
}

/// Whether `::` follows at `i` (after whitespace); the index after it.
fn colons_at(chars: &[char], mut i: usize) -> Option<usize> {
    while i < chars.len() && chars[i].is_whitespace() {
        i += 1;
    }
    (chars.get(i) == Some(&':') && chars.get(i + 1) == Some(&':')).then_some(i + 2)
}

/// The paths of a path tail starting at `i` (just after a `::`): `a::b`, `{a, b::{c, d}}`, `*`.
/// Returns every path (as segments) and the index after the tail.
fn path_tail(chars: &[char], i: usize) -> (Vec<Vec<String>>, usize) {
    let mut j = i;
    while j < chars.len() && chars[j].is_whitespace() {
        j += 1;
    }
    if chars.get(j) == Some(&'{') {
        let mut paths = Vec::new();
        j += 1;
        loop {
            while j < chars.len() && (chars[j].is_whitespace() || chars[j] == ',') {
                j += 1;
            }
            if j >= chars.len() || chars[j] == '}' {
                return (paths, j + 1);
            }
            let (inner, end) = path_tail(chars, j);
            paths.extend(inner);
            // Skip `as name` and anything else up to the next item of the group.
            j = end;
            while j < chars.len() && chars[j] != ',' && chars[j] != '}' {
                j += 1;
            }
        }
    }
    let Some((name, end)) = ident_at(chars, j) else {
        // `*` or something that is not a path.
        return (vec![Vec::new()], j + 1);
    };
    match colons_at(chars, end) {
        Some(after) => {
            let (rest, end) = path_tail(chars, after);
            let paths = rest
                .into_iter()
                .map(|mut p| {
                    p.insert(0, name.clone());
                    p
                })
                .collect();
            (paths, end)
        }
        None => (vec![vec![name]], end),
    }
}

/// The module paths (absolute, as segments) a file of module `module` names. Inline modules
/// (`mod tests { .. }`) are tracked so that `super::` and `self::` inside them resolve right.
fn references(module: &Module, source: &str) -> Vec<Vec<String>> {
    let chars: Vec<char> = strip(source).chars().collect();
    let mut refs = Vec::new();
    // Inline modules open at each brace depth.
    let mut inline: Vec<(String, usize)> = Vec::new();
    let mut depth = 0usize;
    let mut pending_mod: Option<String> = None;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        match c {
            '{' => {
                depth += 1;
                if let Some(name) = pending_mod.take() {
                    inline.push((name, depth));
                }
                i += 1;
                continue;
            }
            '}' => {
                if inline.last().is_some_and(|(_, d)| *d == depth) {
                    inline.pop();
                }
                depth = depth.saturating_sub(1);
                i += 1;
                continue;
            }
            ';' => {
                pending_mod = None;
                i += 1;
                continue;
            }
            _ => {}
        }
        let boundary = i == 0 || !(is_ident(chars[i - 1]) || chars[i - 1] == '$');
        if !boundary || !is_ident(c) {
            i += 1;
            continue;
        }
        let (word, end) = ident_at(&chars, i).unwrap();
        if word == "mod" {
            if let Some((name, after)) = ident_at(&chars, end) {
                pending_mod = Some(name);
                i = after;
                continue;
            }
        }
        let preceded_by_colons = {
            let mut k = i;
            while k > 0 && chars[k - 1].is_whitespace() {
                k -= 1;
            }
            k >= 2 && chars[k - 1] == ':' && chars[k - 2] == ':'
        };
        if preceded_by_colons || !matches!(word.as_str(), "crate" | "super" | "self") {
            i = end;
            continue;
        }
        let Some(after) = colons_at(&chars, end) else {
            i = end;
            continue;
        };
        let mut here: Module = module.clone();
        here.extend(inline.iter().map(|(n, _)| n.clone()));
        let (tails, tail_end) = path_tail(&chars, after);
        for tail in tails {
            let mut base = match word.as_str() {
                "crate" => Vec::new(),
                "self" => here.clone(),
                _ => {
                    let mut b = here.clone();
                    b.pop();
                    b
                }
            };
            let mut tail = tail.into_iter().peekable();
            // Further `super::` segments climb further.
            while tail.peek().is_some_and(|s| s == "super") {
                tail.next();
                base.pop();
            }
            base.extend(tail);
            refs.push(base);
        }
        i = tail_end;
    }
    refs
}

/// The longest prefix of `path` that is a module of the crate.
fn resolve(modules: &BTreeSet<Module>, path: &[String]) -> Module {
    (0..=path.len())
        .rev()
        .map(|n| path[..n].to_vec())
        .find(|p| modules.contains(p))
        .unwrap_or_default()
}

/// A cycle of `graph`, as its nodes in order with the first repeated at the end.
fn find_cycle(graph: &Graph) -> Option<Vec<String>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        New,
        Open,
        Done,
    }
    fn visit(
        node: &str,
        graph: &Graph,
        marks: &mut BTreeMap<String, Mark>,
        stack: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        marks.insert(node.to_string(), Mark::Open);
        stack.push(node.to_string());
        for next in graph.get(node).into_iter().flatten() {
            match marks.get(next).copied().unwrap_or(Mark::New) {
                Mark::Open => {
                    let start = stack.iter().position(|n| n == next).unwrap();
                    let mut cycle = stack[start..].to_vec();
                    cycle.push(next.clone());
                    return Some(cycle);
                }
                Mark::New => {
                    if let Some(cycle) = visit(next, graph, marks, stack) {
                        return Some(cycle);
                    }
                }
                Mark::Done => {}
            }
        }
        stack.pop();
        marks.insert(node.to_string(), Mark::Done);
        None
    }
    let mut marks = BTreeMap::new();
    for node in graph.keys() {
        if marks.get(node).copied().unwrap_or(Mark::New) == Mark::New {
            let mut stack = Vec::new();
            if let Some(cycle) = visit(node, graph, &mut marks, &mut stack) {
                return Some(cycle);
            }
        }
    }
    None
}

/// Every file's module and the modules it references.
fn crate_references() -> (BTreeSet<Module>, Vec<(Module, BTreeSet<Module>)>) {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let modules: BTreeSet<Module> = files.iter().map(|f| module_of(&src, f)).collect();
    let edges = files
        .iter()
        .map(|file| {
            let module = module_of(&src, file);
            let source = std::fs::read_to_string(file).unwrap();
            let targets = references(&module, &source)
                .iter()
                .map(|path| resolve(&modules, path))
                .collect();
            (module, targets)
        })
        .collect();
    (modules, edges)
}

fn show(graph: &Graph) -> String {
    graph
        .iter()
        .map(|(from, to)| {
            format!(
                "  {from} -> {}",
                to.iter().cloned().collect::<Vec<_>>().join(", ")
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn top_level_modules_have_no_import_cycle() {
    let (_, edges) = crate_references();
    let mut graph = Graph::new();
    for (module, targets) in &edges {
        let Some(from) = module.first() else {
            continue; // the crate root
        };
        let entry = graph.entry(from.clone()).or_default();
        for target in targets {
            if let Some(to) = target.first()
                && to != from
            {
                entry.insert(to.clone());
            }
        }
    }
    if let Some(cycle) = find_cycle(&graph) {
        panic!(
            "import cycle among the router's top-level modules: {}\n{}",
            cycle.join(" -> "),
            show(&graph)
        );
    }
}

#[test]
fn files_of_each_directory_module_have_no_import_cycle() {
    let (modules, edges) = crate_references();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut dirs: Vec<Module> = Vec::new();
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    for file in &files {
        if file.file_name().is_some_and(|n| n == "mod.rs") {
            dirs.push(module_of(&src, file));
        }
    }
    assert!(!dirs.is_empty(), "no directory module found under {src:?}");
    for dir in dirs {
        let mut graph = Graph::new();
        for (module, targets) in &edges {
            // A child of `dir` (itself or something under it), not `dir`'s mod.rs.
            if module.len() <= dir.len() || !module.starts_with(&dir) {
                continue;
            }
            let from = &module[dir.len()];
            let entry = graph.entry(from.clone()).or_default();
            for target in targets {
                if target.len() > dir.len() && target.starts_with(&dir) {
                    let to = &target[dir.len()];
                    if to != from {
                        entry.insert(to.clone());
                    }
                }
            }
        }
        if let Some(cycle) = find_cycle(&graph) {
            panic!(
                "import cycle among the files of `crate::{}`: {}\n{}",
                dir.join("::"),
                cycle.join(" -> "),
                show(&graph)
            );
        }
    }
    // The scan saw the modules it checks.
    assert!(modules.contains(&vec!["tools".to_string(), "search".to_string()]));
}

#[test]
fn the_cycle_detector_finds_a_cycle() {
    let graph: Graph = [
        ("a", vec!["b"]),
        ("b", vec!["c", "d"]),
        ("c", vec![]),
        ("d", vec!["a"]),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.into_iter().map(str::to_string).collect()))
    .collect();
    assert_eq!(
        find_cycle(&graph).unwrap(),
        ["a", "b", "d", "a"].map(str::to_string)
    );
    let acyclic: Graph = [("a", vec!["b"]), ("b", vec!["c"]), ("c", vec![])]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.into_iter().map(str::to_string).collect()))
        .collect();
    assert_eq!(find_cycle(&acyclic), None);
}

#[test]
fn references_are_resolved_from_paths_groups_and_super() {
    let source = r##"
        //! [`crate::nowhere`] in a comment is no reference.
        use crate::{Router, tools::{api::Int, search}};
        use super::sibling::Thing;
        const TEXT: &str = "crate::also_nowhere";
        const RAW: &str = r#"crate::nor_here"#;
        fn f<'a>(x: &'a str) -> char { 'c' }
        mod tests {
            use super::*;
            use self::inner::X;
        }
    "##;
    let module = vec!["context".to_string(), "rest".to_string()];
    let refs = references(&module, source);
    let expected: Vec<Vec<String>> = vec![
        vec!["Router".into()],
        vec!["tools".into(), "api".into(), "Int".into()],
        vec!["tools".into(), "search".into()],
        vec!["context".into(), "sibling".into(), "Thing".into()],
        vec!["context".into(), "rest".into()],
        vec![
            "context".into(),
            "rest".into(),
            "tests".into(),
            "inner".into(),
            "X".into(),
        ],
    ];
    assert_eq!(refs, expected);
    let modules: BTreeSet<Module> = [
        vec![],
        vec!["tools".to_string()],
        vec!["tools".to_string(), "api".to_string()],
    ]
    .into_iter()
    .collect();
    assert_eq!(
        resolve(&modules, &["tools".into(), "api".into(), "Int".into()]),
        ["tools", "api"].map(str::to_string)
    );
    assert_eq!(resolve(&modules, &["Router".into()]), Vec::<String>::new());
}
