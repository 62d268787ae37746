//! The board's Lua as one Redis Functions library, for the benchmark.
//!
//! A library's top level runs once, at FUNCTION LOAD, without KEYS or
//! ARGV: the module lines that bind them (`local K_… = KEYS[n]`) become
//! declarations, assigned at the start of every call by `bind`, which also
//! clears the per-call caches (`local any_tracked = nil`, …). Each verb's
//! file becomes the body of a function `jwbench_<verb>(KEYS, ARGV)`.

use jobworker::redis::lua;

/// The library's name (FUNCTION LOAD / FUNCTION DELETE).
pub const NAME: &str = "jwbench";

/// The function that runs `verb`.
pub fn function(verb: &str) -> String {
    format!("{NAME}_{verb}")
}

/// The library's source: every module once, `bind`, then one registered
/// function per verb.
pub fn text() -> String {
    let mut top = String::from("local CLUSTER = false\n");
    let mut bind = String::new();
    let all_keys: Vec<usize> = (0..lua::KEY_NAMES.len()).collect();
    let keys = lua::bindings(&all_keys);
    for module in std::iter::once(keys.as_str()).chain(lua::MODULES.iter().map(|(_, t)| *t)) {
        for line in module.lines() {
            let per_call = line
                .strip_prefix("local ")
                .and_then(|rest| rest.split_once(" = "))
                .filter(|(_, value)| *value == "nil" || value.contains("KEYS[") || value.contains("ARGV["));
            match per_call {
                Some((names, value)) => {
                    top.push_str(&format!("local {names}\n"));
                    bind.push_str(&format!("  {names} = {value}\n"));
                }
                None => {
                    top.push_str(line);
                    top.push('\n');
                }
            }
        }
    }
    let mut out = format!("#!lua name={NAME}\n{top}\nlocal function bind(KEYS, ARGV)\n{bind}end\n");
    for (verb, text) in lua::VERBS {
        out.push_str(&format!(
            "redis.register_function('{}', function(KEYS, ARGV)\nbind(KEYS, ARGV)\n{text}\nend)\n",
            function(verb)
        ));
    }
    out
}
