//! The handlers linked into this binary, collected with `inventory`.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use crate::error::{Error, Result};
use crate::handler::{HandlerError, JobContext};

/// The future an async handler returns, boxed.
pub(crate) type HandlerFuture = Pin<Box<dyn Future<Output = Result<(), HandlerError>> + Send + 'static>>;

/// How to call a handler.
#[derive(Clone, Copy)]
pub enum HandlerFn {
    /// An `async fn`, run as a task on the worker's handler runtime.
    Async(fn(JobContext, rmpv::Value) -> HandlerFuture),
    /// An `async fn` whose first step (up to its first `.await` that has
    /// to wait) runs on the worker loop's own thread, and the rest as a
    /// task on the handler runtime (`#[jobworker::handler(start_on_loop =
    /// true)]`): it starts sooner, and must not block in that step.
    StartOnLoop(fn(JobContext, rmpv::Value) -> HandlerFuture),
    /// A plain `fn`, run on a blocking thread.
    Blocking(fn(JobContext, rmpv::Value) -> Result<(), HandlerError>),
}

impl std::fmt::Debug for HandlerFn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            HandlerFn::Async(_) => "async",
            HandlerFn::StartOnLoop(_) => "async on loop",
            HandlerFn::Blocking(_) => "blocking",
        })
    }
}

/// One registered handler, as `#[jobworker::handler]` submits it.
#[derive(Debug, Clone, Copy)]
pub struct HandlerEntry {
    /// The job name it handles.
    pub name: &'static str,
    /// The queue its typed `post` helper posts to.
    pub queue: &'static str,
    /// Longest run before the worker stops it (`None`: no limit).
    pub timeout: Option<Duration>,
    /// Tries before its jobs are trashed (`None`: the job's own setting).
    pub max_attempts: Option<u32>,
    /// Source file of the handler.
    pub file: &'static str,
    /// Source line of the handler.
    pub line: u32,
    /// The function.
    pub run: HandlerFn,
}

inventory::collect!(HandlerEntry);

/// The handlers of this binary, by job name.
///
/// ```
/// use jobworker::{HandlerError, JobContext, Registry};
///
/// #[jobworker::handler(queue = "images", timeout = "1m")]
/// fn thumbnail(_cx: JobContext, path: String) -> Result<(), HandlerError> {
///     println!("thumbnail of {path}"); // a plain fn runs on a blocking thread
///     Ok(())
/// }
///
/// # fn main() -> jobworker::Result<()> {
/// let registry = Registry::load()?;
/// let entry = registry.get("thumbnail").expect("linked in");
/// assert_eq!(entry.queue, "images");
/// assert_eq!(entry.timeout, Some(std::time::Duration::from_secs(60)));
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Default)]
pub struct Registry {
    handlers: BTreeMap<&'static str, HandlerEntry>,
}

impl Registry {
    /// Collects every handler linked into the binary; two handlers with the
    /// same job name are an error naming both source locations.
    pub fn load() -> Result<Registry> {
        Self::from_entries(inventory::iter::<HandlerEntry>.into_iter().copied())
    }

    /// Builds a registry from explicit entries (same duplicate check).
    pub fn from_entries(entries: impl IntoIterator<Item = HandlerEntry>) -> Result<Registry> {
        let mut handlers: BTreeMap<&'static str, HandlerEntry> = BTreeMap::new();
        let mut clashes = Vec::new();
        for e in entries {
            if let Some(first) = handlers.get(e.name) {
                clashes.push(format!(
                    "handler name {:?} is registered twice: {}:{} and {}:{}",
                    e.name, first.file, first.line, e.file, e.line
                ));
            } else {
                handlers.insert(e.name, e);
            }
        }
        if !clashes.is_empty() {
            clashes.sort();
            return Err(Error::invalid(clashes.join("; ")));
        }
        Ok(Registry { handlers })
    }

    /// The handler for job name `name`.
    pub fn get(&self, name: &str) -> Option<&HandlerEntry> {
        self.handlers.get(name)
    }

    /// Every handler, sorted by name.
    pub fn iter(&self) -> impl Iterator<Item = &HandlerEntry> {
        self.handlers.values()
    }

    /// Number of handlers.
    pub fn len(&self) -> usize {
        self.handlers.len()
    }

    /// True when no handler is linked in.
    pub fn is_empty(&self) -> bool {
        self.handlers.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn noop(_: JobContext, _: rmpv::Value) -> Result<(), HandlerError> {
        Ok(())
    }

    fn entry(name: &'static str, file: &'static str, line: u32) -> HandlerEntry {
        HandlerEntry {
            name,
            queue: "default",
            timeout: None,
            max_attempts: None,
            file,
            line,
            run: HandlerFn::Blocking(noop),
        }
    }

    #[test]
    fn duplicates_name_both_locations() {
        let err = Registry::from_entries([
            entry("a", "x.rs", 1),
            entry("b", "y.rs", 2),
            entry("a", "z.rs", 9),
        ])
        .unwrap_err();
        assert!(err.is_invalid());
        assert!(
            err.message().contains("x.rs:1") && err.message().contains("z.rs:9"),
            "{err}"
        );
        let ok = Registry::from_entries([entry("a", "x.rs", 1), entry("b", "y.rs", 2)]).unwrap();
        assert_eq!(ok.len(), 2);
        assert!(ok.get("b").is_some() && ok.get("c").is_none());
    }
}
