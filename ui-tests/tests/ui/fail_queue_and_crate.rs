use jobworker::{HandlerError, JobContext};

#[jobworker::handler(queue = "images:large")]
async fn colon(_cx: JobContext) -> Result<(), HandlerError> {
    Ok(())
}

#[jobworker::handler(queue = "")]
async fn empty(_cx: JobContext) -> Result<(), HandlerError> {
    Ok(())
}

#[jobworker::handler(crate = "jobworker")]
async fn quoted_crate(_cx: JobContext) -> Result<(), HandlerError> {
    Ok(())
}

#[jobworker::handler(queue)]
async fn no_value(_cx: JobContext) -> Result<(), HandlerError> {
    Ok(())
}

fn main() {}
