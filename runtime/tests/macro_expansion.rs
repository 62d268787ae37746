//! `#[jobworker::handler]` end to end: the registry entries it submits, the
//! typed helpers, and the generated runners called with a real context.

use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Duration;

use jobworker::embedded::RedisServer;
use jobworker::redis::RedisBoard;
use jobworker::{
    AnyBoard, Board, CancelFlag, Claimed, HandlerError, HandlerErrorKind, HandlerFn, JobContext, JobId,
    Lease, Registry,
};
use rmpv::Value;
use serde::{Deserialize, Serialize};

/// What the handlers saw, as `"<handler> <detail>"`.
static SEEN: Mutex<Vec<String>> = Mutex::new(Vec::new());

fn seen(line: String) {
    SEEN.lock().unwrap().push(line);
}

fn take_seen() -> Vec<String> {
    std::mem::take(&mut *SEEN.lock().unwrap())
}

#[derive(Debug, Serialize, Deserialize)]
struct Resize {
    width: u32,
    height: u32,
}

#[jobworker::handler(name = "resize", queue = "images", timeout = "30s", max_attempts = 3)]
async fn resize(cx: JobContext, args: Resize) -> Result<(), HandlerError> {
    tokio::task::yield_now().await;
    seen(format!(
        "resize {} {}x{} attempt {}",
        cx.name(),
        args.width,
        args.height,
        cx.attempt()
    ));
    Ok(())
}

#[jobworker::handler(name = "resize-sync", timeout = "1m30s")]
fn resize_sync(cx: JobContext, args: Resize) -> Result<(), HandlerError> {
    seen(format!(
        "resize-sync {} {}x{}",
        cx.name(),
        args.width,
        args.height
    ));
    Ok(())
}

#[jobworker::handler]
async fn flaky(_cx: JobContext, path: String) -> Result<(), HandlerError> {
    std::fs::read(&path)?;
    Ok(())
}

#[jobworker::handler(queue = "blocking")]
fn flaky_sync(_: JobContext, path: PathBuf) -> Result<(), HandlerError> {
    std::fs::read(path)?;
    Ok(())
}

#[jobworker::handler(max_attempts = 7)]
async fn ping(cx: JobContext) -> Result<(), HandlerError> {
    seen(format!("ping attempt {} of {}", cx.attempt(), cx.max_attempts()));
    Err(HandlerError::retry(Duration::from_secs(2)))
}

#[jobworker::handler]
fn ping_sync(_: JobContext) -> Result<(), HandlerError> {
    Err(HandlerError::fatal("nothing to do"))
}

async fn run(entry_name: &str, cx: JobContext, args: Value) -> Result<(), HandlerError> {
    let registry = Registry::load().unwrap();
    let entry = registry
        .get(entry_name)
        .unwrap_or_else(|| panic!("{entry_name} is registered"));
    match entry.run {
        HandlerFn::Async(f) | HandlerFn::StartOnLoop(f) => f(cx, args).await,
        HandlerFn::Blocking(f) => tokio::task::spawn_blocking(move || f(cx, args)).await.unwrap(),
    }
}

fn context(board: &AnyBoard, name: &str, lease: Lease, attempt: u32, max_attempts: u32) -> JobContext {
    let claimed = Claimed {
        lease,
        name: name.to_owned(),
        args: Value::Nil,
        details: Value::Map(Vec::new()),
        book: None,
        attempt,
        max_attempts,
        priority: jobworker::Priority::NORMAL,
        suspect: false,
    };
    JobContext::new(
        &claimed,
        std::env::temp_dir(),
        CancelFlag::default(),
        board.clone(),
    )
}

fn some_lease(queue: &str) -> Lease {
    Lease::new(queue, JobId::random(), "macro-test", 1)
}

fn resize_args(width: i64, height: i64) -> Value {
    Value::Map(vec![
        (Value::from("width"), Value::from(width)),
        (Value::from("height"), Value::from(height)),
    ])
}

#[test]
fn registry_lists_every_handler_with_its_options() {
    let registry = Registry::load().unwrap();
    let get = |name: &str| {
        *registry
            .get(name)
            .unwrap_or_else(|| panic!("{name} is registered"))
    };

    let e = get("resize");
    assert_eq!((e.name, e.queue), ("resize", "images"));
    assert_eq!(e.timeout, Some(Duration::from_secs(30)));
    assert_eq!(e.max_attempts, Some(3));
    assert!(matches!(e.run, HandlerFn::Async(_)));
    assert!(e.file.ends_with("macro_expansion.rs"), "{}", e.file);
    assert!(e.line > 0);

    let e = get("resize-sync");
    assert_eq!(e.queue, "default");
    assert_eq!(e.timeout, Some(Duration::from_secs(90)));
    assert_eq!(e.max_attempts, None);
    assert!(matches!(e.run, HandlerFn::Blocking(_)));

    assert!(matches!(get("flaky").run, HandlerFn::Async(_)));
    assert_eq!(get("flaky_sync").queue, "blocking");
    assert!(matches!(get("flaky_sync").run, HandlerFn::Blocking(_)));
    assert_eq!(get("ping").max_attempts, Some(7));
    assert!(matches!(get("ping_sync").run, HandlerFn::Blocking(_)));
}

