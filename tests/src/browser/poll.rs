//! Retrying a WebDriver step until it succeeds, with the page in the panic.

use std::time::Duration;

use fantoccini::error::CmdError;
use fantoccini::{Client, Locator};
use tokio::time::Instant;

use super::{Browser, WAIT};

/// The pause between two tries: one WebDriver round trip each, so not too
/// often on a busy machine.
const RETRY_EVERY: Duration = Duration::from_millis(50);

/// How long the panic message waits for the page's URL and text.
const REPORT_WAIT: Duration = Duration::from_secs(5);

impl Browser {
    /// Calls `step` until it returns `Ok(Some(_))`, for up to [`WAIT`].
    ///
    /// Errors that may go away (no such element, stale element, not
    /// interactable, no dialog yet) mean "not yet"; others (a bad selector,
    /// chromedriver or the session gone) panic at once. On timeout, panics with `what`, the last error, the URL
    /// and the page's text.
    pub(super) async fn poll<T>(
        &self,
        what: &str,
        mut step: impl AsyncFnMut(&Client) -> Result<Option<T>, CmdError>,
    ) -> T {
        let client = self.client();
        let deadline = Instant::now() + WAIT;
        let mut last = String::from("none");
        loop {
            match tokio::time::timeout_at(deadline, step(client)).await {
                Ok(Ok(Some(found))) => return found,
                Ok(Ok(None)) => {}
                Ok(Err(e)) if retryable(&e) => last = e.to_string(),
                Ok(Err(e)) => panic!("{what}: {e}{}", self.report().await),
                Err(_) => {}
            }
            if Instant::now() >= deadline {
                panic!(
                    "{what}: not done after {WAIT:?} (last error: {last}){}",
                    self.report().await
                );
            }
            tokio::time::sleep(RETRY_EVERY).await;
        }
    }

    /// The URL and the visible text of the page, for a panic message.
    async fn report(&self) -> String {
        let client = self.client();
        let url = tokio::time::timeout(REPORT_WAIT, client.current_url()).await;
        let url = match url {
            Ok(Ok(url)) => url.to_string(),
            Ok(Err(e)) => format!("<{e}>"),
            Err(_) => "<no answer>".into(),
        };
        let text = tokio::time::timeout(REPORT_WAIT, async {
            client.find(Locator::Css("body")).await?.text().await
        })
        .await;
        let text = match text {
            Ok(Ok(text)) => text,
            Ok(Err(e)) => format!("<{e}>"),
            Err(_) => "<no answer>".into(),
        };
        format!("\n--- page {url} ---\n{text}\n--- end of page ---")
    }
}

/// A WebDriver error that may go away while the page loads or changes
/// (not there yet, replaced, covered, no dialog yet). Others (a bad
/// selector, a lost session or connection) will not, and panic at once.
///
/// Chromedriver reports an element whose page was replaced between finding
/// and reading it either as a stale element or, when the navigation lands
/// mid-command, as an "unknown error" from the inspector saying the node
/// "does not belong to the document" (seen in CI); both mean "not yet".
fn retryable(e: &CmdError) -> bool {
    use fantoccini::error::ErrorStatus::*;
    let CmdError::Standard(e) = e else { return false };
    match e.error {
        NoSuchElement
        | StaleElementReference
        | ElementNotInteractable
        | ElementClickIntercepted
        | InvalidElementState
        | NoSuchAlert
        | UnexpectedAlertOpen => true,
        UnknownError => e.message.contains(NODE_REPLACED),
        _ => false,
    }
}

/// Chromedriver's words for a node of a page that navigation replaced.
const NODE_REPLACED: &str = "does not belong to the document";

#[cfg(test)]
mod tests {
    use fantoccini::error::{CmdError, ErrorStatus, WebDriver};

    use super::retryable;

    fn error(status: ErrorStatus, message: &'static str) -> CmdError {
        CmdError::Standard(WebDriver::new(status, message))
    }

    #[test]
    fn a_node_replaced_by_navigation_is_retried_and_other_unknown_errors_are_not() {
        let replaced = "unhandled inspector error: {\"code\":-32000,\"message\":\
                        \"Node with given id does not belong to the document\"}";
        assert!(retryable(&error(ErrorStatus::UnknownError, replaced)));
        assert!(retryable(&error(ErrorStatus::StaleElementReference, "stale")));
        assert!(!retryable(&error(
            ErrorStatus::UnknownError,
            "chrome not reachable"
        )));
        assert!(!retryable(&error(ErrorStatus::InvalidSelector, "bad css")));
    }
}
