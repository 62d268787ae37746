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
    ("foreign", include_str!("../../lua/lib/foreign.lua")),
    ("lease", include_str!("../../lua/lib/lease.lua")),
    ("take", include_str!("../../lua/lib/take.lua")),
    ("maintenance", include_str!("../../lua/lib/maintenance.lua")),
    ("state", include_str!("../../lua/lib/state.lua")),
    ("posting", include_str!("../../lua/lib/posting.lua")),
    ("handoff", include_str!("../../lua/lib/handoff.lua")),
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
    let names: Vec<String> = keys
        .iter()
        .map(|k| format!("K_{}", KEY_NAMES[*k].to_uppercase()))
        .collect();
    let values: Vec<String> = (1..=keys.len()).map(|n| format!("KEYS[{n}]")).collect();
    format!("local {} = {}\n", names.join(", "), values.join(", "))
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
/// then `text`.
pub fn compose_for(text: &str, cluster: bool) -> String {
    let mut out = format!("local CLUSTER = {cluster}\n");
    out.push_str(&bindings(&keys(text)));
    for name in resolve(text) {
        out.push_str(module(name).unwrap_or_default());
        out.push('\n');
    }
    out.push_str(text);
    out
}

/// Every verb's composed script: `(name, script)`.
pub fn composed_verbs() -> impl Iterator<Item = (&'static str, String)> {
    VERBS.iter().map(|(name, text)| (*name, compose(text)))
}

#[cfg(test)]
mod tests;