#[test]
fn typed_helpers_build_jobs() {
    assert_eq!((resize::NAME, resize::QUEUE), ("resize", "images"));
    assert_eq!((flaky_sync::NAME, flaky_sync::QUEUE), ("flaky_sync", "blocking"));
    let job = resize::job(&Resize { width: 3, height: 4 }).unwrap();
    assert_eq!(job.name, "resize");
    assert_eq!(job.max_attempts, 3);
    assert_eq!(job.args, resize_args(3, 4));
    let job = ping::job(&()).unwrap();
    assert_eq!(
        (job.name.as_str(), job.max_attempts, &job.args),
        ("ping", 7, &Value::Nil)
    );
    let default_attempts = jobworker::NewJob::new("x").max_attempts;
    assert_eq!(
        resize_sync::job(&Resize { width: 1, height: 1 })
            .unwrap()
            .max_attempts,
        default_attempts
    );
}

#[tokio::test]
async fn runners_decode_arguments_and_map_errors() {
    let server = RedisServer::start(Default::default()).unwrap();
    let board = AnyBoard::Redis(RedisBoard::connect(&server.url()).await.unwrap());

    // Posted with the typed helper, claimed, and run with the claim's payload.
    let id = resize::post(
        &board,
        &Resize {
            width: 640,
            height: 480,
        },
    )
    .await
    .unwrap();
    let claimed = board
        .claim(&["images"], "macro-test", Duration::from_secs(30), 1)
        .await
        .unwrap();
    assert_eq!(claimed.len(), 1);
    let claimed = claimed.into_iter().next().unwrap();
    assert_eq!(*claimed.lease.job(), id);
    assert_eq!(claimed.name, "resize");
    assert_eq!(claimed.max_attempts, 3);
    assert_eq!(claimed.args, resize_args(640, 480));
    let cx = context(
        &board,
        &claimed.name,
        Lease::new(
            claimed.lease.queue(),
            claimed.lease.job().clone(),
            claimed.lease.owner(),
            claimed.lease.token(),
        ),
        claimed.attempt,
        claimed.max_attempts,
    );
    run("resize", cx, claimed.args.clone()).await.unwrap();
    assert_eq!(take_seen(), ["resize resize 640x480 attempt 1"]);
    board.consume(claimed.lease).await.unwrap();

    // A struct from a msgpack map, through the blocking runner.
    let cx = context(&board, "resize-sync", some_lease("default"), 1, 5);
    run("resize-sync", cx, resize_args(7, 9)).await.unwrap();
    assert_eq!(take_seen(), ["resize-sync resize-sync 7x9"]);

    // A payload that does not decode is fatal, for both kinds.
    for (name, payload) in [
        ("resize", Value::from("not a map")),
        (
            "resize-sync",
            Value::Map(vec![(Value::from("width"), Value::from("wide"))]),
        ),
        ("flaky", Value::from(12)),
    ] {
        let cx = context(&board, name, some_lease("default"), 1, 5);
        let err = run(name, cx, payload).await.unwrap_err();
        assert!(err.is_fatal(), "{name}: {err}");
        assert!(
            err.message().contains("cannot decode the arguments"),
            "{name}: {err}"
        );
        assert!(err.message().contains(name), "{name}: {err}");
    }
    assert!(take_seen().is_empty());

    // `?` on an io error is a retry, for both kinds.
    for name in ["flaky", "flaky_sync"] {
        let cx = context(&board, name, some_lease("default"), 1, 5);
        let err = run(name, cx, Value::from("/no/such/file/anywhere"))
            .await
            .unwrap_err();
        assert_eq!(
            err.kind(),
            &HandlerErrorKind::Retry { after: None },
            "{name}: {err}"
        );
        assert!(err.message().contains("No such file"), "{name}: {err}");
    }

    // Context-only handlers ignore the payload; their errors pass through.
    let cx = context(&board, "ping", some_lease("default"), 2, 7);
    let err = run("ping", cx, resize_args(1, 1)).await.unwrap_err();
    assert_eq!(
        err.kind(),
        &HandlerErrorKind::Retry {
            after: Some(Duration::from_secs(2))
        }
    );
    assert_eq!(take_seen(), ["ping attempt 2 of 7"]);
    let cx = context(&board, "ping_sync", some_lease("default"), 1, 1);
    let err = run("ping_sync", cx, Value::Nil).await.unwrap_err();
    assert!(err.is_fatal() && err.message() == "nothing to do", "{err}");

    // The posting helper of a context-only handler.
    ping::post(&board, &()).await.unwrap();
    let claimed = board
        .claim(&["default"], "macro-test", Duration::from_secs(30), 1)
        .await
        .unwrap();
    assert_eq!(claimed[0].name, "ping");
    assert_eq!(claimed[0].max_attempts, 7);
}
