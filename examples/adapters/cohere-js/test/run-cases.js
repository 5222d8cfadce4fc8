// Runs the recorded cases in ../cases (the format of docs/adapter-cases.md) in plain Node,
// against the mapping module (cohere.js) or, with `--component FILE`, against the built
// component transpiled by jco. `switchyard adapter test` is the reference; this runner exists
// so the mapping can be checked without the gateway.
//
//   node test/run-cases.js                      # cohere.js
//   node test/run-cases.js --component cohere.wasm
import { readFileSync, readdirSync, mkdtempSync, rmSync } from 'node:fs';
import { join, dirname, resolve } from 'node:path';
import { tmpdir } from 'node:os';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { execFileSync } from 'node:child_process';

const here = dirname(fileURLToPath(import.meta.url));
const root = resolve(here, '..');

const DEFAULT_CONTEXT = {
  operation: 'chat',
  source_name: 'test',
  base_url: 'https://api.example.com',
  api_key: 'test-key',
  upstream_model: 'model-x',
  settings: {},
};

/** Loads the adapter: returns `(context, host) => session` with the WIT method names. */
export async function loadAdapter(component) {
  if (!component) {
    const { CohereSession } = await import(pathToFileURL(join(root, 'cohere.js')));
    return (ctx, host) => new CohereSession(ctx, { now: () => host.now });
  }
  const out = mkdtempSync(join(tmpdir(), 'cohere-jco-'));
  execFileSync(
    join(root, 'node_modules/.bin/jco'),
    ['transpile', resolve(component), '-o', out, '--instantiation', 'async', '--no-typescript', '-q', '--name', 'adapter'],
    { stdio: 'inherit' },
  );
  const { instantiate } = await import(pathToFileURL(join(out, 'adapter.js')));
  const state = { now: 0, logs: [] };
  const hostImports = {
    log: (level, message) => state.logs.push(`${level}: ${message}`),
    nowUnixMs: () => BigInt(state.now),
    script: () => undefined,
    fetch: () => {
      throw { payload: 'fetch is not allowed in tests' };
    },
  };
  // jco names imports with or without their version depending on the release: give both.
  const exports = await instantiate((path) => WebAssembly.compile(readFileSync(join(out, path))), {
    'switchyard:adapter/host': hostImports,
    'switchyard:adapter/host@0.1.0': hostImports,
    'switchyard:adapter/types': {},
    'switchyard:adapter/types@0.1.0': {},
  });
  rmSync(out, { recursive: true, force: true });
  const { Session, describe } = exports.adapter;
  const meta = describe();
  if (meta.streamFraming !== 'sse') throw new Error(`unexpected framing ${meta.streamFraming}`);
  return (ctx, host) => {
    state.now = host.now;
    const session = new Session(ctx);
    for (const line of state.logs.splice(0)) console.error(`  log ${line}`);
    return session;
  };
}

/** Splits an SSE body into {event, data} the way the gateway does. */
export function splitSse(text) {
  const events = [];
  let event = '';
  let data = [];
  const dispatch = () => {
    if (data.length > 0) events.push({ event: event || 'message', data: data.join('\n') });
    event = '';
    data = [];
  };
  for (const line of text.split(/\r\n|\r|\n/)) {
    if (line === '') {
      dispatch();
      continue;
    }
    if (line.startsWith(':')) continue;
    const colon = line.indexOf(':');
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'event') event = value;
    else if (field === 'data') data.push(value);
  }
  dispatch();
  return events;
}

/** `expected` matches when each field it lists is in `actual` with an equal value; arrays
 *  must match element by element. Returns the differences as "path: message" strings. */
