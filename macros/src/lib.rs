//! The `#[jobworker::handler]` attribute. Use it through the `jobworker`
//! crate, which re-exports it; this crate is an implementation detail.
//!
//! The attribute is processed in three steps, one (private) module each:
//! `parse` reads the options and the item, `validate` checks them
//! (reporting every problem at once, each pointing at its token) and
//! `expand` writes the code.

use proc_macro::TokenStream;

mod expand;
mod parse;
mod validate;

/// Registers a function as the handler of a job name.
///
/// (Not run here: this crate cannot depend on `jobworker`, which the
/// example uses; the same attribute runs in `jobworker`'s own doctests,
/// e.g. `jobworker::testing::InlineJob`.)
///
/// ```ignore
/// use jobworker::{HandlerError, JobContext};
///
/// #[derive(serde::Serialize, serde::Deserialize)]
/// struct Resize { width: u32, height: u32 }
///
/// #[jobworker::handler(name = "resize", queue = "images", timeout = "30s", max_attempts = 5)]
/// async fn resize(cx: JobContext, args: Resize) -> Result<(), HandlerError> {
///     cx.log(&format!("resizing to {}x{}", args.width, args.height));
///     Ok(())
/// }
///
/// // Posting is typed:
/// let id = resize::post(&board, &Resize { width: 64, height: 64 }).await?;
/// ```
///
/// The function may be `async` (run as a task) or plain (run on a blocking
/// thread). It takes the job context by value and, optionally, the
/// arguments: any owned `serde` type (`Deserialize` to run, `Serialize` to
/// post), decoded from the job's msgpack payload. A payload that does not
/// decode is a fatal error. A context-only handler `(cx: JobContext)`
/// ignores the payload. The return type must be `Result<(), HandlerError>`
/// (any path whose last segment is `Result`).
///
/// Options, all optional:
///
/// | option | value | default |
/// |---|---|---|
/// | `name` | string: the job name | the function's name |
/// | `queue` | string: the queue `post` uses (1–200 characters, no `{`, `}`, `:` or whitespace) | `"default"` |
/// | `timeout` | string: `<integer><unit>`…, units `ms`, `s`, `m`, `h` (`"30s"`, `"1m30s"`), more than zero | none |
/// | `max_attempts` | integer ≥ 1: tries before the job is trashed | the job's own setting |
/// | `start_on_loop` | `true` or `false`, `async fn` only: run the handler's first step (up to its first `.await` that waits) on the worker loop's own thread, the rest on the handler runtime | `false` |
/// | `crate` | path to the jobworker crate | `::jobworker` |
///
/// Next to the function (which is left unchanged) the attribute generates
/// a module of the same name (modules and functions live in different
/// namespaces) with the constants `NAME` and `QUEUE` and the helpers
/// `job(&args) -> Result<NewJob>` and `async post(&board, &args) ->
/// Result<JobId>`, and submits a `HandlerEntry` to the registry
/// (`jobworker::Registry::load()`).
///
/// `start_on_loop = true` saves the hop to a handler thread (about 70 µs
/// on a busy 2-core machine) when a job starts. That first step holds the
/// worker loop, so it must not block or run long: until it returns, the
/// worker claims, settles and times out nothing. One that runs 2 s past
/// the handler's timeout or past 10 s, whichever is shorter, gets the
/// worker process replaced and the job retried as timed out. `tokio::task::block_in_place`
/// cannot be called in that step.
///
/// The handler must be declared at module level (not inside a function
/// body): the generated module reaches the argument type through
/// `use super::*`.
#[proc_macro_attribute]
pub fn handler(attr: TokenStream, item: TokenStream) -> TokenStream {
    let item = proc_macro2::TokenStream::from(item);
    let args = parse::parse_args(attr.into());
    let result = parse::parse_item(item.clone()).and_then(|parsed| validate::validate(args, parsed));
    match result {
        Ok(handler) => expand::expand(&handler).into(),
        Err(errors) => {
            // Keep the item so that its own uses do not add errors of their own.
            let mut tokens = errors.to_compile_error();
            tokens.extend(item);
            tokens.into()
        }
    }
}
