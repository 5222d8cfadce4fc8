// Every call the UI makes: the admin API with the token from sessionStorage, and the client
// API (/v1/...) with a gateway key. Errors carry the API's own message.

const TOKEN = 'switchyard.admin_token';

export const token = {
  get: () => sessionStorage.getItem(TOKEN),
  set: (t) => sessionStorage.setItem(TOKEN, t),
  clear: () => sessionStorage.removeItem(TOKEN),
};

/** An error answer: `status`, the API's `message`, `code` and `type`. */
export class ApiError extends Error {
  constructor(status, message, code, type) {
    super(message);
    this.status = status;
    this.code = code;
    this.type = type;
  }
}

/** Listeners told when the admin token is refused (401): the shell shows the login again. */
const unauthorized = new Set();
export const onUnauthorized = (f) => { unauthorized.add(f); return () => unauthorized.delete(f); };

async function failure(res) {
  let message = `${res.status} ${res.statusText}`, code, type;
  try {
    const body = await res.json();
    const e = body.error ?? body;
    if (typeof e === 'string') message = e;
    else if (e && typeof e.message === 'string') { message = e.message; code = e.code; type = e.type; }
  } catch { /* not JSON: keep the status line */ }
  return new ApiError(res.status, message, code, type);
}

/**
 * `api('GET', '/sources')` calls `/admin/api/sources`. `body` is sent as JSON unless it is a
 * Blob/ArrayBuffer (adapter uploads). Resolves to the parsed JSON (or text), throws ApiError.
 */
export async function api(method, path, body, { signal } = {}) {
  const headers = { Authorization: `Bearer ${token.get() ?? ''}` };
  let payload;
  if (body instanceof Blob || body instanceof ArrayBuffer) {
    payload = body;
    headers['Content-Type'] = 'application/octet-stream';
  } else if (body !== undefined) {
    payload = JSON.stringify(body);
    headers['Content-Type'] = 'application/json';
  }
  const res = await fetch(`/admin/api${path}`, { method, headers, body: payload, signal });
  if (res.status === 401) unauthorized.forEach((f) => f());
  if (!res.ok) throw await failure(res);
  const type = res.headers.get('content-type') ?? '';
  return type.includes('json') ? res.json() : res.text();
}

/** A call to the client API (`/v1/...`) with a gateway key; returns the raw Response. */
export async function client(method, path, key, body, { signal } = {}) {
  const res = await fetch(path, {
    method,
    headers: { Authorization: `Bearer ${key}`, ...(body ? { 'Content-Type': 'application/json' } : {}) },
    body: body ? JSON.stringify(body) : undefined,
    signal,
  });
  if (!res.ok) throw await failure(res);
  return res;
}

/** Builds `?a=1&b=2` from an object, leaving out empty values. */
export function query(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null && v !== '') q.set(k, String(v));
  const s = q.toString();
  return s ? `?${s}` : '';
}
