//! The file-level import graph of `src/`, read as text for the layering and
//! circle checks: every `use` and every `crate::`, `super::` or `self::`
//! path (and a child module's bare path) in code, resolved to the file that
//! defines what it names. A path into a module's `pub use` is followed to
//! the file the name comes from. A module's descendants are part of it: its
//! `mod x;` declarations, re-exports and uses of them are not imports (a
//! child importing from its parent is).

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

/// One import: `from` uses something defined in `to` (files relative to
/// `src/`), first seen on `line` as `path`.
pub struct Import {
    pub from: String,
    pub to: String,
    pub line: usize,
    pub path: String,
}

/// Every import between two different files of `src/` (the crate root's
/// declarations and the binary's `main.rs` aside), one per pair of files.
pub fn imports(src: &Path) -> Vec<Import> {
    let files: Vec<String> = super::rust_files(src)
        .iter()
        .map(|f| f.strip_prefix(src).unwrap().to_string_lossy().into_owned())
        .filter(|f| f != "main.rs")
        .collect();
    let by_module: HashMap<Vec<String>, String> =
        files.iter().map(|f| (module_of(f), f.clone())).collect();
    let sources: Vec<Source> = files.iter().map(|f| Source::read(src, f)).collect();
    let graph = Graph {
        by_module,
        reexports: sources
            .iter()
            .map(|s| (s.file.clone(), s.reexports()))
            .collect(),
    };
    let mut found: BTreeMap<(String, String), Import> = BTreeMap::new();
    for source in &sources {
        for (path, position) in source.paths() {
            let Some(segments) = source.absolute(&path, position) else {
                continue;
            };
            let Some(to) = graph.file_of(&segments, 0) else {
                continue;
            };
            let own_descendant = module_of(&to).starts_with(&source.module)
                && module_of(&to).len() > source.module.len();
            if to == source.file || to == "lib.rs" || own_descendant {
                continue;
            }
            found
                .entry((source.file.clone(), to.clone()))
                .or_insert(Import {
                    from: source.file.clone(),
                    to,
                    line: source.line_of(position),
                    path: path.join("::"),
                });
        }
    }
    found.into_values().collect()
}

/// `agent/engine.rs` → `[agent, engine]`; `agent/mod.rs` → `[agent]`.
pub fn module_of(file: &str) -> Vec<String> {
    let mut parts: Vec<String> = file
        .trim_end_matches(".rs")
        .split('/')
        .map(str::to_owned)
        .collect();
    if matches!(parts.last().map(String::as_str), Some("mod" | "lib")) {
        parts.pop();
    }
    parts
}

struct Graph {
    by_module: HashMap<Vec<String>, String>,
    /// Per file, the names it re-exports and the absolute path of each.
    reexports: HashMap<String, HashMap<String, Vec<String>>>,
}

impl Graph {
    /// The file defining the absolute path: the longest prefix that is a
    /// module, through its re-exports when the next segment is one.
    fn file_of(&self, segments: &[String], depth: usize) -> Option<String> {
        let (length, file) = (0..=segments.len())
            .rev()
            .find_map(|n| self.by_module.get(&segments[..n]).map(|f| (n, f)))?;
        if depth < 8
            && let Some(name) = segments.get(length)
            && let Some(target) = self.reexports.get(file).and_then(|r| r.get(name))
        {
            let mut followed = target.clone();
            followed.extend_from_slice(&segments[length + 1..]);
            return self.file_of(&followed, depth + 1);
        }
        Some(file.clone())
    }
}

struct Source {
    file: String,
    module: Vec<String>,
    /// The text with comments and literals blanked (same length and lines).
    code: String,
    /// Byte ranges of inline modules (`mod tests { … }`).
    inline_modules: Vec<(usize, usize)>,
    /// `use` statements: (start, end, the tree after `use`, is `pub`).
    uses: Vec<(usize, usize, String, bool)>,
    /// Children of this module that exist as files.
    children: Vec<String>,
}

