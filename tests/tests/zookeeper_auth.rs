//! Digest authentication and ACLs on the ZooKeeper board: with credentials
//! (`user:password@host:port/root`) every znode jobworker creates is
//! creator-only, plus read for a configured identity. Checked with kazoo
//! (Python's ZooKeeper client, as an operator's script would), with
//! jobworker boards without or with wrong credentials, and with real
//! taskflow 6.5.0 authenticating with the same digest.

use std::time::Duration;

use jobworker::zookeeper::{ZooKeeperBoard, ZooKeeperOptions};
use jobworker::{Board, JobState, NewJob};
use jobworker_tests::{run_python_async, shared_zookeeper, unique_queue};
use serde_json::{json, Value};

const LONG: Duration = Duration::from_secs(120);

/// kazoo and taskflow against one queue path; prints one JSON line.
///
/// `AUTH` is `user:password` (the session authenticates with that digest
/// and creates its znodes with `make_digest_acl(user, password, all=True)`,
/// what a taskflow deployment with credentials configures) or `-` (none).
const SCRIPT: &str = r#"
import json, sys
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError
from kazoo.security import make_digest_acl
from taskflow.jobs.backends import impl_zookeeper

hosts, path, auth, command, *args = sys.argv[1:]
kwargs = {}
if auth != "-":
    user, password = auth.split(":", 1)
    kwargs = {"auth_data": [("digest", auth)], "default_acl": [make_digest_acl(user, password, all=True)]}
client = KazooClient(hosts=hosts, **kwargs)
client.start()

def attempt(call):
    try:
        call()
        return "ok"
    except NoAuthError:
        return "NoAuth"

try:
    if command == "probe":
        # What a client with these credentials may do to the job znodes.
        child, record = args
        job = path + "/" + child
        out = {
            "list": attempt(lambda: client.get_children(path)),
            "read": attempt(lambda: client.get(job)),
            "read_record": attempt(lambda: client.get(record)),
            "write": attempt(lambda: client.set(job, b"{}")),
            "delete": attempt(lambda: client.delete(job)),
            "create": attempt(lambda: client.create(path + "/intruder", b"")),
        }
    else:
        board = impl_zookeeper.ZookeeperJobBoard("auth", {"path": path}, client=client)
        board.connect()
        try:
            if command == "post":
                name, = args
                out = {"uuid": board.post(name, details={"args": {"n": 1}}).uuid}
            elif command == "take":
                # Claims and consumes the one job it lists.
                jobs = list(board.iterjobs(ensure_fresh=True))
                for job in jobs:
                    board.claim(job, "tf-1")
                    board.consume(job, "tf-1")
                out = {"taken": [job.uuid for job in jobs]}
            else:
                raise SystemExit("unknown command %r" % command)
        finally:
            board.close()
finally:
    client.stop()
print(json.dumps(out))
"#;

/// A queue on a fresh root of the shared ZooKeeper.
struct Setup {
    root: String,
    q: String,
}

impl Setup {
    fn new(name: &str) -> Setup {
        Setup {
            root: unique_queue(&format!("zk-auth-{name}")),
            q: unique_queue(name),
        }
    }

    /// A board with `credentials` (`user:password`, or `""` for none).
    async fn board(&self, credentials: &str, reader: Option<&str>) -> ZooKeeperBoard {
        let at = if credentials.is_empty() {
            String::new()
        } else {
            format!("{credentials}@")
        };
        let mut opts = ZooKeeperOptions::new(format!(
            "{at}{}/{}",
            shared_zookeeper().connect_string(),
            self.root
        ));
        opts.reader = reader.map(str::to_owned);
        ZooKeeperBoard::connect(opts).await.unwrap()
    }

    /// Runs [`SCRIPT`] with `auth` on the queue's taskflow path.
    async fn python(&self, board: &ZooKeeperBoard, auth: &str, args: &[&str]) -> Value {
        let hosts = shared_zookeeper().connect_string();
        let path = board.jobs_path(&self.q).unwrap();
        let mut all = vec![hosts.as_str(), path.as_str(), auth];
        all.extend_from_slice(args);
        run_python_async(SCRIPT, &all).await.json()
    }

    /// Posts one job with `board`: its job znode's name and its record's
    /// path.
    async fn post(&self, board: &ZooKeeperBoard) -> (String, String) {
        let id = board.post(&self.q, NewJob::new("secret")).await.unwrap();
        let client = zookeeper_client::Client::connector()
            .with_auth("digest", b"app:s3cret")
            .connect(&shared_zookeeper().connect_string())
            .await
            .unwrap();
        let mut jobs = client
            .list_children(&board.jobs_path(&self.q).unwrap())
            .await
            .unwrap();
        jobs.retain(|c| !c.ends_with(".lock"));
        jobs.sort();
        let znode = jobs.pop().expect("the job znode is listed with the digest");
        (znode, format!("/{}/{}/.jw/ids/{id}", self.root, self.q))
    }

