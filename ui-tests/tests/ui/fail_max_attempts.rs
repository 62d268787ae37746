use jobworker::{HandlerError, JobContext};

#[jobworker::handler(max_attempts = 0)]
async fn never(_cx: JobContext) -> Result<(), HandlerError> {
    Ok(())
}

#[jobworker::handler(max_attempts = "5")]
async fn quoted(_cx: JobContext) -> Result<(), HandlerError> {
    Ok(())
}

#[jobworker::handler(max_attempts = 5000000000)]
async fn huge(_cx: JobContext) -> Result<(), HandlerError> {
    Ok(())
}

fn main() {}
