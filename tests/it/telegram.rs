//! The operators' Telegram bot against a mock Bot API on loopback (real HTTP, Telegram's JSON
//! shapes): each command and its effect on the gateway, the inline buttons' callback queries,
//! a chat not allowed ignored (and logged once, by its id), Telegram's 429 `retry_after` waited
//! out, alerts sent once for a flapping source, a model no source serves and a key's quota, and
//! the token masked in logs.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use switchyard::config::{ChannelSelection, InRange, TelegramConfig};
use switchyard::domain::{KeyName, ManualClock, Period};
use switchyard::telegram::{Bot, Pause};
use tokio::sync::{Notify, mpsc};

use crate::support::binary::Binary;
use crate::support::{MockUpstream, TestGateway, chat_body, config_with};

const TOKEN: &str = "123456:AAF-test-token-do-not-log-0001";
const ADMIN: &str = "adm-telegram-token-0001";
const OPERATOR: i64 = 123;
const GROUP: i64 = -100456;
/// Every wait on the mock's calls is bounded by this, so a broken bot fails instead of hanging.
const GUARD: Duration = Duration::from_secs(20);

/// A Bot API on loopback: updates the test queues come back from `getUpdates` (long-polled),
/// every call is recorded and announced on `calls`.
struct BotMock {
    url: String,
    state: Arc<BotState>,
    calls: mpsc::UnboundedReceiver<(String, Value)>,
}

struct BotState {
    updates: Mutex<VecDeque<Value>>,
    queued: Notify,
    next_id: AtomicU32,
    /// `sendMessage` calls still to refuse with 429 `retry_after: 3`.
    refuse_sends: AtomicU32,
    /// Answer every call with this (status, body) instead, when set.
    broken: Mutex<Option<(u16, String)>>,
    calls: mpsc::UnboundedSender<(String, Value)>,
}

impl BotMock {
    async fn start() -> BotMock {
        let (tx, calls) = mpsc::unbounded_channel();
        let state = Arc::new(BotState {
            updates: Mutex::new(VecDeque::new()),
            queued: Notify::new(),
            next_id: AtomicU32::new(1),
            refuse_sends: AtomicU32::new(0),
            broken: Mutex::new(None),
            calls: tx,
        });
        let app = axum::Router::new().route("/{bot}/{method}", axum::routing::post(bot_api)).with_state(state.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        BotMock { url: format!("http://{addr}"), state, calls }
    }

    /// Queues a text message from `chat`, as Telegram's Update object carries it.
    fn say(&self, chat: i64, text: &str) {
        self.say_as(chat, chat.abs(), text);
    }

    /// Queues a text message from user `sender` in `chat`.
    fn say_as(&self, chat: i64, sender: i64, text: &str) {
        let id = self.state.next_id.fetch_add(1, Ordering::SeqCst);
        self.queue(json!({"update_id": id, "message": {"message_id": id, "date": 1733260000,
            "chat": {"id": chat, "type": if chat < 0 { "group" } else { "private" }},
            "from": {"id": sender, "is_bot": false, "first_name": "Op"}, "text": text,
            "entities": [{"type": "bot_command", "offset": 0, "length": text.split(' ').next().unwrap().len()}]}}));
    }

    /// Queues a press of an inline button with `data` under a message in `chat`.
    fn press(&self, chat: i64, data: &str) {
        let id = self.state.next_id.fetch_add(1, Ordering::SeqCst);
        self.queue(json!({"update_id": id, "callback_query": {"id": format!("cb-{id}"),
            "from": {"id": chat.abs(), "is_bot": false, "first_name": "Op"}, "chat_instance": "42",
            "message": {"message_id": 7, "date": 1733260000, "chat": {"id": chat, "type": "private"}, "text": "menu"},
            "data": data}}));
    }

    fn queue(&self, update: Value) {
        self.state.updates.lock().unwrap().push_back(update);
        self.state.queued.notify_waiters();
    }

    /// The next call of `method` (others are skipped).
    async fn next(&mut self, method: &str) -> Value {
        tokio::time::timeout(GUARD, async {
            loop {
                let (called, body) = self.calls.recv().await.expect("the mock keeps running");
                if called == method {
                    return body;
                }
            }
        })
        .await
        .unwrap_or_else(|_| panic!("no {method} call within {GUARD:?}"))
    }

    /// The next message the bot sends, (chat, text, body).
    async fn reply(&mut self) -> (i64, String, Value) {
        let body = self.next("sendMessage").await;
        (body["chat_id"].as_i64().unwrap(), body["text"].as_str().unwrap().to_string(), body)
    }
}

async fn bot_api(
    State(state): State<Arc<BotState>>,
    Path((bot, method)): Path<(String, String)>,
    body: String,
) -> Response {
    if bot != format!("bot{TOKEN}") {
        return (StatusCode::NOT_FOUND, r#"{"ok":false,"error_code":404,"description":"Not Found"}"#).into_response();
    }
    let body: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
    let _ = state.calls.send((method.clone(), body.clone()));
    if let Some((status, answer)) = state.broken.lock().unwrap().clone() {
        return (StatusCode::from_u16(status).unwrap(), answer).into_response();
    }
    let ok = |result: Value| axum::Json(json!({"ok": true, "result": result})).into_response();
    match method.as_str() {
        "getUpdates" => {
            let offset = body["offset"].as_i64().unwrap_or(0);
            let wait = Duration::from_secs(body["timeout"].as_u64().unwrap_or(0).min(2));
            let deadline = tokio::time::Instant::now() + wait;
            loop {
                let queued = state.queued.notified();
                let ready: Vec<Value> = {
                    let mut updates = state.updates.lock().unwrap();
                    updates.retain(|u| u["update_id"].as_i64().unwrap() >= offset);
                    updates.iter().cloned().collect()
                };
                if !ready.is_empty() || tokio::time::timeout_at(deadline, queued).await.is_err() {
                    return ok(Value::Array(ready));
                }
            }
        }
        "sendMessage" => {
            let refuse =
                state.refuse_sends.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1)).is_ok();
            if refuse {
                return (
                    StatusCode::TOO_MANY_REQUESTS,
                    axum::Json(json!({"ok": false, "error_code": 429, "description": "Too Many Requests: retry after 3", "parameters": {"retry_after": 3}})),
                )
                    .into_response();
            }
            ok(
                json!({"message_id": 99, "date": 1733260001, "chat": {"id": body["chat_id"], "type": "private"}, "text": body["text"]}),
            )
        }
        _ => ok(Value::Bool(true)),
    }
}

