//! The Lua sources and how a script is put together: each verb's file
//! (`lua/<verb>.lua`) names in its header the shared modules it uses
//! (`-- include: lease, history`, modules of `lua/lib/`); the script Redis
//! runs is those modules, resolved transitively, each once and after the
//! modules it includes, followed by the verb's file. The binary carries
//! every file (`include_str!`).
//!
//! A verb's header also names the queue keys it takes (`-- KEYS:
//! listings ready leases.`, names of [`KEY_NAMES`]): the script gets
//! exactly those in KEYS, in that order, and the composed script starts by
//! binding them (`local K_LISTINGS, K_READY, K_LEASES = KEYS[1], …`).
//!
//! Public (hidden) for the Lua micro-benchmark and the script tests of
//! `jobworker-tests`; the board uses it through its script registry.

/// A shared module of `lua/lib/`: `(name, text)`; the name is what an
/// `-- include:` line names.
pub const MODULES: &[(&str, &str)] = &[
    ("keys", include_str!("../../lua/lib/keys.lua")),
    ("time", include_str!("../../lua/lib/time.lua")),
    ("msgpack", include_str!("../../lua/lib/msgpack.lua")),
    ("ready", include_str!("../../lua/lib/ready.lua")),
    ("events", include_str!("../../lua/lib/events.lua")),
    ("history", include_str!("../../lua/lib/history.lua")),
    ("stats", include_str!("../../lua/lib/stats.lua")),
    ("tags", include_str!("../../lua/lib/tags.lua")),
    ("forget", include_str!("../../lua/lib/forget.lua")),
    ("retention", include_str!("../../lua/lib/retention.lua")),
    ("failure", include_str!("../../lua/lib/failure.lua")),
    ("deps", include_str!("../../lua/lib/deps.lua")),
    ("lean", include_str!("../../lua/lib/lean.lua")),
    ("foreign", include_str!("../../lua/lib/foreign.lua")),
    ("lease", include_str!("../../lua/lib/lease.lua")),
    ("take", include_str!("../../lua/lib/take.lua")),
    ("maintenance", include_str!("../../lua/lib/maintenance.lua")),
    ("state", include_str!("../../lua/lib/state.lua")),
    ("posting", include_str!("../../lua/lib/posting.lua")),
    ("handoff", include_str!("../../lua/lib/handoff.lua")),
    ("consume_jobs", include_str!("../../lua/lib/consume_jobs.lua")),
    ("claim_jobs", include_str!("../../lua/lib/claim_jobs.lua")),
];

/// The queue keys' names, in the order of `QueueKeys::keys` (and of the
/// table in `lua/README.md`); a script binds key `name` as `K_<NAME>`.
pub const KEY_NAMES: [&str; 19] = [
    "listings",
    "sequence",
    "trash",
    "ready",
    "scheduled",
    "leases",
    "completed",
    "quarantine",
    "quarantine_reason",
    "waiting",
    "queue",
    "tags",
    "failed",
    "recurring",
    "outbox",
    "tracked",
    "trashed",
    "cancelled",
    "idle",
];

/// Every verb's file of `lua/`: `(name, text)`.
pub const VERBS: &[(&str, &str)] = &[
    ("post", include_str!("../../lua/post.lua")),
    ("claim", include_str!("../../lua/claim.lua")),
    ("claim_job", include_str!("../../lua/claim_job.lua")),
    ("extend", include_str!("../../lua/extend.lua")),
    ("consume", include_str!("../../lua/consume.lua")),
    (
        "consume_then_claim",
        include_str!("../../lua/consume_then_claim.lua"),
    ),
    ("abandon", include_str!("../../lua/abandon.lua")),
    ("trash", include_str!("../../lua/trash.lua")),
    ("reap", include_str!("../../lua/reap.lua")),
    ("index", include_str!("../../lua/index.lua")),
    ("quarantine", include_str!("../../lua/quarantine.lua")),
    ("recover_owner", include_str!("../../lua/recover_owner.lua")),
    ("cancel", include_str!("../../lua/cancel.lua")),
    ("priority", include_str!("../../lua/priority.lua")),
    ("resolve", include_str!("../../lua/resolve.lua")),
    ("depend", include_str!("../../lua/depend.lua")),
    ("retry", include_str!("../../lua/retry.lua")),
    ("purge", include_str!("../../lua/purge.lua")),
    ("tag", include_str!("../../lua/tag.lua")),
    ("track", include_str!("../../lua/track.lua")),
    ("recur_spawn", include_str!("../../lua/recur_spawn.lua")),
    ("overview", include_str!("../../lua/overview.lua")),
];