export function match(expected, actual, path = '$', diffs = []) {
  if (Array.isArray(expected)) {
    if (!Array.isArray(actual)) diffs.push(`${path}: expected an array, got ${JSON.stringify(actual)}`);
    else if (expected.length !== actual.length) {
      diffs.push(`${path}: expected ${expected.length} elements, got ${actual.length}`);
    } else expected.forEach((e, i) => match(e, actual[i], `${path}[${i}]`, diffs));
  } else if (expected !== null && typeof expected === 'object') {
    if (actual === null || typeof actual !== 'object' || Array.isArray(actual)) {
      diffs.push(`${path}: expected an object, got ${JSON.stringify(actual)}`);
    } else {
      for (const [k, v] of Object.entries(expected)) {
        if (!(k in actual)) diffs.push(`${path}.${k}: missing (expected ${JSON.stringify(v)})`);
        else match(v, actual[k], `${path}.${k}`, diffs);
      }
    }
  } else if (expected !== actual) {
    diffs.push(`${path}: expected ${JSON.stringify(expected)}, got ${JSON.stringify(actual)}`);
  }
  return diffs;
}

/** JSON equality (key order ignored), every field on both sides. */
function equalJson(expected, actual, path, diffs) {
  const kind = (v) => (Array.isArray(v) ? 'array' : v === null ? 'null' : typeof v);
  if (kind(expected) !== kind(actual)) {
    diffs.push(`${path}: expected ${JSON.stringify(expected)}, got ${JSON.stringify(actual)}`);
  } else if (Array.isArray(expected)) {
    if (expected.length !== actual.length) diffs.push(`${path}: expected ${expected.length} elements, got ${actual.length}`);
    else expected.forEach((e, i) => equalJson(e, actual[i], `${path}[${i}]`, diffs));
  } else if (kind(expected) === 'object') {
    for (const [k, v] of Object.entries(expected)) {
      if (!(k in actual)) diffs.push(`${path}.${k}: missing (expected ${JSON.stringify(v)})`);
      else equalJson(v, actual[k], `${path}.${k}`, diffs);
    }
    for (const k of Object.keys(actual)) if (!(k in expected)) diffs.push(`${path}.${k}: unexpected field`);
  } else if (expected !== actual) {
    diffs.push(`${path}: expected ${JSON.stringify(expected)}, got ${JSON.stringify(actual)}`);
  }
  return diffs;
}

function errorOf(e) {
  if (e && typeof e === 'object' && 'payload' in e && e.payload && typeof e.payload === 'object') return e.payload;
  throw e;
}

function checkError(expected, err, diffs) {
  if (!expected) {
    diffs.push(`unexpected error ${err.kind}: ${err.message}`);
    return;
  }
  const actual = {
    kind: err.kind,
    status: err.status ?? null,
    code: err.code ?? null,
    retry_after_ms: err.retryAfterMs === undefined || err.retryAfterMs === null ? null : Number(err.retryAfterMs),
  };
  for (const key of ['kind', 'status', 'code', 'retry_after_ms']) {
    if (key in expected && expected[key] !== actual[key]) {
      diffs.push(`error ${key}: expected ${JSON.stringify(expected[key])}, got ${JSON.stringify(actual[key])}`);
    }
  }
  if (expected.message_contains && !err.message.includes(expected.message_contains)) {
    diffs.push(`error message: ${JSON.stringify(err.message)} does not contain ${JSON.stringify(expected.message_contains)}`);
  }
}

