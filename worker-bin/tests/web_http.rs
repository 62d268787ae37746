//! `jobworker web` over plain HTTP (the browser tests are in
//! `web_browser.rs`): security headers, read-only mode, credentials, CSRF
//! and other sites refused, escaping, no password shown, the live stream
//! and its end at shutdown, and ZooKeeper's pages.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::time::Duration;

use common::cli::private_redis;
use common::web::{csrf_of, WebApp};
use jobworker::redis::RedisBoard;
use jobworker::{Board, NewJob};
use jobworker_tests::{shared_zookeeper, unique_queue, wait_for_blocking};

const TOKEN: &str = "a-test-token-of-32-characters-xx";

fn paused(url: &str, q: &str) -> bool {
    tokio::runtime::Runtime::new().unwrap().block_on(async {
        let board = RedisBoard::connect(url).await.unwrap();
        board.settings(q).await.unwrap().paused
    })
}

fn post_job(url: &str, q: &str, args: serde_json::Value) -> String {
    tokio::runtime::Runtime::new().unwrap().block_on(async {
        let board = RedisBoard::connect(url).await.unwrap();
        let job = NewJob::new("scripted").args(&args).unwrap();
        board.post(q, job).await.unwrap().as_str().to_owned()
    })
}

#[test]
fn every_response_is_locked_down_and_a_read_only_app_refuses_actions() {
    let redis = private_redis();
    let q = unique_queue("web-ro");
    post_job(&redis.url(), &q, serde_json::json!({"action": "ok"}));
    let app = WebApp::start(&redis.url(), &[], &[]);
    for path in [
        "/",
        &format!("/queues/{q}"),
        "/failed",
        "/workers",
        "/quarantine",
        "/static/app.js",
    ] {
        let r = app.get(path);
        assert_eq!(r.status, 200, "{path}: {}", r.body);
        let csp = &r.headers["content-security-policy"];
        assert!(
            csp.contains("default-src 'none'") && csp.contains("script-src 'self'"),
            "{path}: {csp}"
        );
        assert!(
            !csp.contains("unsafe-inline") && !csp.contains("unsafe-eval"),
            "{csp}"
        );
        assert_eq!(r.headers["x-content-type-options"], "nosniff");
        assert_eq!(r.headers["x-frame-options"], "DENY");
    }
    assert_eq!(app.get("/no/such/page").status, 404);
    let dash = app.get("/").body;
    assert!(dash.contains(&q) && dash.contains("read-only"), "{dash}");
    assert!(
        !dash.contains("name=\"csrf\""),
        "a read-only app shows no action forms"
    );
    let refused = app.post("/act/queue", &[], &format!("queue={q}&op=pause"));
    assert_eq!(refused.status, 403, "{}", refused.body);
    assert!(refused.body.contains("read-only"));
    assert!(!paused(&redis.url(), &q));
    app.stop();
}

