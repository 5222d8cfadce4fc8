//! The first run: with no config.yaml in the data folder, the starting configs on offer (the
//! repository's example, or a template of the app's) and writing the chosen one, mode 600.

use anyhow::{anyhow, bail};

use crate::data_dir::{self, Paths};

/// A starting config.
pub struct Template {
    pub id: &'static str,
    pub title: &'static str,
    pub about: &'static str,
    text: &'static str,
}

/// Where a template's new client key goes.
const CLIENT_KEY: &str = "{{CLIENT_KEY}}";
/// The example's key: public (it is in the repository), so the desktop never serves it — any
/// local user or a page rebinding its name to 127.0.0.1 could spend the user's upstream credit.
const EXAMPLE_KEY: &str = "${SWITCHYARD_KEY:-sk-switchyard-dev-key}";

pub const TEMPLATES: &[Template] = &[
    Template {
        id: "example",
        title: "The example config",
        about: "OpenAI (its key from OPENAI_API_KEY, or added later in the WebUI) and a local Ollama, \
                as the README starts with, and a client key of your own.",
        text: include_str!("../../config.example.yaml"),
    },
    Template {
        id: "local",
        title: "Local models",
        about: "Ollama on this machine, its models asked at each start, and a client key of your own.",
        text: include_str!("../templates/local.yaml"),
    },
    Template {
        id: "empty",
        title: "Empty",
        about: "No sources yet: add them in the WebUI (Sources, with its source templates). A client key of \
                your own.",
        text: include_str!("../templates/empty.yaml"),
    },
];

/// Whether the data folder has no config yet.
pub fn needed(paths: &Paths) -> bool {
    !paths.config().exists()
}

/// Writes template `id` as the data folder's config.yaml (never over one that exists), with a
/// new client key where the template has one.
pub fn write(paths: &Paths, id: &str) -> anyhow::Result<()> {
    let Some(template) = TEMPLATES.iter().find(|t| t.id == id) else {
        let ids: Vec<&str> = TEMPLATES.iter().map(|t| t.id).collect();
        bail!("there is no template `{id}`: choose one of {}", ids.join(", "));
    };
    let text = format!(
        "# Written by Switchyard desktop at its first run, from \"{}\". Edit it while the app is stopped;\n\
         # what the WebUI changes goes to data/runtime.yaml.\n{}",
        template.title,
        template.text.replace(EXAMPLE_KEY, CLIENT_KEY).replace(CLIENT_KEY, &new_client_key())
    );
    let file = paths.config();
    data_dir::create_private(&file, text).map_err(|e| anyhow!("{e:#} (a config is there already?)"))?;
    tracing::info!(template = id, file = %file.display(), "wrote the first config");
    Ok(())
}

/// A client key shaped as the admin API makes them (`sk-sy-`, then two v4 UUIDs' hex: the OS's
/// cryptographic generator).
fn new_client_key() -> String {
    let tail = uuid::Uuid::new_v4().simple().to_string();
    format!("sk-sy-{}{}", uuid::Uuid::new_v4().simple(), &tail[..16])
}