/// Records the waits the bot asks for and returns at once (its backoff is asserted, not slept).
#[derive(Default)]
struct Waits(Mutex<Vec<Duration>>);

#[async_trait::async_trait]
impl Pause for Waits {
    async fn pause(&self, wait: Duration) {
        self.0.lock().unwrap().push(wait);
        tokio::task::yield_now().await;
    }
}

fn telegram(mock: &BotMock) -> TelegramConfig {
    TelegramConfig {
        bot_token: serde_yaml::from_str(&format!("'{TOKEN}'")).unwrap(),
        allowed_chats: vec![OPERATOR, GROUP],
        allowed_users: Vec::new(),
        api_base: mock.url.clone().try_into().unwrap(),
        poll_timeout_seconds: InRange::new(1),
        alert_check_seconds: InRange::new(5),
    }
}

/// `more_keys`: list items appended to the harness's `keys:` (after the `tester` key).
fn gateway_yaml(upstream: &MockUpstream, more_keys: &str) -> String {
    config_with(&format!(
        "{more_keys}admin_token: {ADMIN}\nsources:\n  - {{name: good, base_url: '{url}', stream_whole_answers: false, models: [{{name: m, upstream: fixture}}]}}\n\
         \x20 - {{name: flaky, base_url: '{url}', models: [{{name: f, upstream: error-500}}]}}\n",
        url = upstream.url
    ))
}

/// A gateway, its bot answering the mock Bot API, the bot's waits, and its task (abort it to stop).
type Running = (TestGateway, BotMock, Arc<Waits>, tokio::task::JoinHandle<()>);

/// A gateway in front of `upstream`, and its bot.
async fn running_bot(upstream: &MockUpstream) -> Running {
    bot_for(TestGateway::start(&gateway_yaml(upstream, "")).await).await
}

