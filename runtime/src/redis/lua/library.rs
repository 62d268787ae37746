//! The board's Lua as one Redis Functions library (Redis ≥ 7): loaded once
//! with FUNCTION LOAD, each verb then run with FCALL.
//!
//! A script sent with EVALSHA runs its whole top level on every call, so
//! every module function it carries is a closure built per call; a
//! library's top level runs once, at load (see `runtime/lua/README.md`).
//! That top level has no KEYS or ARGV, so the module lines that read them
//! (`local NS, QUEUE, EVENTS = ARGV[1], …`) and the per-call caches
//! (`local any_tracked = nil`) become declarations, assigned at the start
//! of every call by `bind`; each verb's function then binds the queue keys
//! its header names, which the library builds from NS (`QUEUE_KEYS`: an
//! FCALL sends none), and runs the verb's file.
//!
//! The library is named by a digest of its text (`jobworker_<16 hex>`,
//! functions `jobworker_<16 hex>_<verb>`): function names are global to
//! the server, and during a rolling upgrade two versions share it.

use super::{assignment, keys, push_code, resolve, KEY_NAMES, MODULES, VERBS};
use crate::redis::keys::PIECES;

/// What every library's name starts with.
pub const PREFIX: &str = "jobworker_";

/// The verbs that add jobs or data: past `maxmemory` (with no eviction)
/// the server refuses them whole. Every other verb settles, moves or
/// removes what is there, and runs past `maxmemory` too (`allow-oom`), so
/// that a full server can still be drained. (A script sent with EVALSHA
/// is refused only when its first write adds data: post is, consume is
/// not.)
pub const ADDS_DATA: [&str; 5] = ["post", "recur_spawn", "depend", "tag", "track"];

/// The library's name and its source.
pub struct Library {
    /// `jobworker_<16 hex digits of the SHA-1 of its text>`.
    pub name: String,
    /// The source FUNCTION LOAD takes.
    pub text: String,
}

impl Library {
    /// The library of this build's Lua.
    pub fn new() -> Library {
        let digest = redis::Script::new(&text(PREFIX)).get_hash().to_owned();
        let name = format!("{PREFIX}{}", &digest[..16]);
        Library {
            text: text(&name),
            name,
        }
    }

    /// The function that runs `verb`.
    pub fn function(&self, verb: &str) -> String {
        format!("{}_{verb}", self.name)
    }
}

impl Default for Library {
    fn default() -> Self {
        Library::new()
    }
}

/// The library's source under `name`: every module once (after the ones it
/// includes), `bind`, then one function per verb.
fn text(name: &str) -> String {
    let all: Vec<&str> = MODULES.iter().map(|(n, _)| *n).collect();
    let mut top = String::from("local CLUSTER = false\n");
    let (locals, globals): (Vec<&str>, Vec<&str>) = BOUND_GLOBALS.iter().copied().unzip();
    top.push_str(&format!("local {}\n", locals.join(", ")));
    let key_names: Vec<String> = KEY_NAMES
        .iter()
        .map(|k| format!("K_{}", k.to_uppercase()))
        .collect();
    top.push_str(&format!("local {}\n", key_names.join(", ")));
    let mut bind = String::new();
    for module in resolve(&format!("-- include: {}", all.join(", "))) {
        for line in super::module(module).unwrap_or_default().lines() {
            match per_call(line) {
                Some((names, values)) => {
                    top.push_str(&format!("local {names}\n"));
                    bind.push_str(&format!("{names} = {values}\n"));
                }
                None => push_code(&mut top, line),
            }
        }
    }
    let pieces: Vec<String> = PIECES.iter().map(|p| format!("ns .. '{p}'")).collect();
    top.push_str(&QUEUE_KEYS.replace("PIECES", &pieces.join(", ")));
    bind.push_str(&format!("{} = {}\n", locals.join(", "), globals.join(", ")));
    let mut out = format!("#!lua name={name}\n{top}local function bind(ARGV)\n{bind}end\n");
    for (verb, file) in VERBS {
        out.push_str(&format!(
            "redis.register_function{{function_name = '{name}_{verb}', callback = function(KEYS, ARGV)\nbind(ARGV)\n{}",
            built_keys(&keys(file))
        ));
        push_code(&mut out, file);
        let flags = if ADDS_DATA.contains(verb) {
            ""
        } else {
            "'allow-oom'"
        };
        out.push_str(&format!("end, flags = {{{flags}}}}}\n"));
    }
    BOUND_GLOBALS
        .iter()
        .fold(out, |text, (local, global)| calls_renamed(&text, global, local))
}