/// The text of module `name`, if there is one.
pub fn module(name: &str) -> Option<&'static str> {
    MODULES.iter().find(|(n, _)| *n == name).map(|(_, t)| *t)
}

/// The text of `local function name(…) … end` in module `module`, if it
/// has one (its body's own lines are indented, so the first unindented
/// `end` closes it): for scripts outside the library that must write the
/// same bytes, such as the benches' floors.
pub fn function(module: &str, name: &str) -> Option<&'static str> {
    let text = self::module(module)?;
    let start = text.find(&format!("local function {name}("))?;
    let end = "\nend\n";
    let len = text[start..].find(end)? + end.len();
    Some(&text[start..start + len])
}

/// The text of verb `name`'s file, if there is one.
pub fn verb(name: &str) -> Option<&'static str> {
    VERBS.iter().find(|(n, _)| *n == name).map(|(_, t)| *t)
}

/// The modules a file's header names on its `-- include:` lines, in order.
pub fn includes(text: &str) -> Vec<&str> {
    text.lines()
        .take_while(|line| line.starts_with("--") || line.trim().is_empty())
        .filter_map(|line| line.strip_prefix("-- include:"))
        .flat_map(|names| names.split(','))
        .map(str::trim)
        .filter(|name| !name.is_empty())
        .collect()
}

/// The queue keys a verb's header names from its `-- KEYS:` line up to a
/// `.` (the list may go on over the next comment lines), as indexes into
/// [`KEY_NAMES`], in order. Panics naming a key that is not a queue key.
pub fn keys(text: &str) -> Vec<usize> {
    let mut lines = text.lines().skip_while(|l| !l.starts_with("-- KEYS:"));
    let Some(first) = lines.next() else {
        return Vec::new();
    };
    let mut names = first.trim_start_matches("-- KEYS:").to_owned();
    while !names.contains('.') {
        let Some(more) = lines.next().and_then(|l| l.strip_prefix("--")) else {
            break;
        };
        names.push(' ');
        names.push_str(more);
    }
    names
        .split('.')
        .next()
        .unwrap_or_default()
        .split([' ', ','])
        .filter(|n| !n.is_empty())
        .map(|name| {
            KEY_NAMES
                .iter()
                .position(|k| *k == name)
                .unwrap_or_else(|| panic!("lua KEYS names an unknown queue key {name:?}"))
        })
        .collect()
}

/// The Lua line binding `keys` (indexes into [`KEY_NAMES`]) from KEYS, in
/// that order: `local K_LISTINGS, K_READY = KEYS[1], KEYS[2]`.
pub fn bindings(keys: &[usize]) -> String {
    if keys.is_empty() {
        return String::new();
    }
    format!("local {}", assignment(keys, |n, _| format!("KEYS[{n}]")))
}

/// `K_LISTINGS, K_READY = <value of 1, 0>, <value of 2, 3>\n`: each of
/// `keys` (indexes into [`KEY_NAMES`]) gets `value(its place from 1, its
/// index)`.
pub(crate) fn assignment(keys: &[usize], value: impl Fn(usize, usize) -> String) -> String {
    let names: Vec<String> = keys
        .iter()
        .map(|k| format!("K_{}", KEY_NAMES[*k].to_uppercase()))
        .collect();
    let values: Vec<String> = keys.iter().enumerate().map(|(i, k)| value(i + 1, *k)).collect();
    format!("{} = {}\n", names.join(", "), values.join(", "))
}

/// The modules `text` needs, transitively: each once, every module after
/// the ones it includes. Panics naming an unknown module or an include
/// cycle (the unit tests compose every file, so neither ships).
pub fn resolve(text: &str) -> Vec<&'static str> {
    let mut done = Vec::new();
    for name in includes(text) {
        visit(name, &mut Vec::new(), &mut done);
    }
    done
}

fn visit(name: &str, path: &mut Vec<&'static str>, done: &mut Vec<&'static str>) {
    let Some(&(name, text)) = MODULES.iter().find(|(n, _)| *n == name) else {
        panic!("lua include names an unknown module {name:?} (see lua/lib/)");
    };
    if done.contains(&name) {
        return;
    }
    assert!(
        !path.contains(&name),
        "lua include cycle: {} -> {name}",
        path.join(" -> ")
    );
    path.push(name);
    for dep in includes(text) {
        visit(dep, path, done);
    }
    path.pop();
    done.push(name);
}