#[test]
fn actions_need_credentials_a_csrf_token_and_the_same_site() {
    let redis = private_redis();
    let url = redis.url();
    let q = unique_queue("web-auth");
    post_job(&url, &q, serde_json::json!({"action": "ok"}));
    let app = WebApp::start(
        &url,
        &["--auth", "ops:s3cret", "--token-env", "JW_WEB_TOKEN"],
        &[("JW_WEB_TOKEN", TOKEN)],
    );
    let pause = format!("queue={q}&op=pause");
    // No credentials, wrong ones, or another site: refused, nothing done.
    assert_eq!(app.post("/act/queue", &[], &pause).status, 401);
    assert_eq!(
        app.post(
            "/act/queue",
            &[("authorization", "Bearer wrong-token-wrong-token")],
            &pause
        )
        .status,
        401
    );
    assert_eq!(
        app.post("/act/queue", &[("authorization", "Basic b3BzOm5vcGU=")], &pause)
            .status,
        401
    );
    let bearer = format!("Bearer {TOKEN}");
    let evil = app.post(
        "/act/queue",
        &[("authorization", &bearer), ("origin", "http://evil.example")],
        &pause,
    );
    assert_eq!(evil.status, 403, "{}", evil.body);
    assert!(!paused(&url, &q));
    // A bearer token, or a user and password, act (a script gets the
    // outcome as the status, not a redirect).
    let paused_now = app.post("/act/queue", &[("authorization", &bearer)], &pause);
    assert_eq!(paused_now.status, 200, "{}", paused_now.body);
    assert_eq!(paused_now.body, format!("queue {q} paused\n"));
    assert!(paused(&url, &q));
    // "ops:s3cret"
    let basic = "Basic b3BzOnMzY3JldA==";
    assert_eq!(
        app.post(
            "/act/queue",
            &[("authorization", basic)],
            &format!("queue={q}&op=resume")
        )
        .status,
        200
    );
    assert!(!paused(&url, &q));
    // A browser: signs in with the form, then needs the CSRF token.
    let login = app.get("/login").body;
    let csrf = csrf_of(&login);
    let bad = app.post("/login", &[], &format!("csrf={csrf}&user=ops&password=nope"));
    assert_eq!(bad.status, 401);
    let ok = app.post("/login", &[], &format!("csrf={csrf}&user=ops&password=s3cret"));
    assert_eq!(ok.status, 303, "{}", ok.body);
    let cookie = ok.headers["set-cookie"].split(';').next().unwrap().to_owned();
    assert!(
        ok.headers["set-cookie"].contains("HttpOnly") && ok.headers["set-cookie"].contains("SameSite=Strict")
    );
    let no_token = app.post("/act/queue", &[("cookie", &cookie)], &pause);
    assert_eq!(no_token.status, 403, "{}", no_token.body);
    assert!(!paused(&url, &q));
    let with_token = app.post(
        "/act/queue",
        &[("cookie", &cookie)],
        &format!("csrf={csrf}&{pause}"),
    );
    assert_eq!(with_token.status, 303);
    assert!(paused(&url, &q));
    app.stop();
}

#[test]
fn user_values_are_escaped_and_the_password_of_the_board_is_never_shown() {
    let redis = private_redis();
    let plain = redis.url();
    let q = unique_queue("web-esc");
    let id = post_job(
        &plain,
        &q,
        serde_json::json!({"action": "ok", "note": "<script>alert('x')</script>"}),
    );
    let client = redis::Client::open(plain.as_str()).unwrap();
    let mut con = client.get_connection().unwrap();
    redis::cmd("CONFIG")
        .arg("SET")
        .arg("requirepass")
        .arg("hunter2-password")
        .query::<()>(&mut con)
        .unwrap();
    let with_password = plain.replacen("redis://", "redis://:hunter2-password@", 1);
    let app = WebApp::start(&with_password, &[], &[]);
    let job = app.get(&format!("/queues/{q}/jobs/{id}"));
    assert_eq!(job.status, 200, "{}", job.body);
    assert!(job.body.contains("&lt;script&gt;alert("), "{}", job.body);
    assert!(!job.body.contains("<script>alert("));
    for path in [
        "/",
        &format!("/queues/{q}"),
        &format!("/queues/{q}/jobs/{id}"),
        "/metrics",
    ] {
        let r = app.get(path);
        assert!(!r.body.contains("hunter2"), "{path} shows the password");
    }
    assert!(app.get("/").body.contains(":***@"));
    app.stop();
}

