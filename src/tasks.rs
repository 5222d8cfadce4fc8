//! The one door to `tokio::spawn` (clippy.toml forbids the bare call): every task has a name,
//! and a panic in one is logged with it before it unwinds into its `JoinHandle` as usual.

use std::future::Future;
use std::panic::AssertUnwindSafe;

use futures::FutureExt;
use tokio::task::JoinHandle;

/// Runs `future` as a task called `name` (a noun: `"metrics listener"`, `"client connection"`).
pub fn spawn<F>(name: &'static str, future: F) -> JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    // `catch_unwind` costs nothing until something panics.
    let named = async move {
        match AssertUnwindSafe(future).catch_unwind().await {
            Ok(output) => output,
            Err(panic) => {
                let what = panic
                    .downcast_ref::<&str>()
                    .map(|s| (*s).to_string())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_default();
                tracing::error!(task = name, "a task panicked: {what}");
                std::panic::resume_unwind(panic)
            }
        }
    };
    #[expect(clippy::disallowed_methods, reason = "the one place tasks are spawned")]
    tokio::spawn(named)
}

#[cfg(test)]
mod tests {
    #[tokio::test]
    async fn a_task_returns_its_output_and_a_panic_still_reaches_its_handle() {
        assert_eq!(super::spawn("adder", async { 2 + 2 }).await.unwrap(), 4);
        let failed = super::spawn("doomed", async { panic!("on purpose") }).await.unwrap_err();
        assert!(failed.is_panic());
    }
}
