//! Every script composes, and every name it calls or every constant it
//! reads is a local defined before its first use: a missing include would
//! otherwise surface only when Redis runs that path ("attempt to access
//! nonexistent global"). Compiling in a real server (SCRIPT LOAD) is
//! `jobworker-tests`' `redis_scripts`.

use super::*;

/// Globals a script may call or read.
const BUILTINS: &[&str] = &[
    "tonumber", "tostring", "type", "pairs", "ipairs", "unpack", "error", "pcall", "select", "assert",
    "next", "KEYS", "ARGV",
];

const KEYWORDS: &[&str] = &[
    "and", "break", "do", "else", "elseif", "end", "false", "for", "function", "if", "in", "local", "nil",
    "not", "or", "repeat", "return", "then", "true", "until", "while",
];

/// An identifier of the code (comments and strings skipped): its text,
/// where it starts, and the significant characters around it.
struct Word<'a> {
    text: &'a str,
    at: usize,
    before: Option<u8>,
    after: Option<u8>,
}

fn words(src: &str) -> Vec<Word<'_>> {
    let b = src.as_bytes();
    let (mut i, mut out, mut last) = (0, Vec::new(), None);
    while i < b.len() {
        let c = b[i];
        if c == b'-' && b.get(i + 1) == Some(&b'-') {
            i = src[i..].find('\n').map_or(b.len(), |n| i + n);
        } else if c == b'\'' || c == b'"' {
            i += 1;
            while i < b.len() && b[i] != c {
                i += if b[i] == b'\\' { 2 } else { 1 };
            }
            i += 1;
            last = Some(c);
        } else if c.is_ascii_alphabetic() || c == b'_' {
            let start = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            let after = src[i..].bytes().find(|c| !c.is_ascii_whitespace());
            out.push(Word {
                text: &src[start..i],
                at: start,
                before: last,
                after,
            });
            last = Some(b'a');
        } else {
            if !c.is_ascii_whitespace() {
                last = Some(c);
            }
            i += 1;
        }
    }
    out
}

