use jobworker::{HandlerError, JobContext};

#[jobworker::handler]
async fn nothing() -> Result<(), HandlerError> {
    Ok(())
}

#[jobworker::handler]
async fn three(_cx: JobContext, _a: u32, _b: u32) -> Result<(), HandlerError> {
    Ok(())
}

fn main() {}