/// `gw`'s bot, answering a new mock Bot API.
async fn bot_for(gw: TestGateway) -> Running {
    let bot_api = BotMock::start().await;
    let waits = Arc::new(Waits::default());
    let bot = Bot::new(gw.gateway.clone(), &telegram(&bot_api), waits.clone());
    let running = tokio::spawn(async move { bot.run().await });
    (gw, bot_api, waits, running)
}

/// Each slot's `field` as the admin API's health shows it, `source/model value`, in config order.
async fn slots(gw: &TestGateway, field: &str) -> Vec<String> {
    let health = gw.admin_json(ADMIN, "/admin/api/health").await;
    let shown = |s: &Value| {
        let value = s[field].as_str().map_or_else(|| s[field].to_string(), str::to_string);
        format!("{}/{} {value}", s["source"].as_str().unwrap(), s["model"].as_str().unwrap())
    };
    health["slots"].as_array().unwrap().iter().map(shown).collect()
}

/// Where the next turn of `chat_body`'s conversation (answered by the fixture) is bound, if anywhere.
fn bound(gw: &TestGateway) -> Option<String> {
    let asked = json!({"role": "user", "content": "Hello!"});
    let answered = json!({"role": "assistant", "content": "\n\nHello there, how may I assist you today?"});
    let fingerprint = switchyard::scheduler::fingerprint("tester", "127.0.0.1", [&asked, &answered]);
    gw.gateway.scheduler.bound(&fingerprint).map(|slot| slot.to_string())
}

