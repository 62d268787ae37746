//! The jobs of the example web service: their argument types and their
//! handlers, linked into the worker (`web-service-worker`) and used by the
//! app (`web-service-app`) through the typed helpers the attribute writes
//! (`welcome::post`).

use jobworker::{Board, HandlerError, JobContext};
use serde::{Deserialize, Serialize};

/// The queue of the email jobs.
pub const EMAILS: &str = "emails";

/// A welcome email to send.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Welcome {
    /// The new user's address.
    pub email: String,
}

/// Sends the welcome email (here: writes it into the sandbox and logs
/// it), then asks for the first digest a day later. An address without
/// `@` can never be sent to: the job goes to the trash.
#[jobworker::handler(queue = "emails", timeout = "30s", max_attempts = 5)]
pub async fn welcome(cx: JobContext, args: Welcome) -> Result<(), HandlerError> {
    if !args.email.contains('@') {
        return Err(HandlerError::fatal(format!(
            "not an email address: {}",
            args.email
        )));
    }
    let mail = format!("To: {}\n\nWelcome aboard!\n", args.email);
    std::fs::write(cx.sandbox().join("welcome.eml"), mail)?;
    cx.log(&format!("welcomed {}", args.email));
    let digest = digest::job(&Digest { email: args.email })?.delay(std::time::Duration::from_secs(86_400));
    cx.board().post(EMAILS, digest).await?;
    Ok(())
}

/// A daily digest to send.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Digest {
    /// The address.
    pub email: String,
}

/// Sends the daily digest (here: logs it).
#[jobworker::handler(queue = "emails")]
pub async fn digest(cx: JobContext, args: Digest) -> Result<(), HandlerError> {
    cx.log(&format!("digest for {}", args.email));
    Ok(())
}
