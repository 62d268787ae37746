//! The example web service's `jobworker`: the library's command line with
//! the service's handlers linked in (`--queues emails --workers 2`).

use web_service_jobs as _; // links the handlers: without this line they are not registered

fn main() {
    jobworker::cli::main()
}
