use jobworker::{HandlerError, JobContext};

#[jobworker::handler(timeout = "10s", name = "twice", timeout = "20s")]
async fn twice(_cx: JobContext) -> Result<(), HandlerError> {
    Ok(())
}

fn main() {}