    /// What kazoo under `auth` may do to the job znode and the record.
    async fn probe(&self, board: &ZooKeeperBoard, auth: &str, (znode, record): &(String, String)) -> Value {
        self.python(board, auth, &["probe", znode, record]).await
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn with_credentials_no_one_else_can_read_or_change_the_board() {
    let s = Setup::new("closed");
    let board = s.board("app:s3cret", None).await;
    let job = s.post(&board).await;
    let seen = s.probe(&board, "-", &job).await;
    let refused = json!({"list": "NoAuth", "read": "NoAuth", "read_record": "NoAuth",
        "write": "NoAuth", "delete": "NoAuth", "create": "NoAuth"});
    assert_eq!(seen, refused, "kazoo without credentials");
    let seen = s.probe(&board, "app:wrong", &job).await;
    assert_eq!(seen, refused, "kazoo with a wrong password");

    // jobworker without, or with wrong, credentials is refused too, and
    // says so; it destroys nothing.
    for credentials in ["", "app:wrong"] {
        let other = s.board(credentials, None).await;
        let err = other.claim(&[&s.q], "intruder", LONG, 10).await.unwrap_err();
        assert!(
            err.to_string().contains("refused access"),
            "{credentials:?}: {err}"
        );
        let err = other.post(&s.q, NewJob::new("planted")).await.unwrap_err();
        assert!(
            err.to_string().contains("refused access"),
            "{credentials:?}: {err}"
        );
    }

    // The owner still has its job and runs it.
    let claimed = board.claim(&[&s.q], "w1", LONG, 10).await.unwrap();
    assert_eq!(claimed.len(), 1, "the job is intact");
    for c in claimed {
        let id = c.lease.job().clone();
        board.consume(c.lease).await.unwrap();
        assert_eq!(board.state(&s.q, &id).await.unwrap(), JobState::Completed);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_reader_identity_can_read_and_not_change() {
    let s = Setup::new("reader");
    // The tests' clients all come from 127.0.0.1.
    let board = s.board("app:s3cret", Some("ip:127.0.0.1")).await;
    let job = s.post(&board).await;
    let seen = s.probe(&board, "-", &job).await;
    assert_eq!(
        seen,
        json!({"list": "ok", "read": "ok", "read_record": "ok",
            "write": "NoAuth", "delete": "NoAuth", "create": "NoAuth"}),
        "an unauthenticated client from the reader's address"
    );
    assert_eq!(board.claim(&[&s.q], "w1", LONG, 10).await.unwrap().len(), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn without_credentials_the_board_stays_open_as_kazoo_makes_it() {
    let s = Setup::new("open");
    let board = s.board("", None).await;
    let job = s.post(&board).await;
    let seen = s.probe(&board, "-", &job).await;
    assert_eq!(seen["read"], "ok", "{seen}");
    assert_eq!(seen["delete"], "ok", "{seen}");
}

#[tokio::test(flavor = "multi_thread")]
async fn taskflow_with_the_same_digest_shares_jobs_both_ways() {
    let s = Setup::new("tf");
    let board = s.board("app:s3cret", None).await;

    // taskflow posts; jobworker claims and consumes.
    let posted = s.python(&board, "app:s3cret", &["post", "from-taskflow"]).await;
    let c = board.claim(&[&s.q], "w1", LONG, 1).await.unwrap().remove(0);
    assert_eq!(c.lease.job().as_str(), posted["uuid"]);
    assert_eq!(c.name, "from-taskflow");
    board.consume(c.lease).await.unwrap();

    // jobworker posts; taskflow claims and consumes.
    let id = board.post(&s.q, NewJob::new("from-jobworker")).await.unwrap();
    let taken = s.python(&board, "app:s3cret", &["take"]).await;
    assert_eq!(taken, json!({"taken": [id.as_str()]}));
    assert_eq!(board.state(&s.q, &id).await.unwrap(), JobState::Completed);

    // taskflow without the digest cannot even list the queue.
    let out = run_python_async(
        SCRIPT,
        &[
            &shared_zookeeper().connect_string(),
            &board.jobs_path(&s.q).unwrap(),
            "-",
            "take",
        ],
    )
    .await;
    assert!(!out.success(), "taskflow without credentials must fail: {out:?}");
}

/// A server that lets no unauthenticated session do anything
/// (`enforce.auth.enabled`, digest required) takes the board with
/// credentials: they reach the server before its first request. Without
/// credentials the board does not connect, and says why.
#[tokio::test(flavor = "multi_thread")]
async fn a_server_that_enforces_authentication_takes_the_board_with_credentials() {
    use jobworker_tests::{ZooKeeperOptions as ServerOptions, ZooKeeperServer};
    let extra = [
        ("enforce.auth.enabled", "true"),
        ("enforce.auth.schemes", "digest"),
    ];
    let server = ZooKeeperServer::start(ServerOptions {
        extra_config: extra
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        ..ServerOptions::default()
    })
    .expect("start a ZooKeeper that enforces authentication");
    for _ in 0..5 {
        let mut opts = ZooKeeperOptions::new(format!("app:pw@{}/enforced", server.connect_string()));
        opts.session_timeout = Duration::from_secs(4);
        let board = ZooKeeperBoard::connect(opts)
            .await
            .expect("connect with credentials");
        let q = unique_queue("enforced");
        let id = board.post(&q, NewJob::new("x")).await.unwrap();
        assert_eq!(board.state(&q, &id).await.unwrap(), JobState::Ready);
    }
    let mut opts = ZooKeeperOptions::new(format!("{}/enforced", server.connect_string()));
    opts.session_timeout = Duration::from_secs(4);
    let e = ZooKeeperBoard::connect(opts)
        .await
        .expect_err("no credentials, no session");
    assert!(e.is_unavailable(), "{e}");
}
