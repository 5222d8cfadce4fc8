//! Tools for policy authors (`switchyard policy ...`): load a policy exactly as the gateway
//! would, replay recorded policy cases through it, and check it (docs/policies.md, "Writing
//! one").

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::Deserialize;
use serde_json::Value;

use super::matching::{Match, differences, short};
use super::replay::{Replayed, StreamStep, replay};
use crate::config::{DEFAULT_BODY_LIMIT_MB, SandboxConfig};
use crate::plugin::{
    BUILTIN_POLICIES, Denial, Hooks, MAX_HOLD_BACK, PluginHost, PolicyContext, PolicyFailure, PolicyPlugin,
    SandboxLimits, Verdict,
};

/// Largest case file read.
const MAX_CASE_BYTES: u64 = 16 << 20;

/// A call slower than this is named as a problem by `policy check`: every request pays it.
const SLOW_CALL: Duration = Duration::from_millis(10);

/// A policy loaded for an author, with what loading it cost.
pub struct LoadedPolicy {
    pub plugin: PolicyPlugin,
    pub limits: SandboxLimits,
    /// The component's size.
    pub bytes: usize,
    /// Time to compile (or read from the cache), instantiate and call `describe`.
    pub load_time: Duration,
    pub builtin: bool,
}

/// Loads `target` — a `.wasm` policy component or a built-in policy's name — in the sandbox
/// the gateway gives a policy with its default config (and the author's limits, if given).
pub async fn load_policy(
    target: &str,
    cache_dir: Option<PathBuf>,
    limits: &super::AuthorLimits,
) -> Result<LoadedPolicy, String> {
    let path = Path::new(target);
    let builtin = BUILTIN_POLICIES.iter().find(|(name, _)| *name == target);
    let (name, wasm) = match builtin {
        Some((name, wasm)) if !path.exists() => (name.to_string(), wasm.to_vec()),
        _ if path.extension().is_some_and(|x| x == "wasm") || path.exists() => {
            let stem =
                path.file_stem().and_then(|s| s.to_str()).ok_or_else(|| format!("`{target}` has no file name"))?;
            (stem.to_string(), std::fs::read(path).map_err(|e| format!("cannot read {target}: {e}"))?)
        }
        _ => {
            let names: Vec<&str> = BUILTIN_POLICIES.iter().map(|(n, _)| *n).collect();
            return Err(format!("`{target}` is neither a .wasm file nor a built-in policy ({})", names.join(", ")));
        }
    };
    let defaults = SandboxConfig::default().limits((DEFAULT_BODY_LIMIT_MB as usize) << 20);
    let limits = SandboxLimits {
        memory_bytes: limits.memory_mb.map_or(defaults.memory_bytes, |mb| (mb as usize) << 20),
        cpu_per_call: limits.cpu_ms_per_call.map_or(defaults.cpu_per_call, Duration::from_millis),
        wall_per_call: match limits.cpu_ms_per_call.map(Duration::from_millis) {
            Some(cpu) if cpu > defaults.wall_per_call => cpu,
            _ => defaults.wall_per_call,
        },
        ..defaults
    };
    let (host, _) = PluginHost::load(limits.clone(), cache_dir, None, Default::default())
        .await
        .map_err(|e| format!("the WebAssembly engine did not start: {e:#}"))?;
    let started = Instant::now();
    let plugin = host.load_policy(&name, &wasm, limits.clone()).await?;
    let load_time = started.elapsed();
    Ok(LoadedPolicy { plugin, limits, bytes: wasm.len(), load_time, builtin: builtin.is_some() && !path.exists() })
}

/// One recorded policy case.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicyCase {
    #[serde(default)]
    pub about: String,
    pub hook: CaseHook,
    /// The policy's settings; a number or boolean is handed over as its text.
    #[serde(default)]
    pub settings: BTreeMap<String, Value>,
    #[serde(default)]
    pub context: CaseContext,
    /// A request or answer (JSON; a string is handed over as it is), or a stream's text deltas.
    pub input: Value,
    pub expect: Expected,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CaseHook {
    Request,
    Answer,
    Stream,
}

