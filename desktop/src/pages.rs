//! The app's own pages on `switchyard://localhost/`, answered in-process (no server, no script,
//! no IPC): the first-run choice of a starting config, and the problem page when the gateway fails.

use tauri::AppHandle;
use tauri::http::{Request, Response, StatusCode, header};

use crate::{desktop, first_run, tray};

/// The scheme the pages are served on.
pub const SCHEME: &str = "switchyard";

const STYLE: &str = "body{font:15px/1.5 system-ui,sans-serif;margin:0;padding:32px 40px;color:#111827;background:#f9fafb}\
h1{font-size:22px;margin:0 0 4px}p.lead{color:#4b5563;margin:0 0 24px}\
a.choice{display:block;padding:14px 16px;margin:0 0 12px;border:1px solid #d1d5db;border-radius:10px;background:#fff;\
color:inherit;text-decoration:none}a.choice:hover,a.choice:focus{border-color:#2563eb;outline:none}\
a.choice b{display:block;color:#1d4ed8}pre{white-space:pre-wrap;background:#fff;border:1px solid #fecaca;\
border-radius:8px;padding:12px}.actions a{margin-right:16px}code{font-size:13px}\
@media (prefers-color-scheme:dark){body{background:#111827;color:#e5e7eb}p.lead{color:#9ca3af}\
a.choice,pre{background:#1f2937;border-color:#374151}a.choice b{color:#93c5fd}}";

/// Answers one request for a page (the links below are the pages' only controls).
pub fn answer(app: &AppHandle, request: &Request<Vec<u8>>) -> Response<Vec<u8>> {
    let path = request.uri().path();
    let body = match path {
        "/" => first_run_page(app, None),
        "/problem" => problem_page(app),
        "/retry" => {
            launch_in_background(app);
            starting_page()
        }
        "/open-data-folder" => {
            if let Err(e) = tray::open_data_folder(app) {
                tracing::warn!("cannot open the data folder: {e:#}");
            }
            problem_page(app)
        }
        _ => match path.strip_prefix("/start/") {
            Some(template) => match start(app, template) {
                Ok(()) => starting_page(),
                Err(e) => first_run_page(app, Some(&format!("{e:#}"))),
            },
            None => return html(StatusCode::NOT_FOUND, page("Not found", "<p>There is no such page.</p>")),
        },
    };
    html(StatusCode::OK, body)
}

/// The first run's choice: writes template `id` as config.yaml (if there is none yet), then
/// starts the gateway; the same function `--first-run=ID` leads to.
fn start(app: &AppHandle, id: &str) -> anyhow::Result<()> {
    let paths = desktop(app).paths()?.clone();
    if first_run::needed(&paths) {
        first_run::write(&paths, id)?;
    }
    launch_in_background(app);
    Ok(())
}

/// Starts the gateway on a thread of its own: the page answers at once, and the WebUI's window
/// replaces this one when the gateway serves.
fn launch_in_background(app: &AppHandle) {
    let app = app.clone();
    if let Err(e) = std::thread::Builder::new().name("launch".into()).spawn(move || crate::launch(&app)) {
        tracing::error!("cannot start the gateway: {e}");
    }
}

fn first_run_page(app: &AppHandle, error: Option<&str>) -> String {
    let folder = desktop(app).paths().map(|p| p.root.display().to_string()).unwrap_or_default();
    let mut body = format!(
        "<p class=\"lead\">There is no <code>config.yaml</code> in <code>{}</code> yet. Start from one of these; \
         everything can be changed later in the WebUI.</p>",
        escape(&folder)
    );
    if let Some(error) = error {
        body.push_str(&format!("<pre>{}</pre>", escape(error)));
    }
    for template in first_run::TEMPLATES {
        body.push_str(&format!(
            "<a class=\"choice\" href=\"/start/{}\"><b>{}</b>{}</a>",
            template.id,
            escape(template.title),
            escape(template.about)
        ));
    }
    page("Welcome to Switchyard", &body)
}

fn problem_page(app: &AppHandle) -> String {
    let why = desktop(app).problem().unwrap_or_else(|| "no problem is known: the gateway may be starting".into());
    let body = format!(
        "<p class=\"lead\">The gateway did not start.</p><pre>{}</pre>\
         <p>Fix <code>config.yaml</code> in the data folder, then retry.</p>\
         <p class=\"actions\"><a href=\"/retry\">Retry</a><a href=\"/open-data-folder\">Open the data folder</a></p>",
        escape(&why)
    );
    page("Switchyard did not start", &body)
}

fn starting_page() -> String {
    // The problem page shows up by itself if the start fails; this one only waits.
    page("Starting the gateway…", "<p class=\"lead\">The WebUI opens in a moment.</p>")
}

fn page(title: &str, body: &str) -> String {
    format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"color-scheme\" \
         content=\"light dark\"><title>Switchyard</title><style>{STYLE}</style></head><body><h1>{}</h1>{body}\
         </body></html>",
        escape(title)
    )
}

fn html(status: StatusCode, body: String) -> Response<Vec<u8>> {
    Response::builder()
        .status(status)
        .header(header::CONTENT_TYPE, "text/html; charset=utf-8")
        // Nothing but the page itself: no script, no other origin.
        .header(header::CONTENT_SECURITY_POLICY, "default-src 'none'; style-src 'unsafe-inline'")
        .body(body.into_bytes())
        .unwrap_or_default()
}

/// Text as HTML text (paths and error messages may hold anything).
fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_escaped_and_every_template_is_offered() {
        assert_eq!(escape("<a href=\"x\">&</a>"), "&lt;a href=&quot;x&quot;&gt;&amp;&lt;/a&gt;");
        let ids: Vec<&str> = first_run::TEMPLATES.iter().map(|t| t.id).collect();
        assert_eq!(ids, ["example", "local", "empty"]);
    }
}
