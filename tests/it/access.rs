//! Operators as a team: every admin route refuses the roles below its own (table-driven from
//! openapi.json, which a unit test ties to the router), a viewer sees no secret and changes
//! nothing, personal tokens act as their owner, expire and are revoked, and every change,
//! refusal and failed login is in the audit trail once, with its actor and masked diff.

use std::sync::Arc;
use std::time::Duration;

use reqwest::Method;
use serde_json::{Value, json};
use switchyard::scheduler::ManualClock;

use crate::support::{KEY, MockUpstream, TestGateway};

const ADMIN: &str = "adm-access-token-0001";
const UPSTREAM_KEY: &str = "sk-upstream-secret-access-5555";

fn yaml(mock: &MockUpstream) -> String {
    format!(
        "listen: 127.0.0.1:0\ndata_dir: {{data}}\ncache_dir: {cache}\nadmin_token: {ADMIN}
keys:
  - {{name: tester, key: {KEY}, models: ['*']}}
sources:
  - {{name: base, base_url: '{url}', api_key: {UPSTREAM_KEY}, models: [{{name: m, upstream: 'say:hello'}}]}}
",
        cache = crate::support::gateway::shared_cache().display(),
        url = mock.url
    )
}

async fn call(gw: &TestGateway, token: &str, method: Method, path: &str, body: Option<Value>) -> (u16, String) {
    let mut request = reqwest::Client::new().request(method, format!("{}{path}", gw.url)).bearer_auth(token);
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.unwrap();
    (response.status().as_u16(), response.text().await.unwrap())
}

