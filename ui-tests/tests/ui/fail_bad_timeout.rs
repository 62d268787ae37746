use jobworker::{HandlerError, JobContext};

#[jobworker::handler(timeout = "30 parsecs")]
async fn far(_cx: JobContext) -> Result<(), HandlerError> {
    Ok(())
}

#[jobworker::handler(timeout = "0s")]
async fn instant(_cx: JobContext) -> Result<(), HandlerError> {
    Ok(())
}

#[jobworker::handler(timeout = 30)]
async fn unitless(_cx: JobContext) -> Result<(), HandlerError> {
    Ok(())
}

fn main() {}