#[tokio::test]
async fn every_command_acts_through_the_admin_api_and_strangers_get_nothing() {
    let upstream = MockUpstream::start().await;
    let (gw, mut bot_api, waits, running) = running_bot(&upstream).await;

    let menu = bot_api.next("setMyCommands").await;
    let names: Vec<&str> =
        menu["commands"].as_array().unwrap().iter().map(|c| c["command"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        ["status", "health", "clear", "affinity_clear", "stats_reset", "mode", "keys", "disable", "enable", "help"]
    );

    bot_api.say(OPERATOR, "/help");
    let (chat, text, body) = bot_api.reply().await;
    assert_eq!(chat, OPERATOR);
    assert!(text.contains("/clear — clear cooldowns"), "{text}");
    let buttons = body["reply_markup"]["inline_keyboard"].to_string();
    assert!(buttons.contains("\"callback_data\":\"/mode priority\""), "{buttons}");

    // A cooling slot, seen and cleared from the chat.
    assert_eq!(gw.chat(chat_body("f", false)).await.status(), 500);
    bot_api.say(OPERATOR, "/health flaky");
    let (_, text, _) = bot_api.reply().await;
    assert!(text.starts_with("flaky/f: cooling,") && text.contains("(1 failures)"), "{text}");
    bot_api.say(OPERATOR, "/status");
    let (_, text, _) = bot_api.reply().await;
    assert!(text.starts_with("Last hour: ") && text.contains(" requests, "), "{text}");
    assert!(text.contains("Not healthy (1):\nflaky/f: cooling"), "{text}");
    bot_api.say(OPERATOR, "/clear flaky");
    assert_eq!(bot_api.reply().await.1, "Cleared 1 cooldowns of flaky.");
    assert!(gw.gateway.scheduler.health().is_empty(), "the cooldown is gone");

    bot_api.say(GROUP, "/mode@switchyard_bot order");
    let (chat, text, _) = bot_api.reply().await;
    assert_eq!((chat, text.as_str()), (GROUP, "Order within a tier is now order."));
    assert_eq!(gw.gateway.scheduler.selection(), ChannelSelection::Order);
    bot_api.say(OPERATOR, "/mode fastest");
    let (_, text, _) = bot_api.reply().await;
    assert!(text.starts_with("Not done (400):"), "the admin API's own check: {text}");

    bot_api.say(OPERATOR, "/disable good");
    assert_eq!(bot_api.reply().await.1, "Source good disabled: no request goes to it.");
    let enabled = || gw.gateway.runtime().config.sources.iter().find(|s| s.name.as_str() == "good").unwrap().enabled;
    assert!(!enabled());
    assert_eq!(gw.chat(chat_body("m", false)).await.status(), 503, "a disabled source serves nothing");
    bot_api.say(OPERATOR, "/enable good");
    assert_eq!(bot_api.reply().await.1, "Source good enabled: requests go to it again.");
    assert!(enabled());
    assert_eq!(gw.chat(chat_body("m", false)).await.status(), 200);
    // Both switches are in the audit trail once each, with the Telegram user as the actor.
    let trail = gw.admin_json(ADMIN, "/admin/api/audit?path=/sources/good/").await;
    let entries = trail["entries"].as_array().unwrap();
    let paths: Vec<&str> = entries.iter().map(|e| e["path"].as_str().unwrap()).collect();
    assert_eq!(paths, ["/admin/api/sources/good/enable", "/admin/api/sources/good/disable"], "{trail}");
    for entry in entries {
        assert_eq!(entry["actor"], format!("telegram:{}", OPERATOR.abs()), "{entry}");
        assert_eq!((entry["via"].as_str(), entry["role"].as_str()), (Some("telegram"), Some("admin")));
        assert_eq!(entry["changes"][0]["name"], "good");
    }
    bot_api.say(OPERATOR, "/disable nosuch");
    assert!(bot_api.reply().await.1.starts_with("Not done (404)"));

    bot_api.say(OPERATOR, "/keys");
    let (_, text, _) = bot_api.reply().await;
    assert!(text.starts_with("tester (") && text.ends_with("): no quota"), "{text}");
    assert!(!text.contains(crate::support::KEY), "keys are masked: {text}");

    // The served chat bound its conversation to good/m: dropped by source, or all at once.
    assert_eq!(bound(&gw).as_deref(), Some("good/m"));
    bot_api.say(OPERATOR, "/affinity_clear flaky");
    assert_eq!(bot_api.reply().await.1, "Dropped 0 affinity bindings of flaky.");
    assert_eq!(bound(&gw).as_deref(), Some("good/m"), "another source's binding stays");
    bot_api.say(OPERATOR, "/affinity_clear good");
    assert_eq!(bot_api.reply().await.1, "Dropped 1 affinity bindings of good.");
    assert_eq!(bound(&gw), None);
    assert_eq!(gw.chat(chat_body("m", false)).await.status(), 200);
    assert_eq!(bound(&gw).as_deref(), Some("good/m"), "bound again");
    bot_api.say(OPERATOR, "/affinity_clear");
    assert_eq!(bot_api.reply().await.1, "Dropped 1 affinity bindings.");
    assert_eq!(bound(&gw), None);

    // Both slots are scored (good/m served twice, flaky/f failed once) until the reset.
    assert_eq!(slots(&gw, "requests").await, ["good/m 2", "flaky/f 1"]);
    bot_api.say(OPERATOR, "/stats_reset");
    assert_eq!(bot_api.reply().await.1, "Reset the scorer's statistics of 2 slots.");
    assert_eq!(slots(&gw, "requests").await, ["good/m 0", "flaky/f 0"]);
    bot_api.say(OPERATOR, "/reboot");
    assert_eq!(bot_api.reply().await.1, "no command /reboot. /help lists the commands.");

    // A stranger's command is dropped: the next answer goes to the operator who asked after it.
    bot_api.say(999, "/clear");
    bot_api.say(OPERATOR, "/mode smart");
    let (chat, text, _) = bot_api.reply().await;
    assert_eq!((chat, text.as_str()), (OPERATOR, "Order within a tier is now smart."));

    // An inline button: its callback is answered, then the command runs.
    bot_api.press(OPERATOR, "/mode priority");
    let answered = bot_api.next("answerCallbackQuery").await;
    assert!(answered["callback_query_id"].as_str().unwrap().starts_with("cb-"));
    assert_eq!(bot_api.reply().await.1, "Order within a tier is now priority.");
    assert_eq!(gw.gateway.scheduler.selection(), ChannelSelection::Priority);
    assert!(waits.0.lock().unwrap().is_empty(), "nothing failed, so nothing waited");
    running.abort();
}

#[tokio::test]
async fn with_allowed_users_only_those_people_command_the_bot_in_a_group() {
    let upstream = MockUpstream::start().await;
    let gw = TestGateway::start(&gateway_yaml(&upstream, "")).await;
    let mut bot_api = BotMock::start().await;
    let config = TelegramConfig { allowed_users: vec![OPERATOR], ..telegram(&bot_api) };
    let bot = Bot::new(gw.gateway.clone(), &config, Arc::new(Waits::default()));
    let running = tokio::spawn(async move { bot.run().await });
    // Another member of the allowed group: ignored; the operator in the same group: answered.
    bot_api.say_as(GROUP, 777, "/mode smart");
    bot_api.say_as(GROUP, OPERATOR, "/mode priority");
    let (chat, text, _) = bot_api.reply().await;
    assert_eq!((chat, text.as_str()), (GROUP, "Order within a tier is now priority."));
    assert_eq!(gw.gateway.scheduler.selection(), ChannelSelection::Priority, "the member's /mode smart never ran");
    // A button pressed by the member is ignored too.
    bot_api.press(GROUP, "/mode order");
    bot_api.say_as(GROUP, OPERATOR, "/mode priority");
    assert_eq!(bot_api.reply().await.1, "Order within a tier is now priority.");
    assert_eq!(gw.gateway.scheduler.selection(), ChannelSelection::Priority);
    running.abort();
}

#[tokio::test]
async fn health_lists_every_slot_and_clear_takes_one_slot_or_all() {
    let upstream = MockUpstream::start().await;
    let yaml = format!(
        "{}  - {{name: spare, base_url: '{}', models: [{{name: g, upstream: error-500}}, {{name: h, upstream: error-500}}]}}\n",
        gateway_yaml(&upstream, ""),
        upstream.url
    );
    // A clock that stands still: the cooldowns neither end nor reach their probe while the test runs.
    let clock = Arc::new(ManualClock::at(1_733_260_000_000));
    let gw = TestGateway::start_with_clock(tempfile::tempdir().unwrap(), &yaml, clock).await;
    let (gw, mut bot_api, _waits, running) = bot_for(gw).await;
    for model in ["f", "g", "h"] {
        assert_eq!(gw.chat(chat_body(model, false)).await.status(), 500, "{model}");
    }

    bot_api.say(OPERATOR, "/health");
    let (_, text, _) = bot_api.reply().await;
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 4, "every slot of every source: {text}");
    assert_eq!(lines[0], "good/m: healthy");
    for (line, slot) in lines[1..].iter().zip(["flaky/f", "spare/g", "spare/h"]) {
        assert!(line.starts_with(&format!("{slot}: cooling, ")) && line.ends_with(" s left (1 failures)"), "{text}");
    }

    bot_api.say(OPERATOR, "/clear spare g");
    assert_eq!(bot_api.reply().await.1, "Cleared 1 cooldowns of spare/g.");
    assert_eq!(
        slots(&gw, "state").await,
        ["good/m healthy", "flaky/f cooling", "spare/g healthy", "spare/h cooling"],
        "only that model of that source"
    );
    bot_api.say(OPERATOR, "/clear");
    assert_eq!(bot_api.reply().await.1, "Cleared 2 cooldowns.");
    assert_eq!(slots(&gw, "state").await, ["good/m healthy", "flaky/f healthy", "spare/g healthy", "spare/h healthy"]);
    assert!(gw.gateway.scheduler.health().is_empty(), "no cooldown left anywhere");
    running.abort();
}