/// The script Redis runs for `text` on one server or behind sentinels
/// (see [`compose_for`]).
pub fn compose(text: &str) -> String {
    compose_for(text, false)
}

/// The script Redis runs for `text`: whether it runs on a cluster
/// (`local CLUSTER = …`: its channels are then sharded), the binding of
/// the keys it takes ([`keys`]), the modules it includes ([`resolve`]),
/// then `text`. Of the modules' functions only those the script can reach
/// are kept, and comment lines are left out: Redis runs a script's whole
/// top level on every call, and each function defined there costs the
/// call its closure (see `runtime/lua/README.md`).
pub fn compose_for(text: &str, cluster: bool) -> String {
    let mut out = format!("local CLUSTER = {cluster}\n");
    out.push_str(&bindings(&keys(text)));
    let pieces: Vec<Piece<'_>> = resolve(text)
        .into_iter()
        .flat_map(|name| pieces(module(name).unwrap_or_default()))
        .collect();
    let needed = reachable(&pieces, text);
    for piece in &pieces {
        match piece {
            Piece::Function { name, .. } if !needed.contains(name) => {}
            Piece::Function { text, .. } | Piece::Other(text) => push_code(&mut out, text),
        }
    }
    push_code(&mut out, text);
    out
}

/// A part of a module's top level: a function it defines (`local function
/// NAME(` at the start of a line, through its closing `end` at the start
/// of a line, or that line alone when it closes there), or anything else.
enum Piece<'a> {
    Function { name: &'a str, text: &'a str },
    Other(&'a str),
}

/// Cuts a module into [`Piece`]s, in order; together they are the module.
fn pieces(module: &str) -> Vec<Piece<'_>> {
    let mut out = Vec::new();
    // The current piece: where it starts, and the function it defines
    // while that function is still open.
    let (mut start, mut open): (usize, Option<&str>) = (0, None);
    let mut at = 0;
    for line in module.split_inclusive('\n') {
        let code = line.trim_end();
        let top = !code.is_empty() && !code.starts_with([' ', '\t']) && !code.starts_with("--");
        let closes = code == "end" || code.starts_with("end ");
        if top && open.is_some() && closes {
            out.push(function_piece(open.take(), &module[start..at + line.len()]));
            start = at + line.len();
        } else if top && (open.is_some() || code.starts_with("local function ")) {
            if start < at {
                out.push(function_piece(open.take(), &module[start..at]));
            }
            start = at;
            open = code
                .strip_prefix("local function ")
                .and_then(|rest| rest.split('(').next())
                .map(str::trim);
        }
        at += line.len();
    }
    if start < module.len() {
        out.push(function_piece(open, &module[start..]));
    }
    out
}

fn function_piece<'a>(name: Option<&'a str>, text: &'a str) -> Piece<'a> {
    match name {
        Some(name) => Piece::Function { name, text },
        None => Piece::Other(text),
    }
}

/// The names of the functions among `pieces` that `text` or the other
/// pieces use, directly or through each other.
fn reachable<'a>(pieces: &[Piece<'a>], text: &str) -> std::collections::HashSet<&'a str> {
    let functions: std::collections::HashMap<&str, &str> = pieces
        .iter()
        .filter_map(|p| match p {
            Piece::Function { name, text } => Some((*name, *text)),
            Piece::Other(_) => None,
        })
        .collect();
    let mut todo: Vec<&str> = identifiers(text).collect();
    for piece in pieces {
        if let Piece::Other(other) = piece {
            todo.extend(identifiers(other));
        }
    }
    let mut needed = std::collections::HashSet::new();
    while let Some(word) = todo.pop() {
        if let Some((&name, body)) = functions.get_key_value(word) {
            if needed.insert(name) {
                todo.extend(identifiers(body));
            }
        }
    }
    needed
}

/// Every word of `code` that could name a function (comments included:
/// a name there keeps its function, which costs nothing but the call).
fn identifiers(code: &str) -> impl Iterator<Item = &str> {
    code.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|w| !w.is_empty())
}

/// Appends `code` without its comment lines, ending in a newline.
fn push_code(out: &mut String, code: &str) {
    for line in code.lines() {
        if !line.trim_start().starts_with("--") {
            out.push_str(line);
            out.push('\n');
        }
    }
}

/// Every verb's composed script: `(name, script)`.
pub fn composed_verbs() -> impl Iterator<Item = (&'static str, String)> {
    VERBS.iter().map(|(name, text)| (*name, compose(text)))
}

pub mod library;

#[cfg(test)]
mod tests;
