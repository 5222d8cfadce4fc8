#!/usr/bin/env bash
# The two products as they ship, checked end to end: both built in release, the desktop app
# driven under Xvfb, every package built, the .debs installed and inspected, the manifests checked.
# Usage: packaging/test.sh   (as root: the .deb test installs into a chroot). The README's test
# command ends with it; .ci/run installs the Debian packages it needs (docs/gui.md, docs/deployment.md).
set -euo pipefail
cd "$(dirname "$0")/.."

started=$SECONDS
step() { echo "== $* ($((SECONDS - started)) s)"; }

step "release build: the gateway and the desktop app"
cargo build --release -p switchyard -p switchyard-desktop

step "the desktop crate's unit tests (its release dependencies, already built)"
cargo test --release -p switchyard-desktop

step "the desktop app under Xvfb"
desktop/xvfb-test.sh target/release/switchyard-desktop

step "packages"
packaging/build.sh --desktop target/release/switchyard-desktop

step "the headless .deb on a clean Debian root"
packaging/test-deb.sh

step "the desktop .deb"
SWITCHYARD_TEST_XVFB=1 packaging/test-desktop-deb.sh

step "Kubernetes manifests and the Helm chart"
packaging/test-kubernetes.sh

step "products: all passed"
