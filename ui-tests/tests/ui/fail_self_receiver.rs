use jobworker::{HandlerError, JobContext};

struct Service;

impl Service {
    #[jobworker::handler]
    async fn run(&self, _cx: JobContext) -> Result<(), HandlerError> {
        Ok(())
    }
}

fn main() {}
