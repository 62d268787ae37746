use jobworker::{HandlerError, JobContext};

#[jobworker::handler(name = resize)]
async fn resize(_cx: JobContext) -> Result<(), HandlerError> {
    Ok(())
}

#[jobworker::handler(name = "")]
async fn empty(_cx: JobContext) -> Result<(), HandlerError> {
    Ok(())
}

fn main() {}