#[tokio::test]
async fn telegrams_429_is_waited_out_for_as_long_as_it_says() {
    let upstream = MockUpstream::start().await;
    let (_gw, mut bot_api, waits, running) = running_bot(&upstream).await;
    bot_api.state.refuse_sends.store(2, Ordering::SeqCst);
    bot_api.say(OPERATOR, "/help");
    bot_api.next("sendMessage").await;
    bot_api.next("sendMessage").await;
    let (chat, text, _) = bot_api.reply().await;
    assert!(chat == OPERATOR && text.starts_with("Switchyard operator bot"), "{text}");
    assert_eq!(*waits.0.lock().unwrap(), [Duration::from_secs(3), Duration::from_secs(3)]);

    // The Bot API down: getUpdates backs off 1, 2, 4 ... seconds, never hammering it.
    *bot_api.state.broken.lock().unwrap() = Some((502, "<html>bad gateway</html>".into()));
    // Five calls: the first may have been a long poll already under way (answered).
    for _ in 0..5 {
        bot_api.next("getUpdates").await;
    }
    let backoff: Vec<u64> = waits.0.lock().unwrap()[2..].iter().map(|w| w.as_secs()).collect();
    assert!(backoff.starts_with(&[1, 2, 4]), "{backoff:?}");
    running.abort();
}

