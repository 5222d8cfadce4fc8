//! The Lua state of one instance: the script loaded once (warm instances skip ~300 µs of
//! start-up), only safe libraries, a memory cap, and the legacy globals (log, json, hashing,
//! http through the host's allow-listed fetch).

use std::cell::RefCell;

use adapter_kit::host::{self, LogLevel};
use base64::Engine as _;
use hmac::{Hmac, Mac};
use mlua::chunk::ChunkMode;
use mlua::{Function, Lua, LuaOptions, LuaSerdeExt, LuaString, StdLib, Table, Value};
use sha2::{Digest, Sha256};

/// Lua's own heap cap, under the sandbox's linear-memory cap so a memory bomb is a Lua error
/// with a message rather than a trap.
const LUA_MEMORY_BYTES: usize = 32 << 20;

/// What the script's table says about it.
pub struct Meta {
    pub name: String,
    pub version: String,
    pub endpoint: String,
    pub stream_endpoint: Option<String>,
    pub headers: Vec<(String, String)>,
    pub ndjson: bool,
}

pub struct Script {
    pub lua: Lua,
    pub table: Table,
    pub meta: Meta,
}

thread_local! {
    static SCRIPT: RefCell<Option<Script>> = const { RefCell::new(None) };
}

/// Runs `f` on this instance's script, loading it on first use.
pub fn with<T>(f: impl FnOnce(&Script) -> Result<T, String>) -> Result<T, String> {
    SCRIPT.with(|cell| {
        if cell.borrow().is_none() {
            let loaded = load()?;
            *cell.borrow_mut() = Some(loaded);
        }
        f(cell.borrow().as_ref().expect("loaded above"))
    })
}

fn load() -> Result<Script, String> {
    let source = host::script().ok_or("no script was given to the Lua-compat component")?;
    let lua = Lua::new_with(StdLib::STRING | StdLib::TABLE | StdLib::MATH, LuaOptions::default())
        .map_err(|e| format!("cannot start Lua: {e}"))?;
    lua.set_memory_limit(LUA_MEMORY_BYTES).map_err(|e| e.to_string())?;
    install_globals(&lua).map_err(|e| format!("cannot set up the script's globals: {e}"))?;
    let returned: Value = lua
        .load(&source)
        .set_name("=script")
        .set_mode(ChunkMode::Text)
        .eval()
        .map_err(|e| format!("the script does not load: {}", one_line(&e)))?;
    let Value::Table(table) = returned else {
        return Err(format!("the script must return a table of its functions, it returned {}", returned.type_name()));
    };
    match table.get::<Value>("transform_request") {
        Ok(Value::Function(_)) => {}
        _ => return Err("the script's table has no `transform_request` function".into()),
    }
    let text = |key: &str| -> Option<String> {
        match table.get::<Value>(key).ok()? {
            Value::String(s) => Some(s.to_string_lossy()),
            Value::Integer(i) => Some(i.to_string()),
            Value::Number(n) => Some(n.to_string()),
            _ => None,
        }
    };
    let mut headers = Vec::new();
    if let Ok(Value::Table(h)) = table.get::<Value>("headers") {
        for pair in h.pairs::<String, String>() {
            headers.push(pair.map_err(|e| format!("`headers` must map names to strings: {e}"))?);
        }
    }
    let meta = Meta {
        name: text("name").unwrap_or_else(|| "lua".into()),
        version: text("version").unwrap_or_else(|| "0".into()),
        endpoint: text("endpoint").unwrap_or_else(|| "/chat/completions".into()),
        stream_endpoint: text("stream_endpoint"),
        headers,
        ndjson: text("stream_format").as_deref() == Some("ndjson"),
    };
    Ok(Script { lua, table, meta })
}

impl Script {
    /// The script's function `name`, if it defines one.
    pub fn function(&self, name: &str) -> Option<Function> {
        match self.table.get::<Value>(name) {
            Ok(Value::Function(f)) => Some(f),
            _ => None,
        }
    }

    /// Calls `name(arg)`, which must return a string.
    pub fn call_text(&self, f: &Function, name: &str, arg: impl mlua::IntoLua) -> Result<String, String> {
        match f.call::<Value>(arg) {
            Ok(Value::String(s)) => Ok(s.to_string_lossy()),
            Ok(other) => Err(format!("`{name}` must return a string, it returned {}", other.type_name())),
            Err(e) => Err(format!("`{name}` failed: {}", one_line(&e))),
        }
    }

    /// A Lua table from a JSON value (for `build_headers`' meta).
    pub fn table_of(&self, value: &serde_json::Value) -> Result<Value, String> {
        self.lua.to_value(value).map_err(|e| e.to_string())
    }
}

/// A Lua error's message without its traceback.
fn one_line(error: &mlua::Error) -> String {
    let text = match error {
        mlua::Error::CallbackError { cause, .. } => return one_line(cause),
        other => other.to_string(),
    };
    text.lines().next().unwrap_or_default().to_string()
}

