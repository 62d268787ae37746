use jobworker::{HandlerError, JobContext};

// A plain fn runs on a blocking thread: it has no first step to start on the loop.
#[jobworker::handler(start_on_loop = true)]
fn blocking(_cx: JobContext) -> Result<(), HandlerError> {
    Ok(())
}

#[jobworker::handler(start_on_loop = "yes")]
async fn quoted(_cx: JobContext) -> Result<(), HandlerError> {
    Ok(())
}

// `false` asks for nothing, on any handler.
#[jobworker::handler(start_on_loop = false)]
fn plain(_cx: JobContext) -> Result<(), HandlerError> {
    Ok(())
}

fn main() {}