/// The globals the hot paths call most, each with the local `bind` assigns
/// it to at the start of every call; the library's text calls the local.
/// A library's globals table is empty, with the real one behind its
/// `__index` (Redis 7's functions engine), so each use of a global is a
/// miss and a second lookup: these three took 5,300 instructions of a lone
/// post (0.97× without) and 4,000 of a drained job (0.98×). (A script sent
/// with EVALSHA reads the globals table itself, and calls them as written.)
const BOUND_GLOBALS: [(&str, &str); 3] = [
    ("rcall", "redis.call"),
    ("tonum", "tonumber"),
    ("floor", "math.floor"),
];

/// `text` with every call of `global` (`global(` not preceded by a part of
/// a name) made a call of `local`.
fn calls_renamed(text: &str, global: &str, local: &str) -> String {
    let call = format!("{global}(");
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(&call) {
        let in_a_name = rest[..at]
            .chars()
            .last()
            .is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '.');
        out.push_str(&rest[..at]);
        out.push_str(if in_a_name { global } else { local });
        out.push('(');
        rest = &rest[at + call.len()..];
    }
    out.push_str(rest);
    out
}

/// `queue_keys(NS)`: a queue's keys, in the order of [`KEY_NAMES`], built
/// from its NS once and kept for the next calls (up to 1,000 queues, then
/// built afresh). An FCALL sends no keys: the library runs on one server
/// or behind sentinels, where nothing routes by them, and each key sent
/// cost the server about 1,300 instructions (its parsing, its string
/// object, its Lua string and slot in KEYS): 16 of them were 11 % of a
/// lone post. (State a call leaves behind, as `oslo_datetime`'s memo of
/// the second is: a pure function of its argument.)
const QUEUE_KEYS: &str = "local queue_keys_of, queue_keys_n = {}, 0
local function queue_keys(ns)
  local keys = queue_keys_of[ns]
  if keys then return keys end
  if queue_keys_n >= 1000 then queue_keys_of, queue_keys_n = {}, 0 end
  keys = {PIECES}
  queue_keys_of[ns], queue_keys_n = keys, queue_keys_n + 1
  return keys
end
";

/// The lines binding a verb's queue keys (indexes into [`KEY_NAMES`]) from
/// [`QUEUE_KEYS`]: `local keys = queue_keys(NS)` then `K_LISTINGS, K_READY
/// = keys[1], keys[4]`.
fn built_keys(keys: &[usize]) -> String {
    if keys.is_empty() {
        return String::new();
    }
    let bound = assignment(keys, |_, k| format!("keys[{}]", k + 1));
    format!("local keys = queue_keys(NS)\n{bound}")
}

