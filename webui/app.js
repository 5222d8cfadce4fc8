// The shell: login, theme, navigation and the hash router. Pages are loaded on demand with
// import('./pages/NAME.js'); a page that fails to load or throws shows an ErrorBox.
import { html, render, useState, useEffect, useRef, Component } from './lib.js';
import { api, token, session, onUnauthorized, ssoOffer, sessionMe, endSession } from './api.js';
import { ErrorBox, Loading, Toasts, Button, Field, Pill, parseHash } from './ui.js';
import { loadMe, getMe, setMe, useMe, VIA } from './access.js';

const ICON = new URL('./favicon.svg', import.meta.url).href;

const PAGES = [
  { id: 'overview', label: 'Overview', icon: '◔' },
  { id: 'sources', label: 'Sources', icon: '⇄' },
  { id: 'adapters', label: 'Adapters', icon: '▣' },
  { id: 'priority', label: 'Priority', icon: '≡' },
  { id: 'routes', label: 'Routes', icon: '⤳' },
  { id: 'keys', label: 'Keys', icon: '◎' },
  { id: 'spend', label: 'Spend', icon: '$' },
  { id: 'logs', label: 'Logs', icon: '☰' },
  { id: 'playground', label: 'Playground', icon: '▷' },
  { id: 'operations', label: 'Operations', icon: '⚙' },
  { id: 'access', label: 'Access', icon: '◇' },
];

// ---------------------------------------------------------------------------------------------
// Theme: follows prefers-color-scheme unless a choice is stored; `data-theme` on <html>.

const THEME_KEY = 'switchyard.theme';
const media = window.matchMedia('(prefers-color-scheme: dark)');
const storedTheme = () => { try { return localStorage.getItem(THEME_KEY); } catch { return null; } };
function applyTheme() {
  const t = storedTheme();
  const theme = t === 'light' || t === 'dark' ? t : media.matches ? 'dark' : 'light';
  if (document.documentElement.dataset.theme !== theme) {
    document.documentElement.dataset.theme = theme;
    window.dispatchEvent(new CustomEvent('switchyard:theme', { detail: theme }));
  }
  return theme;
}
applyTheme();
media.addEventListener?.('change', applyTheme);

function ThemeToggle() {
  const [theme, setTheme] = useState(document.documentElement.dataset.theme);
  const flip = () => {
    const next = theme === 'dark' ? 'light' : 'dark';
    // Choosing what the system already shows returns to following the system.
    try {
      if ((next === 'dark') === media.matches) localStorage.removeItem(THEME_KEY);
      else localStorage.setItem(THEME_KEY, next);
    } catch { /* storage off: theme for this page only */ }
    document.documentElement.dataset.theme = next;
    window.dispatchEvent(new CustomEvent('switchyard:theme', { detail: next }));
    setTheme(next);
  };
  useEffect(() => {
    const f = (e) => setTheme(e.detail);
    window.addEventListener('switchyard:theme', f);
    return () => window.removeEventListener('switchyard:theme', f);
  }, []);
  const label = theme === 'dark' ? 'Switch to light theme' : 'Switch to dark theme';
  return html`<button type="button" class="btn btn-ghost btn-icon" aria-label=${label} title=${label} onClick=${flip}>
    <span aria-hidden="true">${theme === 'dark' ? '☀' : '☾'}</span></button>`;
}

// ---------------------------------------------------------------------------------------------
// Login

/**
 * A refused single sign-on comes back as `/ui/?sso_error=<why>`: read once, then taken out of
 * the address bar (a reload or a bookmark must not show it again). Shown as text only.
 */
function takeSsoError() {
  try {
    const url = new URL(window.location.href);
    const why = url.searchParams.get('sso_error');
    if (why === null) return null;
    url.searchParams.delete('sso_error');
    window.history.replaceState(window.history.state, '', `${url.pathname}${url.search}${url.hash}`);
    return why.trim().slice(0, 500) || 'the sign-in did not complete';
  } catch {
    return null;
  }
}
const SSO_ERROR_AT_LOAD = takeSsoError();