#[tokio::test]
async fn alerts_come_once_per_flapping_source_failing_model_quota_and_budget_level() {
    let upstream = MockUpstream::start().await;
    let mut bot_api = BotMock::start().await;
    let clock = Arc::new(ManualClock::at(1_733_260_000_000));
    let yaml = gateway_yaml(
        &upstream,
        "  - {name: team, key: sk-team-key-00000001, models: ['*'], token_quota: 100, budget: {usd: '2', period: month}}\n",
    );
    let gw = TestGateway::start_with_clock(tempfile::tempdir().unwrap(), &yaml, clock.clone()).await;
    let bot = Bot::new(gw.gateway.clone(), &telegram(&bot_api), Arc::new(Waits::default()));

    // Three cooldown windows of one source within ten minutes: one alert, to every allowed chat.
    for window in 1..=3 {
        assert_eq!(gw.chat(chat_body("f", false)).await.status(), 500, "window {window}");
        bot.check_alerts().await;
        if window < 3 {
            clock.advance(Duration::from_secs(120));
        }
    }
    let mut alerted = Vec::new();
    for _ in 0..2 {
        let (chat, text, _) = bot_api.reply().await;
        assert!(text.contains("source flaky entered cooldown 3 times in the last 10 min"), "{text}");
        alerted.push(chat);
    }
    alerted.sort();
    assert_eq!(alerted, [GROUP, OPERATOR]);

    // Still flapping: muted. While it cools, the model has no source: clients get the 503.
    clock.advance(Duration::from_secs(120));
    assert_eq!(gw.chat(chat_body("f", false)).await.status(), 500);
    for _ in 0..3 {
        assert_eq!(gw.chat(chat_body("f", false)).await.status(), 503);
    }
    bot.check_alerts().await;
    let (_, text, _) = bot_api.reply().await;
    assert!(text.starts_with("🚨 model f: every candidate failed (3 times)"), "{text}");
    assert!(!text.contains("source flaky entered"), "the flapping source stays muted: {text}");
    bot_api.reply().await;

    // A key at 80 %, then 100 % of its quota: one alert each.
    let team = switchyard::domain::Account::Tokens(KeyName::new("team"));
    gw.gateway.scheduler.add_key_usage(&team, Period::Never, 85);
    bot.check_alerts().await;
    assert!(bot_api.reply().await.1.contains("key team has used 85 of 100 tokens (80 %)"));
    bot_api.reply().await;
    bot.check_alerts().await;
    gw.gateway.scheduler.add_key_usage(&team, Period::Never, 20);
    bot.check_alerts().await;
    let (_, text, _) = bot_api.reply().await;
    assert!(text.contains("key team has used 105 of 100 tokens (100 %): further requests are refused"), "{text}");
    bot_api.reply().await;

    // Its budget past 50 %, then 80 %: one alert each, in dollars.
    let dollars = switchyard::domain::Account::KeyUsd(KeyName::new("team"));
    let usd = |text: &str| switchyard::domain::Usd::parse(text).unwrap().pico() as u64;
    gw.gateway.scheduler.add_key_usage(&dollars, Period::Month, usd("1.10"));
    bot.check_alerts().await;
    let (_, text, _) = bot_api.reply().await;
    assert!(text.contains("key team has spent $1.1 of its $2 budget per month (50 %)"), "{text}");
    bot_api.reply().await;
    gw.gateway.scheduler.add_key_usage(&dollars, Period::Month, usd("0.60"));
    bot.check_alerts().await;
    assert!(bot_api.reply().await.1.contains("$1.7 of its $2 budget per month (80 %)"));
    bot_api.reply().await;
    // Nothing new: nothing sent (a send would be on the channel by the time the check returns).
    bot.check_alerts().await;
    while let Ok((method, body)) = bot_api.calls.try_recv() {
        assert_ne!(method, "sendMessage", "no alert without news: {body}");
    }
}