/// Opens `GET /live?queue=q` on `app`; its lines come on the receiver.
fn open_live(app: &WebApp, q: &str) -> std::sync::mpsc::Receiver<String> {
    let mut s = TcpStream::connect(&app.addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    write!(s, "GET /live?queue={q} HTTP/1.1\r\nhost: {}\r\n\r\n", app.addr).unwrap();
    let mut lines = BufReader::new(s).lines();
    let status = lines.next().unwrap().unwrap();
    assert!(status.contains("200"), "{status}");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in lines.map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

/// Posts to `q` until the live stream `rx` shows one of those posts (the
/// subscription may start after the response, or be opened again).
fn post_until_seen(rx: &std::sync::mpsc::Receiver<String>, url: &str, q: &str) {
    wait_for_blocking(
        "a posted event on the live stream",
        Duration::from_secs(60),
        || {
            let id = post_job(url, q, serde_json::json!({"action": "ok"}));
            while let Ok(line) = rx.recv_timeout(Duration::from_millis(500)) {
                if line.starts_with("data:") && line.contains(&id) && line.contains("\"posted\"") {
                    return Some(());
                }
            }
            None
        },
    );
}

/// Waits until the live stream `rx` sends the line `want`.
fn wait_line(rx: &std::sync::mpsc::Receiver<String>, want: &str) {
    let end = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let left = end.saturating_duration_since(std::time::Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) if line == want => return,
            Ok(_) => {}
            Err(e) => panic!("the live stream never sent {want:?}: {e}"),
        }
    }
}

#[test]
fn the_live_stream_sends_the_board_events_and_ends_at_shutdown() {
    let redis = private_redis();
    let url = redis.url();
    let q = unique_queue("web-live");
    let app = WebApp::start(&url, &[], &[]);
    let rx = open_live(&app, &q);
    post_until_seen(&rx, &url, &q);
    // At shutdown the stream ends and the app exits (a stream left open
    // would hold the graceful shutdown).
    app.stop();
    let end = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        match rx.recv_timeout(Duration::from_secs(1)) {
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break,
            _ => assert!(std::time::Instant::now() < end, "the live stream did not end"),
        }
    }
}

/// The live stream outlasts a restart of the board's server: when its
/// subscription ends it says `reconnecting…`, subscribes again once the
/// server answers, says `live` and goes on with the events, on the same
/// response. A stream opened while the server is down is a stream too,
/// not an error page (on which a browser gives the stream up for good),
/// and a shutdown while they try to subscribe again still ends them.
#[test]
fn the_live_stream_follows_the_board_through_a_server_restart() {
    let mut redis = private_redis();
    let url = redis.url();
    let q = unique_queue("web-live-restart");
    let app = WebApp::start(&url, &[], &[]);
    let rx = open_live(&app, &q);
    post_until_seen(&rx, &url, &q);
    redis.stop().expect("stop the private redis-server");
    wait_line(&rx, "data: reconnecting…");
    let opened_while_down = open_live(&app, &q);
    wait_line(&opened_while_down, "data: reconnecting…");
    redis.restart().expect("start the private redis-server again");
    for stream in [&rx, &opened_while_down] {
        wait_line(stream, "data: live");
        post_until_seen(stream, &url, &q);
    }
    // A shutdown while the streams try to subscribe again ends them.
    redis.stop().expect("stop the private redis-server");
    wait_line(&rx, "data: reconnecting…");
    app.stop();
}

/// Seen: with the board down, a page and `/metrics` answered 502 after
/// 13–26 s (each call waited out the connection's reconnect attempts, and
/// was sent once more): past Prometheus' default 10 s scrape timeout, so
/// a scrape timed out rather than failed. They answer 503 within the
/// page deadline (8 s), and work again once the board is back.
#[test]
fn pages_and_metrics_fail_soon_while_the_board_is_down() {
    let mut redis = private_redis();
    let app = WebApp::start(&redis.url(), &[], &[]);
    assert_eq!(app.get("/metrics").status, 200);
    redis.stop().expect("stop the private redis-server");
    for path in ["/metrics", "/", "/failed"] {
        let asked = std::time::Instant::now();
        let r = app.get(path);
        let took = asked.elapsed();
        // 503 from the deadline, or 502 should the board's call fail
        // sooner.
        assert!(matches!(r.status, 502 | 503), "{path}: {} {}", r.status, r.body);
        // (The deadline is 8 s; what it cut short took 13 s or more.)
        assert!(took < Duration::from_secs(12), "{path} took {took:?}");
    }
    redis.restart().expect("start the private redis-server again");
    wait_for_blocking("the pages to work again", Duration::from_secs(60), || {
        (app.get("/metrics").status == 200 && app.get("/").status == 200).then_some(())
    });
    app.stop();
}

