//! What a handler returns when it fails.

use std::fmt;
use std::time::Duration;

/// How the worker treats a failure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HandlerErrorKind {
    /// Try again: after `after`, or after the worker's exponential backoff
    /// when `None`. Counts an attempt; trashed once attempts run out.
    Retry {
        /// Delay before the next try, when the handler chose one.
        after: Option<Duration>,
    },
    /// Give up at once: the job goes to the trash with the message.
    Fatal,
}

/// A handler failure. Any `std::error::Error` converts into a retry, so
/// `?` works on any error; [`HandlerError::fatal`] gives up at once.
///
/// It deliberately does not implement `std::error::Error` itself (that
/// would collide with the blanket conversion).
///
/// ```
/// use jobworker::{HandlerError, HandlerErrorKind};
/// use std::time::Duration;
///
/// fn read_input(path: &str) -> Result<Vec<u8>, HandlerError> {
///     let bytes = std::fs::read(path)?; // an I/O error: retried later
///     if bytes.is_empty() {
///         return Err(HandlerError::fatal(format!("{path} is empty"))); // trashed
///     }
///     Ok(bytes)
/// }
///
/// let e = read_input("/no/such/file").unwrap_err();
/// assert_eq!(e.kind(), &HandlerErrorKind::Retry { after: None });
/// let busy = HandlerError::retry_msg("rate limited").after(Duration::from_secs(30));
/// assert_eq!(busy.kind(), &HandlerErrorKind::Retry { after: Some(Duration::from_secs(30)) });
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HandlerError {
    kind: HandlerErrorKind,
    message: String,
}

impl HandlerError {
    /// Retry after `after` (counts an attempt).
    pub fn retry(after: Duration) -> Self {
        HandlerError {
            kind: HandlerErrorKind::Retry { after: Some(after) },
            message: format!("retry requested after {after:?}"),
        }
    }

    /// Retry with a message, after the worker's backoff.
    pub fn retry_msg(message: impl Into<String>) -> Self {
        HandlerError {
            kind: HandlerErrorKind::Retry { after: None },
            message: message.into(),
        }
    }

    /// Makes a retry happen after `delay` (instead of the worker's
    /// backoff): `HandlerError::retry_msg("busy").after(Duration::from_secs(5))`.
    /// A fatal error stays fatal.
    pub fn after(mut self, delay: Duration) -> Self {
        if let HandlerErrorKind::Retry { after } = &mut self.kind {
            *after = Some(delay);
        }
        self
    }

    /// Give up at once: the job is trashed with `error` as the reason.
    pub fn fatal(error: impl fmt::Display) -> Self {
        HandlerError {
            kind: HandlerErrorKind::Fatal,
            message: error.to_string(),
        }
    }

    /// How the worker treats it.
    pub fn kind(&self) -> &HandlerErrorKind {
        &self.kind
    }

    /// True for [`HandlerErrorKind::Fatal`].
    pub fn is_fatal(&self) -> bool {
        self.kind == HandlerErrorKind::Fatal
    }

    /// The message recorded on the job.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for HandlerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl<E: std::error::Error + Send + Sync + 'static> From<E> for HandlerError {
    fn from(error: E) -> Self {
        let mut message = error.to_string();
        let mut source = error.source();
        while let Some(s) = source {
            message.push_str(": ");
            message.push_str(&s.to_string());
            source = s.source();
        }
        HandlerError::retry_msg(message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fails() -> Result<(), HandlerError> {
        std::fs::read("/no/such/file/anywhere")?;
        Ok(())
    }

    #[test]
    fn question_mark_means_retry() {
        let e = fails().unwrap_err();
        assert_eq!(e.kind(), &HandlerErrorKind::Retry { after: None });
        assert!(e.message().contains("No such file"), "{e}");
        assert!(HandlerError::fatal("bad input").is_fatal());
        assert_eq!(
            HandlerError::retry(Duration::from_secs(3)).kind(),
            &HandlerErrorKind::Retry {
                after: Some(Duration::from_secs(3))
            }
        );
        let busy = HandlerError::retry_msg("busy").after(Duration::from_secs(5));
        assert_eq!(busy.message(), "busy");
        let after = Some(Duration::from_secs(5));
        assert_eq!(busy.kind(), &HandlerErrorKind::Retry { after });
        assert!(HandlerError::fatal("no").after(Duration::from_secs(1)).is_fatal());
    }
}
