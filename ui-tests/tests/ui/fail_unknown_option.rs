use jobworker::{HandlerError, JobContext};

#[jobworker::handler(nmae = "resize")]
async fn resize(_cx: JobContext) -> Result<(), HandlerError> {
    Ok(())
}

fn main() {}
