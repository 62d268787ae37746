//! Handlers: the functions `#[jobworker::handler]` registers, the context
//! they run with, and the errors they return.

mod context;
mod error;
mod registry;

#[cfg(any(feature = "cli", feature = "testing"))]
pub(crate) use context::own_queue_step;
pub use context::{CancelFlag, JobContext};
pub use error::{HandlerError, HandlerErrorKind};
#[cfg(feature = "cli")]
pub(crate) use registry::HandlerFuture;
pub use registry::{HandlerEntry, HandlerFn, Registry};

/// The text of a panic payload.
#[cfg(any(feature = "cli", feature = "testing"))]
pub(crate) fn panic_text(payload: Box<dyn std::any::Any + Send>) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic with a non-text payload".to_owned())
}

/// Decodes a job's arguments into the handler's argument type. A payload
/// that does not fit is a fatal error: retrying cannot fix it.
#[doc(hidden)]
pub fn decode_args<T: serde::de::DeserializeOwned>(
    cx: &JobContext,
    args: rmpv::Value,
) -> Result<T, HandlerError> {
    // Through bytes and rmp-serde: the same codec `NewJob::args` encodes
    // with (rmpv's own deserializer reads enums differently).
    let mut bytes = Vec::new();
    rmpv::encode::write_value(&mut bytes, &args).map_err(|e| {
        HandlerError::fatal(format!("cannot re-encode the arguments of job {}: {e}", cx.id()))
    })?;
    rmp_serde::from_slice(&bytes).map_err(|e| {
        HandlerError::fatal(format!(
            "cannot decode the arguments of job {} ({}) as {}: {e}",
            cx.id(),
            cx.name(),
            std::any::type_name::<T>()
        ))
    })
}