/// Seen: an action made by a script (a bearer token) that failed (an
/// unknown op, a job not found, a bad priority) answered 303, as one that
/// worked: a script could not tell. It gets the error's status and why;
/// a browser is still sent back to its page with the message.
#[test]
fn a_script_reads_an_actions_outcome_from_its_status() {
    let redis = private_redis();
    let q = unique_queue("web-script");
    let id = post_job(&redis.url(), &q, serde_json::json!({"action": "ok"}));
    let app = WebApp::start(
        &redis.url(),
        &["--token-env", "JW_WEB_TOKEN"],
        &[("JW_WEB_TOKEN", TOKEN)],
    );
    let bearer = format!("Bearer {TOKEN}");
    let act = |path: &str, form: &str| app.post(path, &[("authorization", &bearer)], form);
    let r = act("/act/job", &format!("queue={q}&id={id}&op=priority&value=HIGH"));
    assert_eq!(
        (r.status, r.body.as_str()),
        (200, format!("priority of job {id} set to HIGH\n").as_str())
    );
    for (path, form, status, says) in [
        (
            "/act/queue",
            format!("queue={q}&op=explode"),
            400,
            "unknown action",
        ),
        (
            "/act/failed",
            format!("queue={q}&op=explode"),
            400,
            "unknown action",
        ),
        (
            "/act/job",
            format!("queue={q}&id={id}&op=priority&value=URGENT"),
            400,
            "URGENT",
        ),
        (
            "/act/job",
            format!("queue={q}&id=no-such-job&op=trash"),
            404,
            "no-such-job",
        ),
        (
            "/act/jobs",
            format!("queue={q}&op=trash&ids={id}&ids=no-such-job"),
            404,
            "1 of 2",
        ),
    ] {
        let r = act(path, &form);
        assert_eq!(r.status, status, "{path} {form}: {}", r.body);
        assert!(
            r.body.starts_with("failed: ") && r.body.contains(says),
            "{path} {form}: {}",
            r.body
        );
    }
    app.stop();
}

/// Seen: any page showed the text of its `?msg=` (escaped), so a link
/// could make the app say "Session expired: sign in at https://evil…".
/// A page shows it only to a request from the app's own pages (the
/// browser sent back after an action).
#[test]
fn a_page_shows_a_message_only_from_the_apps_own_pages() {
    let redis = private_redis();
    let app = WebApp::start(&redis.url(), &[], &[]);
    let planted = "/?msg=Session%20expired%3A%20sign%20in%20elsewhere";
    let from_a_link = app.get(planted);
    assert_eq!(from_a_link.status, 200);
    assert!(
        !from_a_link.body.contains("Session expired"),
        "{}",
        from_a_link.body
    );
    let referer = format!("http://{}/queues", app.addr);
    // Nor with its key percent-encoded, as the pages decode it.
    let encoded = app.get("/?%6Dsg=Session%20expired");
    assert!(!encoded.body.contains("Session expired"), "{}", encoded.body);
    for own in [("sec-fetch-site", "same-origin"), ("referer", referer.as_str())] {
        let r = app.request("GET", planted, &[own], "");
        assert!(r.body.contains("Session expired"), "{own:?}: {}", r.body);
    }
    app.stop();
}

