//! What an installed gateway relies on from the machine it lands on: a container from scratch
//! has no CA bundle, and the gateway still starts and serves.

use crate::support::binary::Binary;
use crate::support::{MockUpstream, chat_body};

#[tokio::test]
async fn without_system_ca_certificates_the_gateway_starts_on_its_built_in_roots() {
    let mock = MockUpstream::start().await;
    let dir = tempfile::tempdir().unwrap();
    let sources = format!(
        "sources:\n  - {{name: mock, base_url: '{}', stream_whole_answers: false, models: [{{name: fixture}}]}}\n",
        mock.url
    );
    // rustls-native-certs reads these first: pointed at nothing, the system has no roots.
    let nowhere = dir.path().join("no-such-ca-bundle");
    let nowhere = nowhere.to_str().unwrap();
    let mut binary = Binary::start_env(dir.path(), &sources, &[("SSL_CERT_FILE", nowhere), ("SSL_CERT_DIR", nowhere)]);
    binary.assert_alive("a start without CA certificates").await;
    assert_eq!(binary.chat(&chat_body("fixture", false)).await.status(), 200, "a plain-http source serves");
    // Logged while the clients were made, before the gateway said it listens.
    let mut warned = false;
    while let Ok(line) = binary.log.try_recv() {
        warned |= line.contains("no CA certificates could be loaded from the system")
            && line.contains("Mozilla roots built into switchyard");
    }
    assert!(warned, "the start says which roots https upstreams are checked against");
}

#[tokio::test]
async fn switchyard_health_answers_for_a_container_health_check() {
    let dir = tempfile::tempdir().unwrap();
    let mut binary = Binary::start(dir.path(), "");
    // Run where no config.yaml is: with --url none is read.
    let elsewhere = tempfile::tempdir().unwrap();
    let health = |url: &str| {
        std::process::Command::new(env!("CARGO_BIN_EXE_switchyard"))
            .current_dir(elsewhere.path())
            .args(["health", "--url", url])
            .output()
            .unwrap()
    };
    let up = health(&binary.url);
    assert!(up.status.success(), "{}", String::from_utf8_lossy(&up.stderr));
    assert!(String::from_utf8_lossy(&up.stdout).contains("/health: 200 OK"));
    let url = binary.url.clone();
    assert!(binary.terminate(), "a clean stop");
    let down = health(&url);
    assert_eq!(down.status.code(), Some(1), "a gateway that is gone is unhealthy");
    assert!(String::from_utf8_lossy(&down.stderr).contains("/health"), "{}", String::from_utf8_lossy(&down.stderr));
}

#[test]
fn root_does_not_write_into_a_data_dir_that_belongs_to_the_service_user() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir(&data).unwrap();
    let config = dir.path().join("config.yaml");
    std::fs::write(&config, format!("data_dir: {}\nsources: []\n", data.display())).unwrap();
    let check = || {
        std::process::Command::new(env!("CARGO_BIN_EXE_switchyard"))
            .args(["check", "--config", config.to_str().unwrap()])
            .output()
            .unwrap()
    };
    // As root (CI, a package's postinst), hand the directory to "nobody" as a package hands it
    // to `switchyard`; anyone else cannot, and the check must then go ahead as usual.
    let root = std::process::Command::new("id").arg("-u").output().unwrap().stdout == b"0\n";
    if root {
        std::os::unix::fs::chown(&data, Some(65534), Some(65534)).unwrap();
        let refused = check();
        let err = String::from_utf8_lossy(&refused.stderr);
        assert_eq!(refused.status.code(), Some(1), "{err}");
        assert!(err.contains("belongs to uid 65534, and this runs as root") && err.contains("sudo -u"), "{err}");
        assert_eq!(std::fs::read_dir(&data).unwrap().count(), 0, "nothing was made in it");
    } else {
        let checked = check();
        assert!(checked.status.success(), "{}", String::from_utf8_lossy(&checked.stderr));
    }
}