impl Source {
    fn read(src: &Path, file: &str) -> Source {
        let code = blank(&std::fs::read_to_string(src.join(file)).unwrap());
        let module = module_of(file);
        let dir = if file.ends_with("mod.rs") || file == "lib.rs" {
            Path::new(file).parent().unwrap().to_path_buf()
        } else {
            Path::new(file).with_extension("")
        };
        let children = std::fs::read_dir(src.join(&dir))
            .map(|entries| {
                entries
                    .filter_map(|e| {
                        let path = e.ok()?.path();
                        let name = path.file_stem()?.to_string_lossy().into_owned();
                        let is_module = path.is_dir() && path.join("mod.rs").exists()
                            || path.extension().is_some_and(|x| x == "rs") && name != "mod";
                        is_module.then_some(name)
                    })
                    .collect()
            })
            .unwrap_or_default();
        let inline_modules = inline_modules(&code);
        let uses = use_statements(&code);
        Source {
            file: file.to_owned(),
            module,
            code,
            inline_modules,
            uses,
            children,
        }
    }

    fn line_of(&self, position: usize) -> usize {
        self.code[..position].matches('\n').count() + 1
    }

    /// Every path in the file, with its position.
    fn paths(&self) -> Vec<(Vec<String>, usize)> {
        let mut paths = Vec::new();
        for (start, _, tree, _) in &self.uses {
            for mut path in expand(tree) {
                path.truncate(path.iter().position(|s| s == "as").unwrap_or(path.len()));
                paths.push((path, *start));
            }
        }
        let bytes = self.code.as_bytes();
        let mut uses = self.uses.iter().peekable();
        let mut i = 0;
        while i < bytes.len() {
            // The `use` statements were read above.
            if let Some((start, end, _, _)) = uses.peek()
                && i >= *start
            {
                i = i.max(*end);
                uses.next();
                continue;
            }
            let boundary = i == 0
                || !matches!(bytes[i - 1], b'_' | b':' | b'$' | b'.')
                    && !bytes[i - 1].is_ascii_alphanumeric();
            if !boundary || !is_ident_start(bytes[i]) {
                i += 1;
                continue;
            }
            let (path, end) = read_path(&self.code, i);
            let first = path[0].as_str();
            let relative = matches!(first, "crate" | "super" | "self")
                || self.children.iter().any(|c| c == first);
            if path.len() > 1 && relative {
                paths.push((path, i));
            }
            i = end.max(i + 1);
        }
        paths
    }

    /// The path as segments from the crate root, or `None` when it leaves
    /// the crate (another crate, `std`, a name brought in by a `use`).
    fn absolute(&self, path: &[String], position: usize) -> Option<Vec<String>> {
        let depth = self
            .inline_modules
            .iter()
            .filter(|(s, e)| (*s..*e).contains(&position))
            .count();
        let mut segments: Vec<String> = match path[0].as_str() {
            "crate" => path[1..].to_vec(),
            "super" | "self" => {
                let mut base = self.module.clone();
                let mut inline = depth;
                let mut rest = path;
                while let Some(first) = rest.first().filter(|s| *s == "super" || *s == "self") {
                    if first == "super" {
                        if inline > 0 {
                            inline -= 1;
                        } else {
                            base.pop()?;
                        }
                    }
                    rest = &rest[1..];
                }
                if inline > 0 {
                    return None; // inside this file's own inline module
                }
                base.extend_from_slice(rest);
                base
            }
            child if self.children.iter().any(|c| c == child) => {
                let mut base = self.module.clone();
                base.extend_from_slice(path);
                base
            }
            _ => return None,
        };
        while matches!(segments.last().map(String::as_str), Some("self" | "*")) {
            segments.pop();
        }
        Some(segments)
    }

