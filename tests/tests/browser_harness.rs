//! The browser harness drives a real headless Chromium: against a tiny
//! HTTP server on a loopback port, it reads text, follows a link, fills and
//! posts a form, sees a script change the page under a strict CSP (and an
//! inline script blocked), accepts a `confirm()`, saves a screenshot, and leaves no process behind
//! (after `close`, and after a plain drop).
//!
//! One test, one browser at a time: a 2-core machine runs them best so.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::thread;

use jobworker_tests::browser::{running, Browser};

/// The CSP of every response: scripts only from the page's own origin.
const CSP: &str = "default-src 'none'; script-src 'self'";

const INDEX: &str = "<!doctype html><html><head><title>harness</title></head><body>\
    <h1 id=t>Harness page</h1>\
    <a id=next href=\"/next\">next page</a>\
    <form id=f method=post action=\"/echo\"><input id=v name=v><button>Send</button></form>\
    <p id=js>waiting for app.js</p>\
    <button id=ask type=button>Ask</button><p id=answer>not asked</p>\
    <p id=inline>inline blocked</p>\
    <script>document.getElementById('inline').textContent = 'inline ran';</script>\
    <script src=\"/app.js\"></script>\
    </body></html>";

/// Changes `#js` a little later, so the harness has to wait for it; `#ask`
/// asks for a confirmation.
const APP_JS: &str = "\
    setTimeout(function () { document.getElementById('js').textContent = 'changed by app.js'; }, 300);\n\
    document.getElementById('ask').addEventListener('click', function () {\n\
      document.getElementById('answer').textContent = confirm('Really?') ? 'confirmed' : 'declined';\n\
    });\n";

#[tokio::test]
async fn the_harness_drives_a_real_chromium() {
    let site = serve();
    let browser = Browser::start().await;
    let pids = browser.process_ids();
    assert!(pids.len() >= 2, "chromedriver and Chromium run: {pids:?}");

    browser.goto(&site).await;
    assert_eq!(browser.text("#t").await, "Harness page");
    browser.wait_for_text("#js", "changed by app.js").await;
    assert_eq!(
        browser.text("#inline").await,
        "inline blocked",
        "the CSP blocks inline scripts"
    );
    browser.click("#ask").await;
    assert_eq!(browser.accept_js_confirm().await, "Really?");
    browser.wait_for_text("#answer", "confirmed").await;

    browser.click("#next").await;
    assert_eq!(browser.text("#second").await, "Second page");
    assert!(browser.current_url().await.ends_with("/next"));

    browser.goto(&site).await;
    browser.fill("#v", "hello harness & co").await;
    browser.submit("#f").await;
    browser.wait_for_url("/echo").await;
    assert_eq!(
        browser.wait_for_text("#posted", "hello").await,
        "hello harness & co"
    );
    assert!(browser.page_source().await.contains("id=\"posted\""));

    let shot = browser.screenshot("browser_harness").await;
    let png = std::fs::read(&shot).unwrap_or_else(|e| panic!("{}: {e}", shot.display()));
    assert!(
        png.starts_with(b"\x89PNG\r\n\x1a\n"),
        "{} is a PNG",
        shot.display()
    );

    let profile = browser.profile_dir();
    assert!(
        profile.join("Default").is_dir(),
        "Chromium uses its own profile dir"
    );
    browser.close().await;
    assert_eq!(
        running(&pids),
        Vec::<u32>::new(),
        "no browser process outlives close"
    );
    assert!(!profile.exists(), "the profile is removed");

    let dropped = Browser::start().await;
    dropped.goto(&site).await;
    dropped.wait_for("#t").await;
    let pids = dropped.process_ids();
    drop(dropped);
    assert_eq!(
        running(&pids),
        Vec::<u32>::new(),
        "no browser process outlives a drop"
    );
}

/// Serves the test site on a free loopback port; returns its URL.
fn serve() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
    let url = format!("http://{}/", listener.local_addr().expect("local addr"));
    thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            thread::spawn(move || answer(stream));
        }
    });
    url
}

/// Answers one request, then closes the connection.
fn answer(stream: TcpStream) {
    let mut reader = BufReader::new(stream);
    let mut head = Vec::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
            break;
        }
        head.push(line);
    }
    let Some(request) = head.first() else { return };
    let length = head
        .iter()
        .find_map(|h| {
            h.to_ascii_lowercase()
                .strip_prefix("content-length:")
                .map(|n| n.trim().to_string())
        })
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    let mut body = vec![0; length];
    if reader.read_exact(&mut body).is_err() {
        return;
    }
    let (status, kind, page) = route(request, &String::from_utf8_lossy(&body));
    let response = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Security-Policy: {CSP}\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{page}",
        page.len()
    );
    let _ = reader.into_inner().write_all(response.as_bytes());
}

fn route(request: &str, body: &str) -> (&'static str, &'static str, String) {
    let html = "text/html; charset=utf-8";
    match request.split_whitespace().take(2).collect::<Vec<_>>()[..] {
        ["GET", "/"] => ("200 OK", html, INDEX.into()),
        ["GET", "/app.js"] => ("200 OK", "text/javascript", APP_JS.into()),
        ["GET", "/next"] => ("200 OK", html, "<h1 id=second>Second page</h1>".into()),
        ["POST", "/echo"] => {
            let value = body.strip_prefix("v=").map(form_decode).unwrap_or_default();
            ("200 OK", html, format!("<p id=\"posted\">{}</p>", escape(&value)))
        }
        _ => ("404 Not Found", "text/plain", "not found".into()),
    }
}

/// Decodes one `application/x-www-form-urlencoded` value.
fn form_decode(value: &str) -> String {
    let mut bytes = Vec::new();
    let mut rest = value.as_bytes();
    while let Some((&b, tail)) = rest.split_first() {
        match b {
            b'+' => bytes.push(b' '),
            b'%' if tail.len() >= 2 => {
                let hex = std::str::from_utf8(&tail[..2]).ok();
                bytes.push(hex.and_then(|h| u8::from_str_radix(h, 16).ok()).unwrap_or(b'?'));
                rest = &tail[2..];
                continue;
            }
            _ => bytes.push(b),
        }
        rest = tail;
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}
