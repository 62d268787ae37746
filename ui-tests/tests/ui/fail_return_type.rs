use jobworker::{HandlerError, JobContext};

#[jobworker::handler]
async fn nothing(_cx: JobContext) {}

#[jobworker::handler]
fn option(_cx: JobContext) -> Option<()> {
    None
}

#[jobworker::handler]
async fn value(_cx: JobContext) -> Result<String, HandlerError> {
    Ok(String::new())
}

fn main() {}
