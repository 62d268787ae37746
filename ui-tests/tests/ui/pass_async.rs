//! An async handler with typed arguments and every option.

use std::time::Duration;

use jobworker::{HandlerError, HandlerFn, JobContext, Registry};
use serde::{Deserialize, Serialize};

#[derive(Debug, Serialize, Deserialize)]
pub struct Resize {
    pub width: u32,
    pub height: u32,
}

#[jobworker::handler(name = "resize", queue = "images", timeout = "30s", max_attempts = 5, start_on_loop = true, crate = ::jobworker)]
async fn resize(cx: JobContext, args: Resize) -> Result<(), HandlerError> {
    cx.log(&format!("{}x{}", args.width, args.height));
    Ok(())
}

/// Default options but an explicit `start_on_loop = false`; a compound
/// timeout.
#[jobworker::handler(timeout = "1m30s", start_on_loop = false)]
pub async fn thumbnail(_: JobContext, _args: Vec<String>) -> jobworker::Result<(), HandlerError> {
    Ok(())
}

fn assert_send<T: Send>(_: T) {}

/// Never called: checks that `post` type-checks with a real board and is `Send`.
#[allow(dead_code)]
fn post_is_send(board: &jobworker::AnyBoard, args: &Resize) {
    assert_send(resize::post(board, args));
    assert_send(thumbnail::post(board, &vec!["a".to_owned()]));
}

fn main() {
    let registry = Registry::load().unwrap();
    let entry = registry.get("resize").expect("resize is registered");
    assert_eq!(entry.queue, "images");
    assert_eq!(entry.timeout, Some(Duration::from_secs(30)));
    assert_eq!(entry.max_attempts, Some(5));
    assert!(matches!(entry.run, HandlerFn::StartOnLoop(_)));
    assert!(entry.file.ends_with("pass_async.rs"), "{}", entry.file);

    let entry = registry.get("thumbnail").expect("thumbnail is registered");
    assert_eq!(entry.queue, "default");
    assert_eq!(entry.timeout, Some(Duration::from_secs(90)));
    assert_eq!(entry.max_attempts, None);
    assert!(matches!(entry.run, HandlerFn::Async(_)));

    assert_eq!(resize::NAME, "resize");
    assert_eq!(resize::QUEUE, "images");
    let job = resize::job(&Resize {
        width: 640,
        height: 480,
    })
    .unwrap();
    assert_eq!(job.name, "resize");
    assert_eq!(job.max_attempts, 5);
    let expected = jobworker::__private::rmpv::Value::Map(vec![
        ("width".into(), 640.into()),
        ("height".into(), 480.into()),
    ]);
    assert_eq!(job.args, expected);

    let job = thumbnail::job(&vec!["x".to_owned()]).unwrap();
    assert_eq!(job.name, "thumbnail");
    assert_eq!(job.max_attempts, jobworker::NewJob::new("any").max_attempts);
}