/// Names the text declares with `local` (`local function f`, `local a, b`),
/// with where each is declared.
fn declared(ws: &[Word<'_>]) -> Vec<(String, usize)> {
    let mut out = Vec::new();
    for (k, w) in ws.iter().enumerate() {
        if w.text != "local" {
            continue;
        }
        let mut j = k + 1;
        if ws.get(j).is_some_and(|w| w.text == "function") {
            j += 1;
        }
        while let Some(name) = ws.get(j) {
            out.push((name.text.to_owned(), name.at));
            if name.after != Some(b',') {
                break;
            }
            j += 1;
        }
    }
    out
}

/// Called names and constants of `src` not declared before their use.
fn undefined(src: &str) -> Vec<String> {
    let mut missing = undeclared(src);
    missing.sort();
    missing.dedup();
    missing
}

fn undeclared(src: &str) -> Vec<String> {
    let ws = words(src);
    let decl = declared(&ws);
    let mut missing = Vec::new();
    for (k, w) in ws.iter().enumerate() {
        let field = matches!(w.before, Some(b'.') | Some(b':'));
        let defining = k > 0 && ws[k - 1].text == "function";
        let called = w.after == Some(b'(') && !KEYWORDS.contains(&w.text);
        let constant = w.text.len() > 1
            && w.text
                .bytes()
                .all(|c| c.is_ascii_uppercase() || c == b'_' || c.is_ascii_digit());
        if field || defining || !(called || constant) || BUILTINS.contains(&w.text) {
            continue;
        }
        if !decl.iter().any(|(name, at)| name == w.text && *at <= w.at) {
            missing.push(w.text.to_owned());
        }
    }
    missing
}

#[test]
fn every_module_defines_what_it_uses() {
    for (name, text) in MODULES {
        // The queue keys are bound by each script that includes the module.
        let mut missing = undefined(&compose(text));
        missing.retain(|n| !n.starts_with("K_"));
        assert!(
            missing.is_empty(),
            "lua/lib/{name}.lua uses undefined {missing:?}: include their module"
        );
    }
}

#[test]
fn every_verb_composes_with_what_it_uses() {
    for (name, script) in composed_verbs() {
        let missing = undefined(&script);
        assert!(
            missing.is_empty(),
            "lua/{name}.lua uses undefined {missing:?}: include their module, or name the K_ key on the KEYS line"
        );
    }
}

#[test]
fn every_verb_takes_exactly_the_keys_it_uses() {
    for (name, text) in VERBS {
        let script = compose(text);
        let body = &script[script.find('\n').unwrap_or(0)..];
        for k in keys(text) {
            let key = format!("K_{}", KEY_NAMES[k].to_uppercase());
            let used = words(body).iter().any(|w| w.text == key);
            assert!(
                used,
                "lua/{name}.lua takes {} in KEYS but never uses it",
                KEY_NAMES[k]
            );
        }
    }
}

#[test]
fn keys_bind_in_header_order() {
    let text = "-- x.lua\n-- KEYS:  ready listings. Per-job keys …\nreturn 1";
    assert_eq!(keys(text), [3, 0]);
    assert!(
        compose(text).starts_with("local CLUSTER = false\nlocal K_READY, K_LISTINGS = KEYS[1], KEYS[2]\n")
    );
    assert!(compose_for(text, true).starts_with("local CLUSTER = true\n"));
}

#[test]
#[should_panic(expected = "unknown queue key \"nope\"")]
fn an_unknown_key_is_refused() {
    keys("-- KEYS: listings nope.\n");
}

#[test]
fn the_checker_sees_a_missing_include() {
    assert_eq!(undefined("local x = job_key('a')"), ["job_key"]);
    assert_eq!(undefined("return K_READY"), ["K_READY"]);
    assert!(undefined("local function f() return 1 end\nlocal a, B = f(), redis.call('TIME')").is_empty());
}

#[test]
fn includes_resolve_once_dependencies_first() {
    let order = resolve("-- include: lease, history\n");
    let at = |m: &str| order.iter().position(|n| *n == m).unwrap();
    assert_eq!(order.iter().filter(|n| **n == "keys").count(), 1);
    assert!(at("keys") < at("events") && at("events") < at("history"));
    assert!(at("keys") < at("lease"));
    assert!(!order.contains(&"posting") && !order.contains(&"foreign"));
}

#[test]
fn only_header_lines_include() {
    assert_eq!(
        includes("-- a.lua\n--\n-- include: a, b\n-- include: c\nlocal x\n-- include: d"),
        ["a", "b", "c"]
    );
}

#[test]
#[should_panic(expected = "unknown module \"nope\"")]
fn an_unknown_include_is_refused() {
    resolve("-- include: nope\n");
}

#[test]
fn every_module_is_used() {
    let used: Vec<&str> = VERBS.iter().flat_map(|(_, text)| resolve(text)).collect();
    for (name, _) in MODULES {
        assert!(used.contains(name), "lua/lib/{name}.lua is included by no script");
    }
}

#[test]
fn a_lean_job_has_the_default_attempts() {
    let (_, lean) = MODULES
        .iter()
        .find(|(name, _)| *name == "lean")
        .expect("lua/lib/lean.lua");
    let line = format!("local LEAN_MAX = '{}'\n", crate::job::DEFAULT_MAX_ATTEMPTS);
    assert!(
        lean.contains(&line),
        "lua/lib/lean.lua's LEAN_MAX is not DEFAULT_MAX_ATTEMPTS"
    );
}

#[test]
fn modules_cut_into_pieces_that_make_them_up() {
    for (name, text) in MODULES {
        let parts = pieces(text);
        let joined: String = parts
            .iter()
            .map(|p| match p {
                Piece::Function { text, .. } | Piece::Other(text) => *text,
            })
            .collect();
        assert_eq!(joined, *text, "lua/lib/{name}.lua");
        for p in &parts {
            if let Piece::Function { name: f, text: body } = p {
                assert!(
                    body.starts_with(&format!("local function {f}(")),
                    "{name}: {body}"
                );
                // Its last line of code closes it (comments may follow).
                let last = body
                    .lines()
                    .map(str::trim_end)
                    .rfind(|l| !l.is_empty() && !l.trim_start().starts_with("--"))
                    .unwrap_or_default();
                assert!(
                    last == "end" || last.ends_with(" end"),
                    "{name}: {f} ends with {last:?}"
                );
            }
        }
    }
}

/// What the cut relies on: no block comments or long strings, whose
/// lines could start with `--` or sit at the start of a line.
#[test]
fn no_lua_file_has_block_comments_or_long_strings() {
    for (name, text) in MODULES.iter().chain(VERBS) {
        assert!(
            !text.contains("[[") && !text.contains("[="),
            "lua {name}: --[[ or [[ ]] is not supported by the composer"
        );
    }
}

#[test]
fn a_script_keeps_only_the_functions_it_reaches() {
    let script = compose("-- x.lua\n-- include: keys\nreturn job_key('a')\n");
    assert!(script.contains("local function job_key("), "{script}");
    assert!(!script.contains("local function owned_key("), "{script}");
    assert!(
        !script.lines().any(|l| l.trim_start().starts_with("--")),
        "{script}"
    );
    // Reached through another function.
    let pieces = pieces("local function a() return 1 end\nlocal function b()\n  return a()\nend\nlocal function c() return 3 end\n");
    let needed = reachable(&pieces, "return b()");
    assert!(needed.contains("a") && needed.contains("b") && !needed.contains("c"));
}