    /// `pub use` names of this file and the absolute path of each.
    fn reexports(&self) -> HashMap<String, Vec<String>> {
        let mut names = HashMap::new();
        for (start, _, tree, public) in &self.uses {
            if !public {
                continue;
            }
            for path in expand(tree) {
                let (path, alias) = match path.iter().position(|s| s == "as") {
                    Some(n) => (path[..n].to_vec(), path.get(n + 1).cloned()),
                    None => (path.clone(), None),
                };
                let Some(name) = alias.or_else(|| path.last().cloned()) else {
                    continue;
                };
                if name == "*" || name == "self" {
                    continue;
                }
                if let Some(absolute) = self.absolute(&path, *start) {
                    names.insert(name, absolute);
                }
            }
        }
        names
    }
}

/// A use tree (`a::{b, c::{d as e, self}}`) as one segment list per leaf;
/// a rename stays as `[…, "as", alias]`.
fn expand(tree: &str) -> Vec<Vec<String>> {
    let tree = tree.trim();
    let Some(open) = tree.find('{') else {
        let (path, alias) = match tree.split_once(" as ") {
            Some((p, a)) => (p, Some(a.trim())),
            None => (tree, None),
        };
        let mut segments: Vec<String> = path
            .split("::")
            .map(|s| s.trim().to_owned())
            .filter(|s| !s.is_empty())
            .collect();
        if let Some(alias) = alias {
            segments.extend(["as".to_owned(), alias.to_owned()]);
        }
        return if segments.is_empty() {
            vec![]
        } else {
            vec![segments]
        };
    };
    let prefix = tree[..open].trim().trim_end_matches("::");
    let inner = &tree[open + 1..tree.rfind('}').unwrap()];
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0, 0);
    for (i, c) in inner.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&inner[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&inner[start..]);
    parts
        .into_iter()
        .filter(|p| !p.trim().is_empty())
        .flat_map(|part| {
            let joined = if prefix.is_empty() {
                part.trim().to_owned()
            } else {
                format!("{prefix}::{}", part.trim())
            };
            expand(&joined)
        })
        .collect()
}

fn is_ident_start(b: u8) -> bool {
    b == b'_' || b.is_ascii_alphabetic()
}

fn is_ident(b: u8) -> bool {
    b == b'_' || b.is_ascii_alphanumeric()
}

/// `a::b::c` from `start`: the segments and where the path ends (before a
/// turbofish, a brace or anything else).
fn read_path(code: &str, start: usize) -> (Vec<String>, usize) {
    let bytes = code.as_bytes();
    let mut segments = Vec::new();
    let mut i = start;
    loop {
        let begin = i;
        while i < bytes.len() && is_ident(bytes[i]) {
            i += 1;
        }
        segments.push(code[begin..i].to_owned());
        let next = code[i..].trim_start();
        let skipped = code.len() - i - next.len();
        if next.starts_with("::")
            && next[2..]
                .trim_start()
                .as_bytes()
                .first()
                .is_some_and(|b| is_ident_start(*b))
        {
            let after = &next[2..];
            i += skipped + 2 + (after.len() - after.trim_start().len());
        } else {
            return (segments, i);
        }
    }
}

/// `use` statements: where each starts and ends, its tree, whether it is
/// `pub` (any `pub(…)` too).
fn use_statements(code: &str) -> Vec<(usize, usize, String, bool)> {
    let bytes = code.as_bytes();
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(offset) = code[from..].find("use") {
        let at = from + offset;
        from = at + 3;
        let word = (at == 0 || !is_ident(bytes[at - 1]))
            && bytes.get(at + 3).is_some_and(|b| b.is_ascii_whitespace());
        if !word {
            continue;
        }
        let Some(end) = code[at..].find(';').map(|e| at + e) else {
            break;
        };
        let before = code[..at].trim_end();
        let public = before.ends_with("pub")
            || before.ends_with(')')
                && before
                    .rfind("pub(")
                    .is_some_and(|p| !before[p..].contains('\n'));
        let tree: String = code[at + 3..end]
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        found.push((at, end, tree, public));
        from = end;
    }
    found
}

