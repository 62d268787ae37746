//! Handlers: the functions `#[jobworker::handler]` registers, the context
//! they run with, and the errors they return.

mod context;
mod error;
mod registry;

pub use context::{CancelFlag, JobContext};
pub use error::{HandlerError, HandlerErrorKind};
pub use registry::{HandlerEntry, HandlerFn, Registry};

/// Decodes a job's arguments into the handler's argument type. A payload
/// that does not fit is a fatal error: retrying cannot fix it.
#[doc(hidden)]
pub fn decode_args<T: serde::de::DeserializeOwned>(cx: &JobContext, args: rmpv::Value) -> Result<T, HandlerError> {
    rmpv::ext::from_value(args).map_err(|e| {
        HandlerError::fatal(format!(
            "cannot decode the arguments of job {} ({}) as {}: {e}",
            cx.id(),
            cx.name(),
            std::any::type_name::<T>()
        ))
    })
}
