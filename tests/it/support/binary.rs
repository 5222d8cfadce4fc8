//! The real `switchyard` binary as a child process on a temporary config: started, its stderr
//! log read line by line, checked alive, killed when dropped.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;

use super::KEY;
use super::gateway::shared_cache;

/// How long a call to the child may take before the test fails.
const GUARD: Duration = Duration::from_secs(10);

/// The real `switchyard` binary, killed when dropped; its log lines arrive on `log`.
pub struct Binary {
    child: Child,
    pub url: String,
    pub log: tokio::sync::mpsc::UnboundedReceiver<String>,
}

impl Binary {
    /// Starts it on a config of `tester` and `rest` in `dir`; returns once it listens.
    pub fn start(dir: &Path, rest: &str) -> Binary {
        Binary::start_with_keys(dir, &format!("  - {{name: tester, key: {KEY}, models: ['*']}}\n"), rest)
    }

    /// Starts it with `keys` (the lines of the `keys:` list) and `rest` in `dir`.
    pub fn start_with_keys(dir: &Path, keys: &str, rest: &str) -> Binary {
        Binary::start_with(dir, keys, rest, &[])
    }

    /// As [`Binary::start`], with these environment variables set for the process (an empty
    /// value unsets it: `("SWITCHYARD_LOG", "")` leaves the log at its default).
    pub fn start_env(dir: &Path, rest: &str, env: &[(&str, &str)]) -> Binary {
        Binary::start_with(dir, &format!("  - {{name: tester, key: {KEY}, models: ['*']}}\n"), rest, env)
    }

    fn start_with(dir: &Path, keys: &str, rest: &str, env: &[(&str, &str)]) -> Binary {
        let config = dir.join("config.yaml");
        let yaml = format!(
            "listen: 127.0.0.1:0\ndata_dir: {data}\ncache_dir: {cache}\nkeys:\n{keys}{rest}",
            data = dir.display(),
            cache = shared_cache().display()
        );
        std::fs::write(&config, yaml).unwrap();
        let mut command = Command::new(env!("CARGO_BIN_EXE_switchyard"));
        command.arg("--config").arg(&config).env("SWITCHYARD_LOG", "info");
        for (name, value) in env {
            if value.is_empty() {
                command.env_remove(name);
            } else {
                command.env(name, value);
            }
        }
        let mut child =
            command.stderr(Stdio::piped()).stdout(Stdio::null()).spawn().expect("the switchyard binary starts");
        let (tx, log) = tokio::sync::mpsc::unbounded_channel();
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let url = loop {
            let line = lines.next().expect("the gateway logs until it listens").unwrap();
            let _ = tx.send(line.clone());
            if let Some(at) = line.find("listening on ") {
                // Text or JSON: the address runs to the first space or quote.
                let rest = &line[at + "listening on ".len()..];
                break rest.chars().take_while(|c| !c.is_whitespace() && *c != '"').collect();
            }
        };
        // Keep draining the log so the child never blocks on a full pipe.
        std::thread::spawn(move || {
            for line in lines.map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        Binary { child, url, log }
    }

    /// The process id, to inspect or limit it from outside.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The process is running and answers `GET /health`.
    pub async fn assert_alive(&mut self, after: &str) {
        let exited = self.child.try_wait().unwrap();
        assert!(exited.is_none(), "the gateway process ended ({exited:?}) after {after}");
        let health = tokio::time::timeout(GUARD, reqwest::get(format!("{}/health", self.url)))
            .await
            .expect("GET /health in time");
        assert_eq!(health.expect("the gateway answers /health").status(), 200, "after {after}");
    }

    /// Stops it as an operator would (SIGTERM: open requests finish, state is sent and
    /// committed) and waits for it to end; true when it exited cleanly.
    pub fn terminate(&mut self) -> bool {
        let sent = Command::new("kill").arg("-TERM").arg(self.child.id().to_string()).status().unwrap();
        assert!(sent.success(), "SIGTERM sent");
        self.child.wait().unwrap().success()
    }

    pub async fn chat(&self, body: &Value) -> reqwest::Response {
        let request =
            reqwest::Client::new().post(format!("{}/v1/chat/completions", self.url)).bearer_auth(KEY).json(body);
        tokio::time::timeout(GUARD, request.send())
            .await
            .expect("an answer in time")
            .expect("the gateway process answers")
    }
}

impl Drop for Binary {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
