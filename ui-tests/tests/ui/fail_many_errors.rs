use jobworker::JobContext;

// Every problem is reported at once.
#[jobworker::handler(nmae = "x", timeout = "soon", max_attempts = 0)]
async fn everything_wrong<T>(_cx: JobContext, _args: T) {}

fn main() {}