function Login({ message, onLogin, sso, ssoError }) {
  const [value, setValue] = useState('');
  const [error, setError] = useState(message ? { message } : null);
  const [busy, setBusy] = useState(false);
  useEffect(() => setError(message ? { message } : null), [message]);
  const submit = async (e) => {
    e.preventDefault();
    const t = value.trim();
    if (!t) { setError({ message: 'enter the admin token or a personal token' }); return; }
    setBusy(true);
    setError(null);
    token.set(t); // api() reads the token from sessionStorage; removed again unless accepted
    try {
      await loadMe();
      onLogin();
    } catch (err) {
      token.clear();
      setMe(null);
      setError(err.status === 401 ? { message: 'token refused' } : err);
    } finally {
      setBusy(false);
    }
  };
  return html`<div class="login-wrap">
    <form class="login card" onSubmit=${submit} aria-labelledby="login-title">
      <div class="brand brand-login"><img src=${ICON} alt="" width="28" height="28" /><span>Switchyard</span></div>
      <h1 id="login-title">Log in</h1>
      ${ssoError ? html`<div data-testid="sso-error"><${ErrorBox} error=${{ message: ssoError }} title="Single sign-on failed" /></div>` : null}
      ${sso?.enabled ? html`<a class="btn btn-primary" href=${sso.login} data-testid="sso-login">Sign in with single sign-on</a>
        <div class="login-or"><span>or with a token</span></div>` : null}
      <p class="muted">Enter the gateway's <code>admin_token</code> or a personal token (<code>sya_…</code>). It is kept for this browser tab only.</p>
      <${Field} label="Admin token or personal token">
        <input type="password" autocomplete="current-password" value=${value} autofocus
          onInput=${(e) => setValue(e.currentTarget.value)} required />
      <//>
      ${error ? html`<${ErrorBox} error=${error} title="Login failed" />` : null}
      <${Button} type="submit" variant=${sso?.enabled ? 'default' : 'primary'} busy=${busy}>Log in<//>
    </form>
  </div>`;
}

// ---------------------------------------------------------------------------------------------
// Pages: loaded on demand, each behind an error boundary.

const modules = new Map();
function loadPage(id) {
  if (!modules.has(id)) {
    const p = import(`./pages/${id}.js`);
    p.catch(() => {});
    modules.set(id, p);
  }
  return modules.get(id);
}

class Boundary extends Component {
  constructor() { super(); this.state = { error: null }; }
  componentDidCatch(error) { this.setState({ error }); }
  render({ children, page }, { error }) {
    if (error) {
      return html`<${ErrorBox} title=${`The ${page} page failed`} error=${error}
        onRetry=${() => this.setState({ error: null })} />`;
    }
    return children;
  }
}

function PageHost({ id }) {
  const [state, setState] = useState({ mod: null, error: null });
  useEffect(() => {
    let live = true;
    setState({ mod: null, error: null });
    loadPage(id).then(
      (mod) => live && setState({ mod, error: null }),
      (error) => live && setState({ mod: null, error }),
    );
    return () => { live = false; };
  }, [id]);
  if (state.error) {
    // The usual cause is a gateway upgraded under an open tab (its old asset URLs are gone):
    // Retry loads the WebUI afresh.
    return html`<${ErrorBox} title=${`Could not load the ${id} page (was the gateway upgraded?)`} error=${state.error}
      onRetry=${() => location.reload()} />`;
  }
  if (!state.mod) return html`<${Loading} />`;
  const Page = state.mod.default;
  if (typeof Page !== 'function') return html`<${ErrorBox} error=${{ message: `pages/${id}.js has no default export` }} />`;
  return html`<${Boundary} page=${id} key=${id}><${Page} /><//>`;
}

function useRoute() {
  const [page, setPage] = useState(() => parseHash().page);
  useEffect(() => {
    const f = () => setPage(parseHash().page);
    window.addEventListener('hashchange', f);
    return () => window.removeEventListener('hashchange', f);
  }, []);
  return page;
}

// ---------------------------------------------------------------------------------------------
// Shell

/** Who is logged in, with the role (the name folds away at phone width). */
function WhoAmI() {
  const me = useMe();
  if (!me) return null;
  const kind = me.role === 'admin' ? 'warn' : me.role === 'operator' ? 'info' : 'off';
  const title = `Logged in as ${me.name} (${me.role}) with ${VIA[me.via] ?? me.via}`;
  return html`<a class="whoami" href="#/access" data-testid="whoami" title=${title} aria-label=${title}>
    <span class="whoami-name">${me.name}</span> <${Pill} kind=${kind} data-role=${me.role}>${me.role}<//></a>`;
}

