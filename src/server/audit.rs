//! The audit trail's writing side, for the admin API and single sign-on: what a write request
//! changed (collected while its handler runs, by `Gateway::edit` and by handlers that change
//! files), and the entry recorded, logged and sent to the other replicas.

use std::sync::{Arc, Mutex};

use serde_json::Value;

use crate::access::{Actor, AuditEntry, Outcome, changes_between};
use crate::server::{Gateway, Runtime};

/// What one admin request changed so far.
#[derive(Default)]
pub struct Trail {
    /// (before, after) runtime files of each edit it made.
    edits: Vec<(Value, Value)>,
    notes: Vec<String>,
}

tokio::task_local! {
    static TRAIL: Arc<Mutex<Trail>>;
}

/// Runs `request` (an admin write) with a trail collecting what it changes.
pub async fn collecting<F: std::future::Future>(request: F) -> (F::Output, Trail) {
    let trail = Arc::new(Mutex::new(Trail::default()));
    let out = TRAIL.scope(trail.clone(), request).await;
    let trail = std::mem::take(&mut *trail.lock().unwrap_or_else(|p| p.into_inner()));
    (out, trail)
}

/// Called by `Gateway::edit` for each runtime it put in use on an admin request.
pub fn edited(before: &Runtime, after: &Runtime) {
    let _ = TRAIL.try_with(|trail| {
        trail.lock().unwrap_or_else(|p| p.into_inner()).edits.push((view(before), view(after)));
    });
}

/// What an operator changes, as the trail compares it: the runtime file, with the sources,
/// routes and policies in use (config.yaml's merged in), so a change to one of config.yaml's
/// shows the object before and after rather than an override appearing.
fn view(runtime: &Runtime) -> Value {
    let mut view = serde_json::to_value(&runtime.file).unwrap_or(Value::Null);
    if let Value::Object(sections) = &mut view {
        let json = |v: Result<Value, serde_json::Error>| v.unwrap_or(Value::Null);
        sections.insert("sources".into(), json(serde_json::to_value(&runtime.config.sources)));
        sections.insert("routes".into(), json(serde_json::to_value(&runtime.config.routes)));
        sections.insert("policies".into(), json(serde_json::to_value(&runtime.config.policies)));
        // Deletions show as the object gone from the lists above.
        sections.remove("deleted_sources");
        sections.remove("deleted_routes");
    }
    view
}

/// What a handler changed outside the runtime file (an upload's digest and size, a pause).
pub fn note(text: impl Into<String>) {
    let _ = TRAIL.try_with(|trail| trail.lock().unwrap_or_else(|p| p.into_inner()).notes.push(text.into()));
}

/// Where an admin request came from and what it asked.
pub struct Asked {
    pub method: String,
    pub path: String,
    pub peer: Option<String>,
}

impl Asked {
    /// What `request` asks, and its client's address as the throttle sees it (none in-process).
    pub fn of<B>(request: &axum::http::Request<B>) -> Asked {
        Asked {
            method: request.method().to_string(),
            path: request.uri().path().to_string(),
            peer: peer_of(request).map(|p| p.to_string()),
        }
    }
}

/// The client's address as the throttle sees it; none for the bot's in-process calls.
pub fn peer_of<B>(request: &axum::http::Request<B>) -> Option<std::net::IpAddr> {
    request
        .extensions()
        .get::<axum::extract::ConnectInfo<std::net::SocketAddr>>()
        .map(|c| crate::server::throttle::client_of(c.0.ip(), request.headers()))
}

impl Gateway {
    /// An entry for what `actor` asked, stamped with this replica and the clock.
    pub(crate) fn audit_entry(
        &self,
        actor: Option<&Actor>,
        asked: &Asked,
        outcome: Outcome,
        status: u16,
    ) -> AuditEntry {
        AuditEntry {
            id: uuid::Uuid::new_v4().simple().to_string(),
            at_ms: self.scheduler.now().0,
            actor: actor.map_or_else(|| "unknown".to_string(), |a| a.name.clone()),
            via: actor.map_or("", |a| a.via.as_str()).to_string(),
            role: actor.map(|a| a.role),
            peer: asked.peer.clone(),
            replica: self.shared.as_ref().map(|s| s.replica().to_string()),
            method: asked.method.clone(),
            path: asked.path.clone(),
            outcome,
            status,
            changes: Vec::new(),
            note: None,
        }
    }

    /// An entry for a write that ran, with what its trail collected.
    pub(crate) fn audit_write(&self, actor: &Actor, asked: &Asked, status: u16, trail: Trail) {
        let mut entry = self.audit_entry(Some(actor), asked, Outcome::of_status(status), status);
        let mut left_out = 0;
        for (before, after) in &trail.edits {
            let (changes, more) = changes_between(before, after);
            entry.changes.extend(changes);
            left_out += more;
        }
        let mut notes = trail.notes;
        if left_out > 0 {
            notes.push(format!("{left_out} more changed objects not recorded"));
        }
        entry.note = (!notes.is_empty()).then(|| notes.join("; "));
        self.record_audit(entry);
    }

    /// Appends an entry to the trail, logs it as a structured line, and sends it to the other
    /// replicas.
    pub(crate) fn record_audit(&self, entry: AuditEntry) {
        let entry = entry.bounded();
        tracing::info!(
            target: "switchyard::audit",
            actor = %crate::logsafe::Escaped(&entry.actor),
            via = entry.via,
            role = entry.role.map(|r| r.as_str()),
            peer = entry.peer,
            method = entry.method,
            path = %crate::logsafe::Escaped(&entry.path),
            outcome = entry.outcome.as_str(),
            status = entry.status,
            changes = entry.changes.len(),
            "audit"
        );
        if let Some(shared) = &self.shared {
            shared.publish_audit(&entry);
        }
        self.state.audit(entry);
    }
}