impl CaseHook {
    fn name(self) -> &'static str {
        match self {
            CaseHook::Request => "request",
            CaseHook::Answer => "answer",
            CaseHook::Stream => "stream",
        }
    }

    fn flag(self) -> Hooks {
        match self {
            CaseHook::Request => Hooks::REQUEST,
            CaseHook::Answer => Hooks::ANSWER,
            CaseHook::Stream => Hooks::STREAM,
        }
    }
}

/// The context a hook is handed; what a case leaves out is filled in as the gateway would
/// (a request is seen before routing: no source; an answer or stream has one).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CaseContext {
    pub request_id: Option<String>,
    pub key: Option<String>,
    pub route: Option<String>,
    pub requested_model: Option<String>,
    pub source: Option<String>,
    pub resolved_model: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ExpectedVerdict {
    Allow,
    Rewrite,
    Deny,
}

impl ExpectedVerdict {
    fn name(self) -> &'static str {
        match self {
            ExpectedVerdict::Allow => "allow",
            ExpectedVerdict::Rewrite => "rewrite",
            ExpectedVerdict::Deny => "deny",
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Expected {
    pub verdict: ExpectedVerdict,
    /// The rewritten request or answer (JSON: every field it lists must match; text: equal),
    /// or for a stream the text the client sees in all.
    pub rewrite: Option<Value>,
    pub status: Option<u16>,
    pub code: Option<String>,
    pub message_contains: Option<String>,
}

/// A policy case file read and checked for sense.
pub fn read_policy_case(file: &Path) -> Result<PolicyCase, String> {
    let size = std::fs::metadata(file).map_err(|e| format!("cannot read {}: {e}", file.display()))?.len();
    if size > MAX_CASE_BYTES {
        return Err(format!("{} is larger than {} MiB", file.display(), MAX_CASE_BYTES >> 20));
    }
    let text = std::fs::read(file).map_err(|e| format!("cannot read {}: {e}", file.display()))?;
    let case: PolicyCase = serde_json::from_slice(&text).map_err(|e| format!("not a valid policy case: {e}"))?;
    if case.hook == CaseHook::Stream {
        let deltas = case.input.as_array().filter(|d| d.iter().all(Value::is_string));
        if deltas.is_none() {
            return Err("a stream case's `input` is a list of text deltas (strings)".into());
        }
        if case.expect.rewrite.as_ref().is_some_and(|r| !r.is_string()) {
            return Err("a stream case's `expect.rewrite` is the text the client sees (a string)".into());
        }
    }
    let denial_fields = case.expect.status.is_some() || case.expect.code.is_some();
    if denial_fields && case.expect.verdict != ExpectedVerdict::Deny {
        return Err("`expect.status` and `expect.code` go with `\"verdict\": \"deny\"`".into());
    }
    Ok(case)
}

impl PolicyCase {
    fn context(&self) -> PolicyContext {
        let c = &self.context;
        let routed = self.hook != CaseHook::Request;
        let model_in = self.input.get("model").and_then(Value::as_str).map(str::to_string);
        PolicyContext {
            request_id: c.request_id.clone().unwrap_or_else(|| "case".into()),
            key: c.key.clone().unwrap_or_else(|| "test".into()),
            route: c.route.clone(),
            requested_model: c.requested_model.clone().or(model_in).unwrap_or_else(|| "model-x".into()),
            source: c.source.clone().or_else(|| routed.then(|| "test".into())),
            resolved_model: c.resolved_model.clone().or_else(|| routed.then(|| "model-x".into())),
            settings: self
                .settings
                .iter()
                .map(|(k, v)| (k.clone(), v.as_str().map_or_else(|| v.to_string(), str::to_string)))
                .collect(),
        }
    }

    fn body(&self) -> String {
        match &self.input {
            Value::String(text) => text.clone(),
            other => other.to_string(),
        }
    }
}

/// What playing a policy case showed: each difference from what it expected (none: passed).
#[derive(Debug, Default)]
pub struct PolicyOutcome {
    pub failures: Vec<String>,
    pub summary: String,
}

/// Plays `case` through `plugin`, as the gateway would call it.
pub async fn run_policy_case(plugin: &PolicyPlugin, case: &PolicyCase) -> PolicyOutcome {
    let mut out = PolicyOutcome::default();
    let hook = case.hook;
    if !plugin.has(hook.flag()) {
        out.summary = format!("no {} hook", hook.name());
        out.failures.push(format!(
            "the policy has no {} hook (describe() declares {}): the gateway never calls it, so everything passes",
            hook.name(),
            hooks_list(plugin)
        ));
        return out;
    }
    let context = case.context();
    let expect = &case.expect;
    match hook {
        CaseHook::Request | CaseHook::Answer => {
            let body = case.body();
            let verdict = if hook == CaseHook::Request {
                plugin.on_request(&context, &body).await
            } else {
                plugin.on_answer(&context, &body).await
            };
            let verdict = match verdict {
                Ok(verdict) => verdict,
                Err(e) => return failed(e),
            };
            out.summary = format!("{}: {}", hook.name(), verdict_name(&verdict));
            check_verdict(expect, &verdict, &mut out.failures);
            if let Verdict::Rewrite(text) = &verdict {
                let json = serde_json::from_str::<Value>(text).ok().filter(Value::is_object);
                if json.is_none() {
                    out.failures.push(format!(
                        "the rewrite is not a JSON object (the gateway counts that as the policy failing): {}",
                        cut(text)
                    ));
                }
                match (&expect.rewrite, json) {
                    (Some(Value::String(want)), _) if want != text => {
                        out.failures.push(format!("rewrite: expected {}, got {}", cut(want), cut(text)))
                    }
                    (Some(want @ (Value::Object(_) | Value::Array(_))), Some(got)) => {
                        for difference in differences(want, &got, Match::Subset) {
                            out.failures.push(format!("rewrite {difference}"));
                        }
                    }
                    _ => {}
                }
            }
        }
        CaseHook::Stream => {
            let deltas: Vec<String> =
                case.input.as_array().into_iter().flatten().filter_map(|d| d.as_str().map(str::to_string)).collect();
            let context = &context;
            let replayed = replay(&deltas, plugin.hold_back(), |text, last| async move {
                match plugin.on_stream(context, &text, last).await? {
                    Verdict::Allow => Ok::<_, PolicyFailure>(StreamStep::Allow),
                    Verdict::Rewrite(text) => Ok(StreamStep::Rewrite(text)),
                    Verdict::Deny(denial) => Ok(StreamStep::Deny(denial)),
                }
            })
            .await;
            let replayed: Replayed<Denial> = match replayed {
                Ok(replayed) => replayed,
                Err(e) => return failed(e),
            };
            let verdict = match (&replayed.denied, replayed.rewrites) {
                (Some(denial), _) => Verdict::Deny(denial.clone()),
                (None, 0) => Verdict::Allow,
                (None, _) => Verdict::Rewrite(replayed.seen.clone()),
            };
            out.summary = format!(
                "stream: {}, {}, hold-back {}, {}",
                count(deltas.len(), "delta"),
                count(replayed.calls, "call"),
                plugin.hold_back(),
                match (&replayed.denied, replayed.rewrites) {
                    (Some(_), _) => "denied".to_string(),
                    (None, 0) => "allowed".to_string(),
                    (None, n) => format!("rewritten {}", count(n, "time")),
                }
            );
            check_verdict(expect, &verdict, &mut out.failures);
            if let Some(Value::String(want)) = &expect.rewrite
                && *want != replayed.seen
            {
                out.failures.push(format!("the client sees: expected {}, got {}", cut(want), cut(&replayed.seen)));
            }
        }
    }
    out
}

fn failed(e: PolicyFailure) -> PolicyOutcome {
    PolicyOutcome { failures: vec![format!("the policy failed: {e}")], summary: "sandbox failure".into() }
}

fn check_verdict(expect: &Expected, verdict: &Verdict, failures: &mut Vec<String>) {
    let got = verdict_name(verdict);
    if got != expect.verdict.name() {
        failures.push(format!("verdict: expected {}, got {got}", expect.verdict.name()));
        if let Verdict::Deny(denial) = verdict {
            failures.push(format!("  the policy said: {}", describe_denial(denial)));
        }
        return;
    }
    let Verdict::Deny(denial) = verdict else { return };
    let mut wrong = Vec::new();
    if let Some(status) = expect.status.filter(|s| *s != denial.status) {
        wrong.push(format!("status {} (expected {status})", denial.status));
    }
    if let Some(code) = expect.code.as_ref().filter(|c| **c != denial.code) {
        wrong.push(format!("code {} (expected {code})", if denial.code.is_empty() { "(empty)" } else { &denial.code }));
    }
    if let Some(part) = expect.message_contains.as_ref().filter(|p| !denial.message.contains(p.as_str())) {
        wrong.push(format!("message does not contain {part:?}"));
    }
    if !wrong.is_empty() {
        failures.push(format!("denial: {}", wrong.join("; ")));
        failures.push(format!("  the policy said: {}", describe_denial(denial)));
    }
}

fn verdict_name(verdict: &Verdict) -> &'static str {
    match verdict {
        Verdict::Allow => "allow",
        Verdict::Rewrite(_) => "rewrite",
        Verdict::Deny(_) => "deny",
    }
}

fn describe_denial(denial: &Denial) -> String {
    let code = if denial.code.is_empty() { "policy_denied (empty)" } else { &denial.code };
    format!("deny {} {code}: {:.500}", denial.status, denial.message)
}

fn cut(text: &str) -> String {
    short(&Value::String(text.to_string()))
}

fn count(n: usize, what: &str) -> String {
    if n == 1 { format!("1 {what}") } else { format!("{n} {what}s") }
}

fn hooks_list(plugin: &PolicyPlugin) -> String {
    let names: Vec<&str> = [(Hooks::REQUEST, "request"), (Hooks::ANSWER, "answer"), (Hooks::STREAM, "stream")]
        .into_iter()
        .chain([(Hooks::FINISH, "finish")])
        .filter(|(flag, _)| plugin.has(*flag))
        .map(|(_, name)| name)
        .collect();
    if names.is_empty() { "none".into() } else { names.join(", ") }
}

/// `switchyard policy test`: plays every case in `dir`; prints one line per case and the
/// differences of each that fails. True when all passed.
pub async fn test_policy_cases(loaded: &LoadedPolicy, dir: &Path) -> Result<bool, String> {
    let files = super::case_files(dir)?;
    let (mut passed, mut failed) = (0, 0);
    for file in &files {
        let shown = file.strip_prefix(std::env::current_dir().unwrap_or_default()).unwrap_or(file).display();
        let case = match read_policy_case(file) {
            Ok(case) => case,
            Err(e) => {
                println!("FAIL {shown}: {e}");
                failed += 1;
                continue;
            }
        };
        let outcome = run_policy_case(&loaded.plugin, &case).await;
        let about = if case.about.is_empty() { String::new() } else { format!(": {}", case.about) };
        if outcome.failures.is_empty() {
            println!("ok   {shown}{about} ({})", outcome.summary);
            passed += 1;
        } else {
            println!("FAIL {shown}{about} ({})", outcome.summary);
            for line in &outcome.failures {
                println!("  {line}");
            }
            failed += 1;
        }
    }
    println!("{} cases: {passed} passed, {failed} failed", files.len());
    Ok(failed == 0)
}

const SAMPLE_REQUEST: &str = r#"{"model":"model-x","messages":[{"role":"system","content":"You are terse."},{"role":"user","content":"Write one word about the sea."}],"max_tokens":16}"#;
const SAMPLE_ANSWER: &str = r#"{"id":"chatcmpl-check","object":"chat.completion","created":1700000000,"model":"model-x","choices":[{"index":0,"message":{"role":"assistant","content":"Waves."},"finish_reason":"stop"}],"usage":{"prompt_tokens":20,"completion_tokens":2,"total_tokens":22}}"#;
const SAMPLE_STREAM: &[&str] = &["The sea ", "is wide, ", "deep and ", "mostly calm ", "today."];

/// Timed calls of each hook on the sample; the median is reported.
const SAMPLE_CALLS: usize = 7;

/// `switchyard policy check`: prints what the policy declares, what loading and each hook
/// cost on a sample, and its problems; true when none was found.
pub async fn check_policy(loaded: &LoadedPolicy, file_name: &str, settings: Vec<(String, String)>) -> bool {
    let plugin = &loaded.plugin;
    let meta = plugin.metadata();
    let mut problems: Vec<String> = Vec::new();
    println!("policy    {} {} (loaded as: {})", meta.name, meta.version, plugin.name());
    println!("hooks     {}", hooks_list(plugin));
    if meta.hold_back > MAX_HOLD_BACK {
        println!("hold-back {} characters declared; the gateway holds back {MAX_HOLD_BACK}", meta.hold_back);
        problems.push(format!(
            "describe() asks for a hold-back of {}, over the host's maximum of {MAX_HOLD_BACK}: a pattern longer \
             than {MAX_HOLD_BACK} characters split across stream chunks is not seen whole",
            meta.hold_back
        ));
    } else {
        println!("hold-back {} characters", meta.hold_back);
    }
    if plugin.has(Hooks::STREAM) && meta.hold_back == 0 {
        println!("          (0: a pattern split across two stream chunks is never seen whole)");
    }
    if meta.name.trim().is_empty() {
        problems.push("describe() gives no name: the admin API and logs show it".into());
    }
    if !plugin.has(Hooks::REQUEST)
        && !plugin.has(Hooks::ANSWER)
        && !plugin.has(Hooks::STREAM)
        && !plugin.has(Hooks::FINISH)
    {
        problems.push("describe() declares no hook: the gateway never calls it".into());
    }
    if !loaded.builtin {
        println!("size      {} KiB", loaded.bytes / 1024);
    }
    let limits = &loaded.limits;
    println!(
        "limits    memory {} MiB, CPU {} ms and wall {} ms per call (set per policy: policies[].memory_mb, cpu_ms, wall_ms)",
        limits.memory_bytes >> 20,
        limits.cpu_per_call.as_millis(),
        limits.wall_per_call.as_millis()
    );
    println!("load      {} ms (compile or cache, instantiate, describe)", loaded.load_time.as_millis());
    let context = |source: bool| PolicyContext {
        request_id: "check".into(),
        key: "check".into(),
        route: None,
        requested_model: "model-x".into(),
        source: source.then(|| "check".into()),
        resolved_model: source.then(|| "model-x".into()),
        settings: settings.clone(),
    };
    if plugin.has(Hooks::REQUEST) {
        let context = &context(false);
        let timed = time(move || plugin.on_request(context, SAMPLE_REQUEST)).await;
        report("request", timed, true, &mut problems);
    }
    if plugin.has(Hooks::ANSWER) {
        let context = &context(true);
        let timed = time(move || plugin.on_answer(context, SAMPLE_ANSWER)).await;
        report("answer", timed, true, &mut problems);
    }
    if plugin.has(Hooks::STREAM) {
        let context = context(true);
        let deltas: Vec<String> = SAMPLE_STREAM.iter().map(|s| s.to_string()).collect();
        let timed = time_stream(plugin, &context, &deltas).await;
        report("stream", timed, false, &mut problems);
    }
    if problems.is_empty() {
        println!("no problems found: name {file_name} in the gateway's `policies[].plugin` (docs/policies.md)");
        true
    } else {
        for problem in &problems {
            println!("problem   {problem}");
        }
        false
    }
}

/// The median time of `SAMPLE_CALLS` calls, and the verdict of the first.
async fn time<F, Fut>(mut call: F) -> (Duration, Result<Verdict, PolicyFailure>)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<Verdict, PolicyFailure>>,
{
    let mut times = Vec::with_capacity(SAMPLE_CALLS);
    let mut first = None;
    for _ in 0..SAMPLE_CALLS {
        let started = Instant::now();
        let verdict = call().await;
        times.push(started.elapsed());
        let failed = verdict.is_err();
        if first.is_none() {
            first = Some(verdict);
        }
        if failed {
            break;
        }
    }
    times.sort();
    (times[times.len() / 2], first.expect("called at least once"))
}

/// The sample stream replayed: the median time of one `on-stream` call, and how it ended.
async fn time_stream(
    plugin: &PolicyPlugin,
    context: &PolicyContext,
    deltas: &[String],
) -> (Duration, Result<Verdict, PolicyFailure>) {
    let mut times = Vec::new();
    let mut first: Option<Result<Verdict, PolicyFailure>> = None;
    for _ in 0..SAMPLE_CALLS {
        let timings = std::sync::Mutex::new(Vec::new());
        let replayed = replay(deltas, plugin.hold_back(), |text, last| {
            let timings = &timings;
            async move {
                let started = Instant::now();
                let verdict = plugin.on_stream(context, &text, last).await;
                timings.lock().unwrap_or_else(|p| p.into_inner()).push(started.elapsed());
                match verdict? {
                    Verdict::Allow => Ok::<_, PolicyFailure>(StreamStep::Allow),
                    Verdict::Rewrite(text) => Ok(StreamStep::Rewrite(text)),
                    Verdict::Deny(denial) => Ok(StreamStep::Deny(denial)),
                }
            }
        })
        .await;
        times.extend(timings.into_inner().unwrap_or_else(|p| p.into_inner()));
        let outcome = replayed.map(|r| match (r.denied, r.rewrites) {
            (Some(denial), _) => Verdict::Deny(denial),
            (None, 0) => Verdict::Allow,
            (None, _) => Verdict::Rewrite(r.seen),
        });
        let failed = outcome.is_err();
        if first.is_none() {
            first = Some(outcome);
        }
        if failed {
            break;
        }
    }
    times.sort();
    let median = times.get(times.len() / 2).copied().unwrap_or_default();
    (median, first.expect("replayed at least once"))
}

/// One hook's line, and its problems: a failure, a rewrite the gateway cannot use, a slow call.
fn report(
    hook: &str,
    (median, verdict): (Duration, Result<Verdict, PolicyFailure>),
    json: bool,
    problems: &mut Vec<String>,
) {
    let sample = match hook {
        "request" => "a sample chat request",
        "answer" => "a sample answer",
        _ => "a sample stream (per call)",
    };
    let what = match &verdict {
        Ok(Verdict::Allow) => "allow".to_string(),
        Ok(Verdict::Rewrite(_)) => "rewrite".to_string(),
        Ok(Verdict::Deny(denial)) => describe_denial(denial),
        Err(_) => "failed".to_string(),
    };
    println!("{:<9} {:.1} µs median on {sample}: {what}", hook, median.as_secs_f64() * 1e6);
    match verdict {
        Err(e) => problems.push(format!("the {hook} hook fails on {sample}: {e}")),
        Ok(Verdict::Rewrite(text))
            if json && serde_json::from_str::<Value>(&text).ok().is_none_or(|v| !v.is_object()) =>
        {
            problems.push(format!(
                "the {hook} hook's rewrite of {sample} is not a JSON object (the gateway treats it as a failure): {}",
                cut(&text)
            ))
        }
        _ => {}
    }
    if median > SLOW_CALL {
        problems.push(format!(
            "a {hook} call takes {:.1} ms on {sample}, over {} ms: every {} pays it",
            median.as_secs_f64() * 1000.0,
            SLOW_CALL.as_millis(),
            if hook == "stream" { "stream chunk" } else { hook }
        ));
    }
}