#[test]
fn on_zookeeper_the_pages_show_every_state() {
    let root = format!(
        "{}/{}",
        shared_zookeeper().connect_string(),
        unique_queue("web-zk")
    );
    let q = "zkq";
    let rt = tokio::runtime::Runtime::new().unwrap();
    let id = rt.block_on(async {
        let board =
            jobworker::zookeeper::ZooKeeperBoard::connect(jobworker::zookeeper::ZooKeeperOptions::new(&root))
                .await
                .unwrap();
        let bad = board.post(q, NewJob::new("scripted")).await.unwrap();
        let held = board
            .claim(&[q], "w", std::time::Duration::from_secs(60), 1)
            .await
            .unwrap()
            .remove(0);
        assert_eq!(held.lease.job(), &bad);
        board.trash(held.lease, "fatal: bad input").await.unwrap();
        let id = board.post(q, NewJob::new("scripted")).await.unwrap();
        board.post(q, NewJob::new("scripted")).await.unwrap();
        let waiting = board
            .post(q, NewJob::new("after").depends_on(id.clone()))
            .await
            .unwrap();
        (id.as_str().to_owned(), waiting.as_str().to_owned())
    });
    let (id, waiting) = id;
    let app = WebApp::start_on(&["--zookeeper", &root], &["--queues", q], &[]);
    let dash = app.get("/");
    assert_eq!(dash.status, 200, "{}", dash.body);
    let row = dash
        .body
        .split(&format!(">{q}</a>"))
        .nth(1)
        .expect("the queue's row")
        .to_owned();
    assert!(row.contains(">2</a>"), "two ready jobs counted: {row}");
    assert!(
        row.contains("?state=waiting\">1</a>"),
        "one waiting job counted: {row}"
    );
    assert!(
        !row.contains("not kept by this backend"),
        "every state is kept: {row}"
    );
    let page = app.get(&format!("/queues/{q}/jobs/{waiting}"));
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(
        page.body.contains("waiting") && page.body.contains(&id),
        "{}",
        page.body
    );
    // Throughput and statistics are kept on ZooKeeper too.
    assert!(
        !dash.body.contains("Not available on this board"),
        "{}",
        dash.body
    );
    let job = app.get(&format!("/queues/{q}/jobs/{id}"));
    assert_eq!(job.status, 200, "{}", job.body);
    assert!(job.body.contains(&id));
    let queue = app.get(&format!("/queues/{q}"));
    // Pause and limits are kept on ZooKeeper too.
    assert!(
        queue.body.contains(&id) && queue.body.contains("limit: none") && queue.body.contains("queue-state"),
        "{}",
        queue.body
    );
    // Failure groups are kept on ZooKeeper too.
    let failed = app.get("/failed");
    let groups = failed
        .body
        .split("id=\"failure-groups\"")
        .nth(1)
        .expect("the failure groups table");
    assert!(
        groups.contains(">fatal<") && groups.contains(">1<"),
        "{}",
        failed.body
    );
    assert_eq!(app.get("/workers").status, 200);
    app.stop();
}

