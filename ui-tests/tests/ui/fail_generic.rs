use jobworker::{HandlerError, JobContext};

#[jobworker::handler]
async fn generic<T: serde::de::DeserializeOwned>(_cx: JobContext, _args: T) -> Result<(), HandlerError> {
    Ok(())
}

#[jobworker::handler]
fn with_lifetime<'a>(_cx: JobContext) -> Result<(), HandlerError> {
    Ok(())
}

fn main() {}