fn install_globals(lua: &Lua) -> mlua::Result<()> {
    let g = lua.globals();
    // No files, no processes, no modules from disk, no bytecode.
    for name in ["dofile", "loadfile", "load", "require", "module", "collectgarbage", "newproxy", "gcinfo"] {
        g.set(name, Value::Nil)?;
    }
    g.set(
        "loadstring",
        lua.create_function(|lua, (code, name): (LuaString, Option<String>)| {
            let bytes = code.as_bytes();
            if bytes.first() == Some(&0x1b) {
                return Ok((Value::Nil, Value::String(lua.create_string("binary chunks are not allowed")?)));
            }
            match lua.load(&*bytes).set_name(name.unwrap_or_else(|| "=loadstring".into())).set_mode(ChunkMode::Text).into_function() {
                Ok(f) => Ok((Value::Function(f), Value::Nil)),
                Err(e) => Ok((Value::Nil, Value::String(lua.create_string(e.to_string())?))),
            }
        })?,
    )?;
    let os = lua.create_table()?;
    os.set("time", lua.create_function(|_, ()| Ok(host::now_unix_ms() / 1000))?)?;
    os.set("clock", lua.create_function(|_, ()| Ok(host::now_unix_ms() as f64 / 1000.0))?)?;
    os.set("date", lua.create_function(|lua, format: Option<String>| os_date(lua, format))?)?;
    g.set("os", os)?;

    g.set(
        "log",
        lua.create_function(|_, (level, message): (String, Value)| {
            let level = match level.to_ascii_lowercase().as_str() {
                "debug" => LogLevel::Debug,
                "warn" | "warning" => LogLevel::Warn,
                "error" => LogLevel::Error,
                "trace" => LogLevel::Trace,
                _ => LogLevel::Info,
            };
            let text = match message {
                Value::String(s) => s.to_string_lossy(),
                other => format!("{other:?}"),
            };
            host::log(level, &text);
            Ok(())
        })?,
    )?;
    let json = lua.create_table()?;
    json.set(
        "encode",
        lua.create_function(|_, value: Value| {
            Ok(serde_json::to_string(&value).ok())
        })?,
    )?;
    json.set(
        "decode",
        lua.create_function(|lua, text: LuaString| {
            let parsed: Option<serde_json::Value> = serde_json::from_slice(&text.as_bytes()).ok();
            match parsed {
                Some(v) => lua.to_value_with(&v, mlua::serde::ser::Options::new().serialize_none_to_null(false).serialize_unit_to_null(false)),
                None => Ok(Value::Nil),
            }
        })?,
    )?;
    g.set("json", json)?;
    g.set(
        "sha256_hex",
        lua.create_function(|_, data: LuaString| Ok(hex(&Sha256::digest(&*data.as_bytes()))))?,
    )?;
    g.set(
        "hmac_sha256_hex",
        lua.create_function(|_, (key, data): (LuaString, LuaString)| {
            let mut mac = Hmac::<Sha256>::new_from_slice(&key.as_bytes()).expect("HMAC takes any key length");
            mac.update(&data.as_bytes());
            Ok(hex(&mac.finalize().into_bytes()))
        })?,
    )?;
    g.set(
        "base64_encode",
        lua.create_function(|_, data: LuaString| Ok(base64::engine::general_purpose::STANDARD.encode(&*data.as_bytes())))?,
    )?;
    g.set("tohex", lua.create_function(|_, data: LuaString| Ok(hex(&data.as_bytes())))?)?;
    g.set("http_get", lua.create_function(|_, url: String| Ok(fetch("GET", &url, None)))?)?;
    g.set(
        "http_post",
        lua.create_function(|_, (url, body): (String, Option<String>)| Ok(fetch("POST", &url, body.as_deref())))?,
    )?;
    Ok(())
}

/// `{url, status, body}` or `{url, error}`, as JSON text.
fn fetch(method: &str, url: &str, body: Option<&str>) -> String {
    match host::fetch(method, url, body) {
        Ok(reply) => serde_json::json!({"url": url, "status": reply.status, "body": reply.body}).to_string(),
        Err(error) => serde_json::json!({"url": url, "error": error}).to_string(),
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// `os.date` in UTC (the sandbox has no time zone): `*t` tables and `%Y %m %d %H %M %S %%`.
fn os_date(lua: &Lua, format: Option<String>) -> mlua::Result<Value> {
    let secs = host::now_unix_ms() / 1000;
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (y, m, d) = civil_from_days(days as i64);
    let (hh, mm, ss) = (rem / 3600, rem % 3600 / 60, rem % 60);
    let format = format.unwrap_or_else(|| "%c".into());
    let format = format.strip_prefix('!').unwrap_or(&format);
    if format.starts_with("*t") {
        let t = lua.create_table()?;
        for (k, v) in [("year", y), ("month", m as i64), ("day", d as i64), ("hour", hh as i64), ("min", mm as i64), ("sec", ss as i64)] {
            t.set(k, v)?;
        }
        return Ok(Value::Table(t));
    }
    let mut out = String::new();
    let mut chars = format.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('Y') => out.push_str(&format!("{y:04}")),
            Some('m') => out.push_str(&format!("{m:02}")),
            Some('d') => out.push_str(&format!("{d:02}")),
            Some('H') => out.push_str(&format!("{hh:02}")),
            Some('M') => out.push_str(&format!("{mm:02}")),
            Some('S') => out.push_str(&format!("{ss:02}")),
            Some('c') => out.push_str(&format!("{y:04}-{m:02}-{d:02} {hh:02}:{mm:02}:{ss:02}")),
            Some('%') => out.push('%'),
            Some(other) => {
                out.push('%');
                out.push(other);
            }
            None => out.push('%'),
        }
    }
    Ok(Value::String(lua.create_string(out)?))
}

/// Days since 1970-01-01 → (year, month, day), proleptic Gregorian.
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}