function Shell({ onLogout }) {
  const page = useRoute();
  const [menuOpen, setMenuOpen] = useState(false);
  const main = useRef(null);
  const known = PAGES.find((p) => p.id === page);
  const first = useRef(true);
  useEffect(() => {
    setMenuOpen(false);
    document.title = known ? `${known.label} · Switchyard` : 'Switchyard';
    if (first.current) { first.current = false; return; }
    main.current?.focus({ preventScroll: true });
    window.scrollTo(0, 0);
  }, [page]);
  useEffect(() => {
    if (!menuOpen) return undefined;
    const close = (e) => {
      if (e.key === 'Escape') { setMenuOpen(false); document.querySelector('.menu-btn')?.focus(); }
    };
    document.addEventListener('keydown', close);
    return () => document.removeEventListener('keydown', close);
  }, [menuOpen]);
  return html`<div class="shell">
    <a class="skip" href="#main" onClick=${(e) => { e.preventDefault(); main.current?.focus(); }}>Skip to content</a>
    <header class="topbar">
      <a class="brand" href="#/overview"><img src=${ICON} alt="" width="22" height="22" /><span>Switchyard</span></a>
      <div class="topbar-actions">
        <${WhoAmI} />
        <${ThemeToggle} />
        <${Button} size="sm" variant="ghost" onClick=${onLogout}>Log out<//>
      </div>
    </header>
    <nav class=${`nav ${menuOpen ? 'open' : ''}`} aria-label="Main">
      <button type="button" class="btn btn-ghost btn-icon menu-btn" aria-label="Menu" aria-expanded=${menuOpen ? 'true' : 'false'}
        aria-controls="nav-list" onClick=${() => setMenuOpen(!menuOpen)}><span aria-hidden="true">☰</span></button>
      <ul id="nav-list">${PAGES.map((p) => html`<li key=${p.id}>
        <a href=${`#/${p.id}`} aria-current=${p.id === page ? 'page' : undefined}>
          <span class="nav-icon" aria-hidden="true">${p.icon}</span>${p.label}</a></li>`)}</ul>
    </nav>
    <main id="main" class="main" tabindex="-1" ref=${main}>
      ${known ? html`<${PageHost} id=${page} key=${page} />`
        : html`<${ErrorBox} title="Not found" error=${{ message: `there is no page "${page}"` }} />`}
    </main>
    <${Toasts} />
  </div>`;
}

/** A tab reloaded with a token kept: asks who it is (GET /me) before showing any page. */
function Resume({ onLogout }) {
  const [error, setError] = useState(null);
  const [attempt, setAttempt] = useState(0);
  useEffect(() => {
    let live = true;
    setError(null);
    // A 401 ends the session through onUnauthorized (the login comes back with its message).
    loadMe().catch((e) => { if (live && e?.status !== 401) setError(e); });
    return () => { live = false; };
  }, [attempt]);
  if (!error) return html`<div class="login-wrap"><${Loading} label="Checking the token…" /></div>`;
  // Not `.login`: a 401 here must end the session (onUnauthorized skips the login form's own checks).
  return html`<div class="login-wrap"><div class="resume card">
    <${ErrorBox} title="Could not ask the gateway who you are" error=${error} onRetry=${() => setAttempt(attempt + 1)} />
    <${Button} onClick=${onLogout}>Log out<//>
  </div></div>`;
}

function App() {
  const [authed, setAuthed] = useState(!!token.get());
  const [message, setMessage] = useState(null);
  const [ssoError, setSsoError] = useState(SSO_ERROR_AT_LOAD);
  const [sso, setSso] = useState(null); // GET /auth/sso's answer, once it came
  const me = useMe();
  useEffect(() => onUnauthorized(() => {
    // The login form's own check clears the token itself; only a session in use is ended here.
    if (!document.querySelector('.login')) {
      const wasSession = session.active() && !token.get();
      token.clear();
      setMe(null);
      setMessage(wasSession
        ? 'The single sign-on session ended (401): it expired or was logged out. Sign in again.'
        : 'The token was refused (401): it was revoked, expired or changed. Sign in again.');
      setAuthed(false);
    }
  }), []);
  // Whether single sign-on is offered; without a stored token, whether this browser has a
  // session already (its cookie is HttpOnly: only GET /me can tell). Not after a refused
  // sign-in: its message is what to show.
  useEffect(() => {
    let live = true;
    (async () => {
      const offer = await ssoOffer();
      if (!live) return;
      setSso(offer);
      if (!offer.enabled || token.get() || SSO_ERROR_AT_LOAD) return;
      try {
        const who = await sessionMe();
        if (live && who && !token.get() && !getMe()) {
          setMe(who);
          setMessage(null);
          setAuthed(true);
        }
      } catch (e) {
        if (live) setMessage(`Could not ask the gateway about a single sign-on session: ${e.message}`);
      }
    })();
    return () => { live = false; };
  }, []);
  const logout = async () => {
    let note = null;
    if (session.active() && !token.get()) {
      try {
        await endSession();
      } catch (e) {
        note = `The gateway did not end the single sign-on session: ${e.message}`;
      }
    }
    token.clear();
    setMe(null);
    setMessage(note);
    setAuthed(false);
  };
  if (!authed) {
    const loggedIn = () => { setMessage(null); setSsoError(null); setAuthed(true); };
    return html`<${Login} message=${message} onLogin=${loggedIn} sso=${sso} ssoError=${ssoError} /><${Toasts} />`;
  }
  if (!me) return html`<${Resume} onLogout=${logout} /><${Toasts} />`;
  // Keyed by identity: another login renders every page afresh for its role.
  return html`<${Shell} key=${`${me.name}\u0000${me.role}\u0000${me.via}`} onLogout=${logout} />`;
}

render(html`<${App} />`, document.getElementById('app'));
