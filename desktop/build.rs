// Tauri's build step: reads tauri.conf.json (the identifier, the icons) and prepares what
// `tauri::generate_context!()` embeds. No frontend to bundle: the window loads the gateway's WebUI.
fn main() {
    tauri_build::build()
}