export function runCase(file, makeSession) {
  const spec = JSON.parse(readFileSync(file, 'utf8'));
  const c = { ...DEFAULT_CONTEXT, ...(spec.context || {}) };
  const ctx = {
    operation: c.operation,
    sourceName: c.source_name,
    baseUrl: c.base_url,
    apiKey: c.api_key,
    upstreamModel: c.upstream_model,
    settings: Object.entries(c.settings || {}),
  };
  const session = makeSession(ctx, { now: spec.now_unix_ms ?? 1700000000000 });
  const diffs = [];
  let request;
  try {
    request = session.transformRequest(JSON.stringify(spec.request));
  } catch (e) {
    checkError(spec.expect_error, errorOf(e), diffs);
    return { about: spec.about, diffs };
  }
  const want = spec.upstream_request;
  if (want) {
    if (want.method && want.method !== request.method) diffs.push(`method: expected ${want.method}, got ${request.method}`);
    if (want.url && want.url !== request.url) diffs.push(`url: expected ${want.url}, got ${request.url}`);
    for (const [name, value] of Object.entries(want.headers || {})) {
      const got = request.headers.find(([k]) => k.toLowerCase() === name.toLowerCase());
      if (!got) diffs.push(`header ${name}: missing`);
      else if (got[1] !== value) diffs.push(`header ${name}: expected ${JSON.stringify(value)}, got ${JSON.stringify(got[1])}`);
    }
    const text = new TextDecoder().decode(request.body);
    if ('body' in want) equalJson(want.body, JSON.parse(text), 'upstream body $', diffs);
    if ('body_text' in want && want.body_text !== text) diffs.push('upstream body_text differs');
  }
  const up = spec.upstream_response;
  if (!up) {
    if (spec.expect_error) diffs.push(`expected error ${spec.expect_error.kind}, got a request`);
    return { about: spec.about, diffs };
  }
  let bodyBytes;
  if ('body' in up) bodyBytes = new TextEncoder().encode(JSON.stringify(up.body));
  else if ('body_text' in up) bodyBytes = new TextEncoder().encode(up.body_text);
  else if ('body_file' in up) bodyBytes = new Uint8Array(readFileSync(join(dirname(file), up.body_file)));
  else bodyBytes = new Uint8Array();
  const status = up.status ?? 200;
  const headers = Object.entries(up.headers || {});
  const streamed = spec.request.stream === true;
  if (streamed && status >= 200 && status < 300) {
    const chunks = [];
    let err;
    try {
      for (const event of splitSse(new TextDecoder().decode(bodyBytes))) {
        const out = session.transformStreamChunk(event);
        chunks.push(...out.chunks);
      }
      const out = session.finishStream();
      chunks.push(...out.chunks);
    } catch (e) {
      err = errorOf(e);
    }
    const parsed = chunks.map((c) => JSON.parse(c));
    if (spec.expect_chunks) match(spec.expect_chunks, parsed, 'chunks', diffs);
    if (err) checkError(spec.expect_error, err, diffs);
    else if (spec.expect_error) diffs.push(`expected error ${spec.expect_error.kind}, the stream completed`);
  } else {
    try {
      const out = JSON.parse(session.transformResponse({ status, headers, body: bodyBytes }));
      if (spec.expect) match(spec.expect, out, 'response $', diffs);
      if (spec.expect_error) diffs.push(`expected error ${spec.expect_error.kind}, got a response`);
    } catch (e) {
      checkError(spec.expect_error, errorOf(e), diffs);
    }
  }
  return { about: spec.about, diffs };
}

if (import.meta.url === pathToFileURL(process.argv[1]).href) {
  const args = process.argv.slice(2);
  const componentAt = args.indexOf('--component');
  const component = componentAt >= 0 ? args[componentAt + 1] : undefined;
  const casesAt = args.indexOf('--cases');
  const dir = casesAt >= 0 ? resolve(args[casesAt + 1]) : join(root, 'cases');
  const makeSession = await loadAdapter(component);
  let passed = 0;
  let failed = 0;
  for (const name of readdirSync(dir).filter((n) => n.endsWith('.json')).sort()) {
    const { about, diffs } = runCase(join(dir, name), makeSession);
    if (diffs.length === 0) {
      passed++;
      console.log(`ok   ${name}: ${about ?? ''}`);
    } else {
      failed++;
      console.log(`FAIL ${name}: ${about ?? ''}`);
      for (const d of diffs) console.log(`  ${d}`);
    }
  }
  console.log(`${passed} passed, ${failed} failed`);
  process.exitCode = failed === 0 ? 0 : 1;
}
