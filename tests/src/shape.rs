//! The shape of the production code: lines per file and per function.
//!
//! The architecture keeps production files at most [`MAX_FILE_LINES`] lines
//! and functions at most [`MAX_FN_LINES`] (unit tests excepted: a file's
//! `#[cfg(test)]` module, which stands at its end, and `tests.rs` files).
//! The `shape` test holds the code to it; `cargo run -p jobworker-tests
//! --bin shape` prints the largest files and functions.

use std::fs;
use std::path::{Path, PathBuf};

/// Most lines of a production source file.
pub const MAX_FILE_LINES: usize = 400;
/// Most lines of one function.
pub const MAX_FN_LINES: usize = 80;
/// The production source trees, relative to the workspace.
pub const TREES: &[&str] = &["runtime/src", "macros/src", "worker-bin/src"];

/// One measured file or function.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Size {
    /// `path` (a file) or `path:name` (a function).
    pub name: String,
    /// Its production lines.
    pub lines: usize,
}

/// Production line counts of every file and function under [`TREES`],
/// largest first.
pub fn measure(workspace: &Path) -> (Vec<Size>, Vec<Size>) {
    let mut files = Vec::new();
    let mut fns = Vec::new();
    for tree in TREES {
        for path in rust_files(&workspace.join(tree)) {
            if path.file_name().is_some_and(|n| n == "tests.rs") {
                continue;
            }
            let text = fs::read_to_string(&path).expect("read a source file");
            let shown = path
                .strip_prefix(workspace)
                .unwrap_or(&path)
                .display()
                .to_string();
            let lines = production_lines(&text);
            files.push(Size {
                name: shown.clone(),
                lines: lines.len(),
            });
            fns.extend(functions(&lines).into_iter().map(|(name, n)| Size {
                name: format!("{shown}:{name}"),
                lines: n,
            }));
        }
    }
    files.sort_by(|a, b| b.lines.cmp(&a.lines).then(a.name.cmp(&b.name)));
    fns.sort_by(|a, b| b.lines.cmp(&a.lines).then(a.name.cmp(&b.name)));
    (files, fns)
}

fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let entries = fs::read_dir(dir).unwrap_or_else(|e| panic!("read {}: {e}", dir.display()));
    for entry in entries {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            out.extend(rust_files(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    out
}

/// The lines before the file's unit-test module (`#[cfg(test)]`, or a
/// `cfg` that needs `test` and a feature, on a top-level `mod`).
fn production_lines(text: &str) -> Vec<&str> {
    let lines: Vec<&str> = text.lines().collect();
    let is_test_cfg = |line: &str| {
        let line = line.trim();
        line == "#[cfg(test)]" || (line.starts_with("#[cfg(all(test,") && line.ends_with(")]"))
    };
    let end = lines
        .windows(2)
        .position(|w| is_test_cfg(w[0]) && w[1].starts_with("mod "))
        .unwrap_or(lines.len());
    lines[..end].to_vec()
}

/// Each function's name and length, from its `fn` line to its closing
/// brace (braces in strings, chars and comments are not counted).
fn functions(lines: &[&str]) -> Vec<(String, usize)> {
    let mut out = Vec::new();
    for (start, line) in lines.iter().enumerate() {
        let Some(name) = fn_name(line) else { continue };
        let mut depth = 0i64;
        let mut opened = false;
        for (offset, body) in lines[start..].iter().enumerate() {
            for c in code_only(body).chars() {
                match c {
                    '{' => {
                        depth += 1;
                        opened = true;
                    }
                    '}' => depth -= 1,
                    ';' if !opened && depth == 0 => break,
                    _ => {}
                }
            }
            if opened && depth <= 0 {
                out.push((name.clone(), offset + 1));
                break;
            }
            if !opened && code_only(body).trim_end().ends_with(';') {
                break; // a declaration without a body
            }
        }
    }
    out
}

fn fn_name(line: &str) -> Option<String> {
    let code = code_only(line);
    let words: Vec<&str> = code.split_whitespace().collect();
    let at = words.iter().position(|w| *w == "fn")?;
    let before_ok = words[..at].iter().all(|w| {
        matches!(*w, "pub" | "async" | "const" | "unsafe" | "extern" | "\"C\"") || w.starts_with("pub(")
    });
    let name = words.get(at + 1)?;
    let name: String = name
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect();
    (before_ok && !name.is_empty()).then_some(name)
}

/// The line without string and char literals and `//` comments.
fn code_only(line: &str) -> String {
    let mut out = String::new();
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' => {
                while let Some(s) = chars.next() {
                    match s {
                        '\\' => {
                            chars.next();
                        }
                        '"' => break,
                        _ => {}
                    }
                }
            }
            '\'' => {
                // A char literal ('x', '\n', '{'), not a lifetime ('a).
                let rest: String = chars.clone().take(3).collect();
                if rest.starts_with('\\') {
                    for s in chars.by_ref() {
                        if s == '\'' {
                            break;
                        }
                    }
                } else if rest.chars().nth(1) == Some('\'') {
                    chars.next();
                    chars.next();
                }
            }
            '/' if chars.peek() == Some(&'/') => break,
            _ => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn functions_are_measured_from_fn_to_closing_brace() {
        let text = "fn a() {\n    let s = \"}\";\n    let c = '{';\n}\n\npub async fn b(x: u8) -> u8\nwhere\n{\n    x\n}\nfn decl();\n";
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(functions(&lines), vec![("a".into(), 4), ("b".into(), 5)]);
    }

    #[test]
    fn the_unit_test_module_is_not_production() {
        let text = "fn a() {}\n#[cfg(test)]\nmod tests {\n    fn t() {}\n}\n";
        assert_eq!(production_lines(text), vec!["fn a() {}"]);
        let gated = "fn a() {}\n#[cfg(all(test, feature = \"cron\"))]\nmod tests {}\n";
        assert_eq!(production_lines(gated), vec!["fn a() {}"]);
        let not_tests = "#[cfg(feature = \"cron\")]\nmod cron;\nfn a() {}\n";
        assert_eq!(production_lines(not_tests).len(), 3);
    }
}
