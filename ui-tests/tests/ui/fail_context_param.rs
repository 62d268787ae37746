use jobworker::{HandlerError, JobContext};

#[jobworker::handler]
async fn args_first(_args: String, _cx: JobContext) -> Result<(), HandlerError> {
    Ok(())
}

#[jobworker::handler]
async fn borrowed(_cx: &JobContext) -> Result<(), HandlerError> {
    Ok(())
}

#[jobworker::handler]
async fn borrowed_args(_cx: JobContext, _name: &str) -> Result<(), HandlerError> {
    Ok(())
}

fn main() {}