/// `/metrics` of the web app, scraped over HTTP and parsed by a Prometheus
/// text parser, matches the board after a known workload (and needs no
/// credentials, also with `--metrics-only`, which serves nothing else).
#[test]
fn metrics_are_scraped_and_match_the_board() {
    let redis = private_redis();
    let url = redis.url();
    let q = unique_queue("web-metrics");
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let board = RedisBoard::connect(&url).await.unwrap();
        for _ in 0..7 {
            board.post(&q, NewJob::new("scripted")).await.unwrap();
        }
        board
            .post(&q, NewJob::new("scripted").delay(Duration::from_secs(3600)))
            .await
            .unwrap();
        let claimed = board
            .claim(&[q.as_str()], "metrics-test", Duration::from_secs(600), 4)
            .await
            .unwrap();
        let mut leases = claimed.into_iter().map(|c| c.lease);
        board.consume(leases.next().unwrap()).await.unwrap();
        board.consume(leases.next().unwrap()).await.unwrap();
        board
            .trash(leases.next().unwrap(), "fatal: bad input")
            .await
            .unwrap();
        let _held = leases.next().unwrap();
    });
    for args in [&["--auth", "ops:pw"][..], &["--metrics-only"][..]] {
        let app = WebApp::start(&url, args, &[]);
        let r = app.get("/metrics");
        assert_eq!(r.status, 200, "{}", r.body);
        assert!(
            r.headers["content-type"].contains("openmetrics-text"),
            "{:?}",
            r.headers
        );
        let scrape = prometheus_parse::Scrape::parse(r.body.lines().map(|l| Ok(l.to_owned())))
            .expect("parse /metrics");
        let value = |metric: &str, labels: &[(&str, &str)]| -> f64 {
            let found = scrape.samples.iter().find(|s| {
                s.metric == metric
                    && s.labels.get("queue") == Some(q.as_str())
                    && labels.iter().all(|(k, v)| s.labels.get(k) == Some(*v))
            });
            match found.map(|s| &s.value) {
                Some(
                    prometheus_parse::Value::Gauge(v)
                    | prometheus_parse::Value::Counter(v)
                    | prometheus_parse::Value::Untyped(v),
                ) => *v,
                other => panic!("{metric} {labels:?}: {other:?}\n{}", r.body),
            }
        };
        assert_eq!(value("jobworker_jobs", &[("state", "ready")]), 3.0);
        assert_eq!(value("jobworker_jobs", &[("state", "scheduled")]), 1.0);
        assert_eq!(value("jobworker_jobs", &[("state", "claimed")]), 1.0);
        assert_eq!(value("jobworker_jobs", &[("state", "completed")]), 2.0);
        assert_eq!(value("jobworker_jobs", &[("state", "trashed")]), 1.0);
        assert_eq!(value("jobworker_jobs_completed_total", &[]), 2.0);
        assert_eq!(value("jobworker_jobs_failed_total", &[]), 1.0);
        assert_eq!(value("jobworker_queue_paused", &[]), 0.0);
        if args == ["--metrics-only"] {
            assert_eq!(app.get("/").status, 404, "--metrics-only serves only /metrics");
        }
        app.stop();
    }
}

/// A selection (`ids` repeated in the form) is retried or purged, and only
/// the selected jobs are touched.
#[test]
fn a_selection_of_trashed_jobs_is_retried_or_purged() {
    let redis = private_redis();
    let url = redis.url();
    let q = unique_queue("web-select");
    let rt = tokio::runtime::Runtime::new().unwrap();
    let ids: Vec<String> = rt.block_on(async {
        let board = RedisBoard::connect(&url).await.unwrap();
        let mut ids = Vec::new();
        for _ in 0..3 {
            let id = board.post(&q, NewJob::new("scripted")).await.unwrap();
            let c = board
                .claim_job(&q, &id, "w", Some(Duration::from_secs(600)))
                .await
                .unwrap();
            board.trash(c.lease, "boom").await.unwrap();
            ids.push(id.as_str().to_owned());
        }
        ids
    });
    let app = WebApp::start(&url, &["--token-env", "JW_WEB_TOKEN"], &[("JW_WEB_TOKEN", TOKEN)]);
    let bearer = format!("Bearer {TOKEN}");
    let purge = format!("queue={q}&op=purge&ids={}&ids={}", ids[0], ids[1]);
    let r = app.post("/act/jobs", &[("authorization", &bearer)], &purge);
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(r.body.contains("purge: 2 of 2"), "{}", r.body);
    let retry = format!("queue={q}&op=retry&ids={}", ids[2]);
    assert_eq!(
        app.post("/act/jobs", &[("authorization", &bearer)], &retry)
            .status,
        200
    );
    rt.block_on(async {
        let board = RedisBoard::connect(&url).await.unwrap();
        for id in &ids[..2] {
            let gone = board.state(&q, &jobworker::JobId::from(id.as_str())).await;
            assert!(matches!(gone, Err(e) if e.is_not_found()), "{id} purged");
        }
        let state = board
            .state(&q, &jobworker::JobId::from(ids[2].as_str()))
            .await
            .unwrap();
        assert_eq!(state, jobworker::JobState::Ready);
    });
    app.stop();
}