/// The real binary with only the bot configured (chat `OPERATOR` allowed), against `bot_api`.
fn bot_binary(dir: &std::path::Path, bot_api: &BotMock) -> Binary {
    Binary::start(
        dir,
        &format!(
            "admin_token: {ADMIN}\ntelegram: {{bot_token: '{TOKEN}', allowed_chats: [{OPERATOR}], api_base: '{}', poll_timeout_seconds: 1}}\n",
            bot_api.url
        ),
    )
}

/// Some line of `lines` contains `what`.
fn seen(lines: &[String], what: &str) -> bool {
    lines.iter().any(|l| l.contains(what))
}

/// Reads the binary's log into `lines` until `done` holds of them (bounded by `GUARD`).
async fn read_log(gateway: &mut Binary, lines: &mut Vec<String>, done: impl Fn(&[String]) -> bool) {
    tokio::time::timeout(GUARD, async {
        while !done(&lines[..]) {
            lines.push(gateway.log.recv().await.expect("the log goes on"));
        }
    })
    .await
    .unwrap_or_else(|_| panic!("the awaited lines are not in the log {lines:?}"));
}

#[tokio::test]
async fn the_real_binary_never_logs_the_bot_token() {
    let mut bot_api = BotMock::start().await;
    // A Bot API that fails in the ways that echo the URL back: a proxy's HTML, and an error
    // description naming the token.
    *bot_api.state.broken.lock().unwrap() =
        Some((401, format!(r#"{{"ok":false,"error_code":401,"description":"Unauthorized: bot{TOKEN} was revoked"}}"#)));
    let dir = tempfile::tempdir().unwrap();
    let mut gateway = bot_binary(dir.path(), &bot_api);
    bot_api.next("setMyCommands").await;
    bot_api.next("getUpdates").await;
    let mut lines = Vec::new();
    read_log(&mut gateway, &mut lines, |lines| {
        seen(lines, "telegram: getUpdates failed") && seen(lines, "telegram bot started")
    })
    .await;
    let warned = lines.iter().find(|l| l.contains("telegram: getUpdates failed")).unwrap();
    assert!(warned.contains("Unauthorized: bot*** was revoked"), "{warned}");
    let secret = TOKEN.split(':').nth(1).unwrap();
    assert!(lines.iter().all(|l| !l.contains(secret)), "the token leaked: {lines:?}");
    gateway.assert_alive("the Bot API failing").await;
}

#[tokio::test]
async fn the_real_binary_logs_a_strangers_chat_id_once_and_answers_only_allowed_chats() {
    let mut bot_api = BotMock::start().await;
    let dir = tempfile::tempdir().unwrap();
    let mut gateway = bot_binary(dir.path(), &bot_api);
    bot_api.say(999, "/clear");
    bot_api.say(999, "/stats_reset");
    bot_api.say(OPERATOR, "/help");
    assert_eq!(bot_api.reply().await.0, OPERATOR, "the first answer is the operator's: the stranger got none");
    // The operator's command is logged before it runs, after the stranger's messages were handled.
    let mut lines = Vec::new();
    let operators = |l: &String| l.contains("telegram command") && l.contains(&format!("chat={OPERATOR}"));
    read_log(&mut gateway, &mut lines, |lines| lines.iter().any(&operators)).await;
    let ignored: Vec<&String> =
        lines.iter().filter(|l| l.contains("ignoring a chat not in telegram.allowed_chats")).collect();
    assert_eq!(ignored.len(), 1, "logged once, not for every message: {lines:?}");
    assert!(ignored[0].contains("chat=999"), "with the chat's id: {}", ignored[0]);
}

#[test]
fn a_bot_config_is_checked_by_field() {
    crate::authoring::refused_config(
        "admin_token: ''\ntelegram: {bot_token: '', allowed_chats: [], api_base: 'ftp://x', poll_timeout_seconds: 90}\n",
        &[
            "telegram.bot_token: is empty",
            "telegram.allowed_chats: lists no chat: the bot would answer no one",
            "telegram.api_base: `ftp://x` is not an http(s) URL",
            "telegram.poll_timeout_seconds: must be a whole number from 1 to 50, not 90",
            "telegram: the bot acts through the admin API, which admin_token turns off",
        ],
    );
}