/// A module's top-level line whose value differs per call: `local NAMES =
/// VALUES` reading KEYS or ARGV, or setting nothing but nils (a per-call
/// cache). Returns (names, values).
pub(super) fn per_call(line: &str) -> Option<(&str, &str)> {
    let (names, values) = line.strip_prefix("local ")?.split_once(" = ")?;
    let reads_call = values.contains("KEYS[") || values.contains("ARGV[");
    let all_nil = values.split(',').all(|v| v.trim() == "nil");
    (!names.starts_with("function") && (reads_call || all_nil)).then_some((names, values))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The names a module's top level defines: `local function NAME(` and
    /// `local A, B = …` (or `local A`).
    fn top_names(module: &str) -> Vec<(&str, bool)> {
        let mut out = Vec::new();
        for line in module.lines().filter_map(|l| l.strip_prefix("local ")) {
            if let Some(f) = line.strip_prefix("function ") {
                out.push((f.split('(').next().unwrap_or_default().trim(), true));
            } else {
                let names = line.split(" = ").next().unwrap_or_default();
                out.extend(names.split(',').map(|n| (n.trim(), false)));
            }
        }
        out
    }

    #[test]
    fn no_two_modules_define_the_same_name() {
        let mut seen = std::collections::HashMap::new();
        for (module, text) in MODULES {
            for (name, _) in top_names(text) {
                if let Some(other) = seen.insert(name, *module) {
                    panic!("{name} is defined by both lib/{other}.lua and lib/{module}.lua");
                }
            }
        }
    }

    /// Whether `rest`, the code after `name[`, only reads the element: its
    /// bracket closes on the line, and what follows can neither assign it
    /// (`=`, `, x =`) nor reach into it (`[`, `.`, `:`). Anything else
    /// counts as a write.
    fn a_read(rest: &str, writes: &str) -> bool {
        if !writes.ends_with('[') {
            return false;
        }
        let mut depth = 1;
        let Some(close) = rest.char_indices().find_map(|(at, c)| {
            depth += match c {
                '[' => 1,
                ']' => -1,
                '\'' | '"' => return Some(None),
                _ => 0,
            };
            (depth == 0).then_some(Some(at))
        }) else {
            return false;
        };
        let Some(close) = close else { return false };
        let after = rest[close + 1..].trim_start();
        let assigns = after.starts_with('=') && !after.starts_with("==");
        !assigns && !after.starts_with(['[', '.', ':', ','])
    }

    #[test]
    fn an_indexed_read_is_told_from_a_write() {
        for read in ["s] end", "s]", "k] == v then", "k] + 1", "f(x[1])] or 0"] {
            assert!(a_read(read, "T["), "{read}");
        }
        for write in [
            "k] = v",
            "k]=v",
            "a[b]] = v",
            "k][j] = v",
            "k].f = v",
            "k], x = 1, 2",
            "k]:m()",
            "']'] = v",
            "k",
        ] {
            assert!(!a_read(write, "T["), "{write}");
        }
        assert!(!a_read("k]", "T ="));
    }

    /// Module-level memos of pure functions, kept across calls on purpose:
    /// whatever call wrote one, it holds what any call would compute
    /// (`oslo_datetime`'s map of the last second asked).
    const PURE_MEMOS: [&str; 1] = ["dt_second"];

    /// A module's top-level value that is not bound per call lives as long
    /// as the library: nothing may assign it (or into it) after its line,
    /// but a [`PURE_MEMOS`] entry.
    #[test]
    fn state_that_outlives_a_call_is_never_written() {
        let per_call_names: Vec<&str> = MODULES
            .iter()
            .flat_map(|(_, t)| t.lines().filter_map(per_call))
            .flat_map(|(names, _)| names.split(',').map(str::trim))
            .collect();
        for known in [
            "NS",
            "QUEUE",
            "EVENTS",
            "any_tracked",
            "listening",
            "any_waiting",
            "ms_ms",
        ] {
            assert!(per_call_names.contains(&known), "{known} is not bound per call");
        }
        let all_code: Vec<&str> = MODULES.iter().chain(VERBS).flat_map(|(_, t)| t.lines()).collect();
        for (module, text) in MODULES {
            for (name, is_function) in top_names(text) {
                if is_function || per_call_names.contains(&name) || PURE_MEMOS.contains(&name) {
                    continue;
                }
                for line in &all_code {
                    let code = line.split("--").next().unwrap_or_default();
                    let code_start = code.trim_start();
                    if code_start.starts_with("local ") && !code_start.starts_with("local function") {
                        continue;
                    }
                    for writes in [
                        format!("{name} ="),
                        format!("{name}["),
                        format!("table.insert({name}"),
                    ] {
                        let hit = code.match_indices(&writes).any(|(at, _)| {
                            let part_of_a_name = code[..at]
                                .chars()
                                .last()
                                .is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '.');
                            let a_comparison =
                                writes.ends_with('=') && code[at + writes.len()..].starts_with('=');
                            !part_of_a_name && !a_comparison && !a_read(&code[at + writes.len()..], &writes)
                        });
                        assert!(
                            !hit,
                            "lib/{module}.lua's {name} outlives a call but is written: {line}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn only_calls_of_the_global_itself_are_renamed() {
        let text =
            "x = redis.call('GET', k) + tonumber(y) + my_tonumber(z) + math.floor(w)\nlocal f = tonumber";
        let renamed = BOUND_GLOBALS.iter().fold(text.to_owned(), |t, (local, global)| {
            calls_renamed(&t, global, local)
        });
        assert_eq!(
            renamed,
            "x = rcall('GET', k) + tonum(y) + my_tonumber(z) + floor(w)\nlocal f = tonumber"
        );
        // No Lua file names a variable of its own like one of them (a
        // field, `math.floor`, is no variable).
        for (file, text) in MODULES.iter().chain(VERBS) {
            for (local, _) in BOUND_GLOBALS {
                let named = text.match_indices(local).any(|(at, _)| {
                    let before = text[..at].chars().last();
                    let after = text[at + local.len()..].chars().next();
                    let part = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
                    !part(before) && before != Some('.') && !part(after)
                });
                assert!(!named, "{file}.lua uses the name {local}");
            }
        }
    }

    #[test]
    fn every_verb_has_a_function_and_the_name_follows_the_text() {
        let library = Library::new();
        assert!(library.name.starts_with(PREFIX) && library.name.len() == PREFIX.len() + 16);
        assert!(library
            .text
            .starts_with(&format!("#!lua name={}\n", library.name)));
        for (verb, _) in VERBS {
            let registered = format!(
                "redis.register_function{{function_name = '{}',",
                library.function(verb)
            );
            assert!(library.text.contains(&registered), "no function for {verb}");
        }
        assert!(!library.text.contains("\n--"), "comment lines are left out");
        for (_, global) in BOUND_GLOBALS {
            assert!(
                !library.text.contains(&format!("{global}(")),
                "{global} is called through its local"
            );
        }
    }
}
