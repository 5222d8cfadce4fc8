//! Single sign-on in the real browser against a real OpenID provider (`oidc-provider`, started
//! on loopback by `tests/browser/idp.mjs`): sign-in with PKCE, the role from a group claim, the
//! CSRF guard on cookie writes, sign-out, and ID tokens that are expired, tampered with, for
//! another audience or issuer, with another nonce or signed by an unknown key, all refused.
//! Driven by `tests/browser/sso.mjs`.

use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::AsyncBufReadExt;

use crate::support::binary::Binary;
use crate::support::faulty::{Answer, FaultyUpstream};
use crate::webui::browser_dir;

const ADMIN: &str = "sso-test-admin-token-0123456789";
/// The whole browser run; each step inside waits on what it needs, this only stops a hang.
const BROWSER_GUARD: Duration = Duration::from_secs(300);

const ANSWER: Answer = Answer { model: "gpt-4o-mini", text: "Hello.", prompt_tokens: 3, completion_tokens: 2 };

/// The provider's own process, ended when its stdin closes (with the test).
struct Idp {
    _child: tokio::process::Child,
    started: Value,
}

async fn start_idp() -> Idp {
    let mut child = tokio::process::Command::new("node")
        .arg(browser_dir().join("idp.mjs"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .expect("node runs (install nodejs)");
    let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let line = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
        .await
        .expect("the provider starts in time")
        .unwrap()
        .expect("the provider says where it listens (oidc-provider 9 needs Node.js 20 or later)");
    Idp { _child: child, started: serde_json::from_str(&line).unwrap() }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn people_sign_in_through_a_real_openid_provider_with_the_role_of_their_group_and_bad_tokens_are_refused() {
    let idp = start_idp().await;
    let issuer = idp.started["issuer"].as_str().unwrap();
    let control = idp.started["control"].as_str().unwrap();
    let upstream = FaultyUpstream::start(move |arrival| ANSWER.to(arrival)).await;
    let dir = tempfile::tempdir().unwrap();
    let config = format!(
        "admin_token: {ADMIN}\nruntime_file: {dir}/runtime.yaml\n\
         access:\n\
         \x20 sso:\n\
         \x20   issuer: '{issuer}'\n\
         \x20   client_id: {client}\n\
         \x20   client_secret: {secret}\n\
         \x20   roles: [{{group: gateway-admins, role: admin}}, {{group: gateway-viewers, role: viewer}}]\n\
         sources:\n\
         \x20 - {{name: alpha, base_url: '{url}', api_key: sk-alpha-secret-0123456789, models: [{{name: gpt-4o-mini}}]}}\n\
         \x20 - {{name: beta, base_url: '{url}', api_key: sk-beta-secret-0123456789, models: [{{name: gpt-4o-mini}}]}}\n",
        dir = dir.path().display(),
        client = idp.started["client_id"].as_str().unwrap(),
        secret = idp.started["client_secret"].as_str().unwrap(),
        url = upstream.url,
    );
    let mut gateway = Binary::start(dir.path(), &config);
    // The gateway's address is known only now: registered with the provider as its redirect.
    let registered = reqwest::Client::new()
        .post(format!("{control}/__client"))
        .json(&json!({"redirect_uris": [format!("{}/auth/callback", gateway.url)]}))
        .send()
        .await
        .unwrap();
    assert!(registered.status().is_success(), "{}", registered.text().await.unwrap());

    let run = tokio::process::Command::new("node")
        .arg(browser_dir().join("sso.mjs"))
        .env("GATEWAY_URL", &gateway.url)
        .env("IDP_CONTROL", control)
        .env("ADMIN_TOKEN", ADMIN)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("node runs");
    let output = tokio::time::timeout(BROWSER_GUARD, run.wait_with_output())
        .await
        .expect("the sign-in flows end in time")
        .expect("node's output");
    let mut log = Vec::new();
    while let Ok(line) = gateway.log.try_recv() {
        log.push(line);
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    println!("{stdout}");
    assert!(
        output.status.success(),
        "sign-in flows failed:\n{stdout}\n{}\n--- gateway log (last 60 lines) ---\n{}",
        String::from_utf8_lossy(&output.stderr),
        log[log.len().saturating_sub(60)..].join("\n")
    );
    // Each audit entry is also a structured log line; the secret never reached the log.
    let audit_lines: Vec<&String> = log.iter().filter(|l| l.contains("switchyard::audit")).collect();
    assert!(
        audit_lines.iter().any(|l| l.contains("alice@example.test")
            && l.contains("outcome=\"done\"")
            && l.contains("via=\"session\"")),
        "no audit line for alice's sign-in: {audit_lines:?}"
    );
    assert!(audit_lines.iter().any(|l| l.contains("outcome=\"failed_login\"")), "{audit_lines:?}");
    assert!(!log.iter().any(|l| l.contains(idp.started["client_secret"].as_str().unwrap())));
    gateway.assert_alive("the sign-in flows").await;
}
