// Errors the type checker finds point at the user's tokens too.
use jobworker::{HandlerError, JobContext};

#[jobworker::handler]
async fn io_result(_cx: JobContext) -> std::io::Result<()> {
    Ok(())
}

#[jobworker::handler]
fn sync_io_result(_cx: JobContext, _path: String) -> Result<(), std::io::Error> {
    Ok(())
}

#[jobworker::handler]
async fn not_send(_cx: JobContext) -> Result<(), HandlerError> {
    let rc = std::rc::Rc::new(1);
    tokio::task::yield_now().await;
    drop(rc);
    Ok(())
}

fn main() {}