/// Byte ranges of `mod name { … }` blocks.
fn inline_modules(code: &str) -> Vec<(usize, usize)> {
    let bytes = code.as_bytes();
    let mut ranges = Vec::new();
    let mut from = 0;
    while let Some(offset) = code[from..].find("mod ") {
        let at = from + offset;
        from = at + 4;
        if at > 0 && is_ident(bytes[at - 1]) {
            continue;
        }
        let rest = code[at + 4..].trim_start();
        let name_length = rest.bytes().take_while(|b| is_ident(*b)).count();
        if name_length == 0 || !rest[name_length..].trim_start().starts_with('{') {
            continue;
        }
        let open = at + code[at..].find('{').unwrap();
        let mut depth = 0;
        for (i, b) in bytes.iter().enumerate().skip(open) {
            match b {
                b'{' => depth += 1,
                b'}' => {
                    depth -= 1;
                    if depth == 0 {
                        ranges.push((open, i));
                        break;
                    }
                }
                _ => {}
            }
        }
    }
    ranges
}

/// The source with comments and the insides of string and character
/// literals replaced by spaces (newlines kept), so that braces, `use` and
/// `crate::` are only found in code.
fn blank(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let blank_until = |out: &mut String, from: usize, to: usize| {
        for c in &chars[from..to.min(chars.len())] {
            out.push(if *c == '\n' { '\n' } else { ' ' });
        }
    };
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        let ident_before = i > 0 && (chars[i - 1].is_alphanumeric() || chars[i - 1] == '_');
        if c == '/' && next == Some('/') {
            let end = (i..chars.len())
                .find(|&j| chars[j] == '\n')
                .unwrap_or(chars.len());
            blank_until(&mut out, i, end);
            i = end;
        } else if c == '/' && next == Some('*') {
            let (mut depth, mut j) = (0, i);
            while j < chars.len() {
                if chars[j] == '/' && chars.get(j + 1) == Some(&'*') {
                    depth += 1;
                    j += 2;
                } else if chars[j] == '*' && chars.get(j + 1) == Some(&'/') {
                    depth -= 1;
                    j += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    j += 1;
                }
            }
            blank_until(&mut out, i, j);
            i = j;
        } else if !ident_before && (c == 'r' || c == 'b') && raw_string_at(&chars, i).is_some() {
            let end = raw_string_at(&chars, i).unwrap();
            blank_until(&mut out, i, end);
            i = end;
        } else if c == '"' {
            let mut j = i + 1;
            while j < chars.len() && chars[j] != '"' {
                j += if chars[j] == '\\' { 2 } else { 1 };
            }
            blank_until(&mut out, i, j + 1);
            i = j + 1;
        } else if c == '\'' && next == Some('\\') {
            let mut j = i + 2;
            while j < chars.len() && chars[j] != '\'' {
                j += 1;
            }
            blank_until(&mut out, i, j + 1);
            i = j + 1;
        } else if c == '\'' && chars.get(i + 2) == Some(&'\'') {
            blank_until(&mut out, i, i + 3);
            i += 3;
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

/// The end of a raw (byte) string starting at `i` (`r"…"`, `r#"…"#`,
/// `br"…"`), if one starts there.
fn raw_string_at(chars: &[char], i: usize) -> Option<usize> {
    let mut j = i;
    if chars[j] == 'b' {
        j += 1;
    }
    if chars.get(j) != Some(&'r') {
        return None;
    }
    j += 1;
    let hashes = chars[j..].iter().take_while(|c| **c == '#').count();
    j += hashes;
    if chars.get(j) != Some(&'"') {
        return None;
    }
    j += 1;
    while j < chars.len() {
        if chars[j] == '"' && chars[j + 1..].iter().take(hashes).all(|c| *c == '#') {
            return Some(j + 1 + hashes);
        }
        j += 1;
    }
    Some(chars.len())
}