async fn json_call(gw: &TestGateway, token: &str, method: Method, path: &str, body: Option<Value>) -> (u16, Value) {
    let (status, text) = call(gw, token, method, path, body).await;
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

/// A personal token made by the break-glass admin: (secret, id).
async fn token(gw: &TestGateway, name: &str, owner: &str, role: &str) -> (String, String) {
    let body = json!({"name": name, "owner": owner, "role": role, "expires_days": 1});
    let (status, made) = json_call(gw, ADMIN, Method::POST, "/admin/api/tokens", Some(body)).await;
    assert_eq!(status, 201, "{made}");
    assert!(made["hint"].as_str().unwrap().contains('…') && made.get("sha256").is_none(), "{made}");
    (made["token"].as_str().unwrap().to_string(), made["id"].as_str().unwrap().to_string())
}

async fn audit(gw: &TestGateway, query: &str) -> Vec<Value> {
    let (status, page) = json_call(gw, ADMIN, Method::GET, &format!("/admin/api/audit?{query}"), None).await;
    assert_eq!(status, 200, "{page}");
    page["entries"].as_array().unwrap().clone()
}

const RANK: [&str; 3] = ["viewer", "operator", "admin"];

fn rank(role: &str) -> usize {
    RANK.iter().position(|r| *r == role).unwrap_or_else(|| panic!("`{role}` is not a role"))
}

#[tokio::test]
async fn every_admin_route_refuses_the_roles_below_its_own_and_a_viewer_sees_no_secret() {
    let mock = MockUpstream::start().await;
    let gw = TestGateway::start(&yaml(&mock)).await;
    let (viewer, _) = token(&gw, "v", "victor", "viewer").await;
    let (operator, _) = token(&gw, "o", "olivia", "operator").await;
    let secrets = [ADMIN, UPSTREAM_KEY, KEY, viewer.as_str(), operator.as_str()];
    let (_, doc) = json_call(&gw, &viewer, Method::GET, "/admin/api/openapi.json", None).await;
    let mut checked = 0;
    // Every write each identity sent, by (actor, method, path): each must be in the trail once.
    let mut writes: std::collections::BTreeMap<(String, String, String), usize> = Default::default();
    *writes.entry(("admin".into(), "POST".into(), "/admin/api/tokens".into())).or_default() += 2;
    let people =
        [(viewer.as_str(), "viewer", "victor"), (operator.as_str(), "operator", "olivia"), (ADMIN, "admin", "admin")];
    for (holder, held, person) in people {
        for (path, methods) in doc["paths"].as_object().unwrap() {
            let concrete =
                path.replace("{name}", "nothing").replace("{id}", "nothing").replace("{provider}", "nothing");
            for (method, operation) in methods.as_object().unwrap() {
                let needed = operation["x-role"].as_str().unwrap_or_else(|| panic!("{method} {path} has no x-role"));
                let method = Method::from_bytes(method.to_uppercase().as_bytes()).unwrap();
                let reads = method == Method::GET;
                let (status, text) = call(&gw, holder, method.clone(), &concrete, (!reads).then(|| json!({}))).await;
                if !reads {
                    *writes.entry((person.into(), method.to_string(), concrete.clone())).or_default() += 1;
                }
                if rank(held) < rank(needed) {
                    assert_eq!(status, 403, "{held} {method} {path}: {text}");
                    assert!(text.contains("\"forbidden\"") && text.contains(needed), "{text}");
                } else {
                    assert!(![401, 403, 405].contains(&status), "{held} may {method} {path}: {status} {text}");
                }
                if held == "viewer" && reads {
                    for secret in secrets {
                        assert!(!text.contains(secret), "a viewer read a secret at {path}: {text}");
                    }
                }
                checked += 1;
            }
        }
    }
    assert!(checked >= 3 * 70, "{checked} calls");
    let mut recorded: std::collections::BTreeMap<(String, String, String), usize> = Default::default();
    for (_, _, person) in people {
        for entry in audit(&gw, &format!("actor={person}&limit=500")).await {
            assert_ne!(entry["method"], "GET", "reads are not recorded: {entry}");
            let key =
                (person.to_string(), entry["method"].as_str().unwrap().into(), entry["path"].as_str().unwrap().into());
            *recorded.entry(key).or_default() += 1;
        }
    }
    assert_eq!(recorded, writes, "every write is in the trail once, with its actor");
    // The viewer changed nothing: every change in the trail is an operator's or an admin's,
    // and the viewer's tries are there as refusals.
    let victor = audit(&gw, "actor=victor&limit=500").await;
    assert!(
        !victor.is_empty()
            && victor.iter().all(|e| e["outcome"] == "refused"
                || e["path"] == "/admin/api/tokens"
                || e["path"] == "/admin/api/tokens/nothing"),
        "{victor:?}"
    );
    let (_, sources) = json_call(&gw, ADMIN, Method::GET, "/admin/api/sources/base", None).await;
    assert_eq!(sources["enabled"], true);
}

#[tokio::test]
async fn personal_tokens_act_as_their_owner_within_their_role_expire_and_are_revoked() {
    let mock = MockUpstream::start().await;
    let clock = Arc::new(ManualClock::at(1_765_000_000_000));
    let dir = tempfile::tempdir().unwrap();
    let gw = TestGateway::start_with_clock(dir, &yaml(&mock), clock.clone()).await;
    let (operator, operator_id) = token(&gw, "laptop", "olivia", "operator").await;

    let (_, me) = json_call(&gw, &operator, Method::GET, "/admin/api/me", None).await;
    assert_eq!(me, json!({"name": "olivia", "role": "operator", "via": "token", "token_id": operator_id}));
    let (_, me) = json_call(&gw, ADMIN, Method::GET, "/admin/api/me", None).await;
    assert_eq!((me["name"].as_str(), me["via"].as_str()), (Some("admin"), Some("admin_token")));

    // Never above one's own role, never for someone else unless admin.
    let ask = |body: Value| json_call(&gw, &operator, Method::POST, "/admin/api/tokens", Some(body));
    let (status, refused) = ask(json!({"name": "up", "role": "admin"})).await;
    assert_eq!((status, refused["error"]["code"].as_str()), (403, Some("forbidden")), "{refused}");
    let (status, _) = ask(json!({"name": "other", "owner": "bob"})).await;
    assert_eq!(status, 403);
    let (status, _) = ask(json!({"name": "long", "expires_days": 366})).await;
    assert_eq!(status, 400, "past access.token_max_days");
    let (status, own) = ask(json!({"name": "ci", "role": "viewer"})).await;
    assert_eq!((status, own["owner"].as_str(), own["role"].as_str()), (201, Some("olivia"), Some("viewer")));
    let ci = own["token"].as_str().unwrap().to_string();

    // Listed masked: an operator sees their own, an admin everyone's.
    let (_, mine) = json_call(&gw, &operator, Method::GET, "/admin/api/tokens", None).await;
    assert_eq!(mine["tokens"].as_array().unwrap().len(), 2, "{mine}");
    let (status, all) = call(&gw, ADMIN, Method::GET, "/admin/api/tokens", None).await;
    assert_eq!(status, 200);
    assert!(!all.contains(&operator) && !all.contains(&ci) && !all.contains("sha256"), "{all}");
    let viewer_only = token(&gw, "other", "victor", "viewer").await;
    let (_, mine) = json_call(&gw, &operator, Method::GET, "/admin/api/tokens", None).await;
    assert!(!mine.to_string().contains("victor"), "{mine}");
    let (status, _) =
        json_call(&gw, &operator, Method::DELETE, &format!("/admin/api/tokens/{}", viewer_only.1), None).await;
    assert_eq!(status, 404, "someone else's token is not the operator's to revoke");

    // The viewer token made by the operator reads but cannot intervene.
    let (status, _) = call(&gw, &ci, Method::GET, "/admin/api/health", None).await;
    assert_eq!(status, 200);
    let (status, _) = call(&gw, &ci, Method::POST, "/admin/api/cooldowns/clear", Some(json!({}))).await;
    assert_eq!(status, 403);

    // Revoked: refused at once.
    let id = own["id"].as_str().unwrap();
    let (status, _) = call(&gw, &operator, Method::DELETE, &format!("/admin/api/tokens/{id}"), None).await;
    assert_eq!(status, 204);
    let (status, _) = call(&gw, &ci, Method::GET, "/admin/api/health", None).await;
    assert_eq!(status, 401);

    // A day on, the operator's own token has expired.
    clock.advance(Duration::from_secs(86_400));
    let (status, expired) = json_call(&gw, &operator, Method::GET, "/admin/api/health", None).await;
    assert_eq!(status, 401);
    assert!(expired["error"]["message"].as_str().unwrap().contains("expired"), "{expired}");
    let (_, all) = json_call(&gw, ADMIN, Method::GET, "/admin/api/tokens", None).await;
    let laptop = all["tokens"].as_array().unwrap().iter().find(|t| t["name"] == "laptop").unwrap().clone();
    assert_eq!(laptop["expired"], true);
}

#[tokio::test]
async fn every_change_refusal_and_failed_login_is_in_the_trail_once_with_its_actor_and_masked_diff() {
    let mock = MockUpstream::start().await;
    let gw = TestGateway::start(&yaml(&mock)).await;
    let (operator, _) = token(&gw, "laptop", "olivia", "operator").await;
    let (viewer, _) = token(&gw, "tablet", "victor", "viewer").await;

    // An operator's switch: one entry, the source before and after.
    let (status, _) = call(&gw, &operator, Method::POST, "/admin/api/sources/base/disable", None).await;
    assert_eq!(status, 200);
    let entries = audit(&gw, "path=/sources/base/disable").await;
    assert_eq!(entries.len(), 1, "{entries:?}");
    let entry = &entries[0];
    assert_eq!(
        (entry["actor"].as_str(), entry["via"].as_str(), entry["role"].as_str()),
        (Some("olivia"), Some("token"), Some("operator"))
    );
    assert_eq!((entry["outcome"].as_str(), entry["status"].as_u64()), (Some("done"), Some(200)));
    assert_eq!(entry["peer"], "127.0.0.1");
    let change = &entry["changes"][0];
    assert_eq!((change["section"].as_str(), change["name"].as_str()), (Some("sources"), Some("base")));
    // config.yaml's source as it was (enabled is written only when false), and as it is now.
    assert_eq!(change["before"]["base_url"].as_str(), Some(mock.url.as_str()), "{change}");
    assert!(change["before"].get("enabled").is_none() && change["after"]["enabled"] == false, "{change}");
    assert_eq!(change["before"]["api_key"], "sk-…5555");

    // An admin's new upstream key: masked on both sides.
    let new_key = "sk-upstream-rotated-key-7777";
    let (status, _) = call(&gw, ADMIN, Method::PUT, "/admin/api/sources/base", Some(json!({"name": "base", "base_url": mock.url, "api_key": new_key, "models": [{"name": "m", "upstream": "say:hi"}]}))).await;
    assert_eq!(status, 200);
    let entries = audit(&gw, "actor=admin&path=/admin/api/sources/base").await;
    let put = entries.iter().find(|e| e["method"] == "PUT").unwrap_or_else(|| panic!("{entries:?}"));
    let text = put.to_string();
    assert!(!text.contains(new_key) && !text.contains(UPSTREAM_KEY), "{text}");
    assert_eq!(put["changes"][0]["after"]["api_key"], "sk-…7777");

    // Interventions without a runtime change say what they did.
    let (status, _) =
        call(&gw, &operator, Method::POST, "/admin/api/cooldowns/clear", Some(json!({"source": "base"}))).await;
    assert_eq!(status, 200);
    let cleared = audit(&gw, "path=/cooldowns/clear").await;
    assert_eq!(cleared[0]["note"], "0 cooldowns cleared for source base");

    // A refused write and a failed login are there too; reads are not.
    let (status, _) = call(&gw, &viewer, Method::DELETE, "/admin/api/sources/base", None).await;
    assert_eq!(status, 403);
    let refused = audit(&gw, "outcome=refused").await;
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert_eq!((refused[0]["actor"].as_str(), refused[0]["method"].as_str()), (Some("victor"), Some("DELETE")));
    let (status, _) = call(&gw, "not-a-token-at-all", Method::GET, "/admin/api/health", None).await;
    assert_eq!(status, 401);
    let failed = audit(&gw, "outcome=failed_login").await;
    assert_eq!((failed.len(), failed[0]["actor"].as_str()), (1, Some("unknown")));
    assert!(!failed[0].to_string().contains("not-a-token-at-all"));
    assert!(audit(&gw, "path=/admin/api/health").await.iter().all(|e| e["outcome"] == "failed_login"));

    // An invalid change is recorded as failed, with nothing changed.
    let (status, _) = call(&gw, ADMIN, Method::POST, "/admin/api/sources", Some(json!({"name": "bad"}))).await;
    assert_eq!(status, 400);
    let failed = audit(&gw, "outcome=failed").await;
    assert_eq!((failed[0]["status"].as_u64(), failed[0]["changes"].as_array().map(Vec::len)), (Some(400), Some(0)));

    // The trail survives a restart; its table refuses updates.
    let (status, page) = json_call(&gw, ADMIN, Method::GET, "/admin/api/audit?limit=2", None).await;
    assert_eq!((status, page["entries"].as_array().unwrap().len()), (200, 2));
    assert!(page["next_until_ms"].as_u64().is_some(), "{page}");
    let (status, bad) = json_call(&gw, ADMIN, Method::GET, "/admin/api/audit?outcome=maybe", None).await;
    assert_eq!(status, 400, "{bad}");
    let yaml = yaml(&mock);
    let gw = gw.restart(&yaml, Arc::new(switchyard::scheduler::SystemClock)).await;
    assert_eq!(audit(&gw, "actor=olivia&path=/sources/base/disable").await.len(), 1);
    let db = rusqlite::Connection::open(gw.data_dir().join("state.db")).unwrap();
    let updated = db.execute("UPDATE audit SET actor = 'someone else'", []);
    assert!(updated.unwrap_err().to_string().contains("append-only"));
}
