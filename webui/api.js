// Every call the UI makes: the admin API with the token from sessionStorage (or, signed in by
// single sign-on, the gateway's HttpOnly session cookie, which the browser sends by itself), and
// the client API (/v1/...) with a gateway key. Errors carry the API's own message.

const TOKEN = 'switchyard.admin_token';

export const token = {
  get: () => sessionStorage.getItem(TOKEN),
  set: (t) => sessionStorage.setItem(TOKEN, t),
  clear: () => sessionStorage.removeItem(TOKEN),
};

/**
 * A single sign-on session: the cookie is HttpOnly (this page never sees it); what the page
 * keeps, in memory only, is the session's CSRF token from GET /me, sent on every write.
 */
let csrf = null;
export const session = {
  active: () => csrf !== null,
  set: (c) => { csrf = typeof c === 'string' && c ? c : null; },
  clear: () => { csrf = null; },
};

const WRITES_NEED_CSRF = (method) => !['GET', 'HEAD', 'OPTIONS'].includes(method.toUpperCase());

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
  const headers = {};
  const t = token.get();
  if (t) headers.Authorization = `Bearer ${t}`;
  else if (csrf && WRITES_NEED_CSRF(method)) headers['x-csrf-token'] = csrf;
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

/** What GET /auth/sso says: `{enabled, login}`; `{enabled: false}` when it cannot be read. */
export async function ssoOffer() {
  try {
    const res = await fetch('/auth/sso', { headers: { Accept: 'application/json' }, credentials: 'same-origin' });
    if (!res.ok) return { enabled: false };
    const body = await res.json();
    // Only a path on this gateway: the link is followed by the whole page.
    const login = typeof body?.login === 'string' && /^\/(?![/\\])/.test(body.login) ? body.login : '/auth/login';
    return { enabled: body?.enabled === true, login };
  } catch {
    return { enabled: false };
  }
}

/**
 * Whether the browser holds a single sign-on session: GET /admin/api/me with no token (the
 * cookie goes along). Resolves to the identity when it is a session's, null when not signed in
 * (401, and the unauthorized listeners are not told: no session ended); throws ApiError otherwise.
 */
export async function sessionMe() {
  const res = await fetch('/admin/api/me', { credentials: 'same-origin' });
  if (res.status === 401) return null;
  if (!res.ok) throw await failure(res);
  const who = await res.json();
  return who?.via === 'session' ? who : null;
}

/** Ends the single sign-on session (POST /auth/logout with its CSRF token); forgets the token. */
export async function endSession() {
  const headers = csrf ? { 'x-csrf-token': csrf } : {};
  csrf = null;
  const res = await fetch('/auth/logout', { method: 'POST', headers, credentials: 'same-origin' });
  // 401: the session had ended already.
  if (!res.ok && res.status !== 401) throw await failure(res);
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
