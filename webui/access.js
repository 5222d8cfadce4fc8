// Who is logged in (GET /admin/api/me) and what their role lets them do. The admin API enforces
// the roles; the UI only leaves out what the role cannot do: pages ask `may('operator')`.
//   viewer:   every GET, and their own personal tokens
//   operator: the viewer's, plus the interventions (cooldowns, affinity, scores, cache purge,
//             serving pause, source test / detect / enable / disable, the playground key)
//   admin:    everything else (sources, keys, routes, adapters, prices, policies, settings...)
import { useState, useEffect } from './lib.js';
import { api, session } from './api.js';

/** The roles, least first. */
export const ROLES = ['viewer', 'operator', 'admin'];
const RANK = { viewer: 1, operator: 2, admin: 3 };

let me = null;
const listeners = new Set();

/** The identity in use: {name, role, via}, or null before /me answered (or after a logout). */
export const getMe = () => me;

/**
 * Sets (or clears, with null) the identity; components using useMe() re-render. A single
 * sign-on session's CSRF token goes to api() (in memory), not into the identity.
 */
export function setMe(next) {
  if (next && typeof next === 'object') {
    const { csrf, ...who } = next;
    if (who.via === 'session') session.set(csrf);
    else session.clear();
    me = who;
  } else {
    session.clear();
    me = null;
  }
  listeners.forEach((f) => f(me));
}

/** useMe() → the identity, updated when it changes. */
export function useMe() {
  const [value, setValue] = useState(me);
  useEffect(() => {
    listeners.add(setValue);
    setValue(me);
    return () => listeners.delete(setValue);
  }, []);
  return value;
}

/** may(role) → whether the logged-in identity has at least `role` (viewer < operator < admin). */
export function may(role, who = me) {
  return (RANK[who?.role] ?? 0) >= (RANK[role] ?? Infinity);
}

/** The roles a token made by `who` may carry: theirs and below. */
export const grantable = (who = me) => ROLES.filter((r) => may(r, who));

/** How the identity logged in, for people. */
export const VIA = {
  admin_token: 'the configured admin token',
  token: 'a personal token',
  telegram: 'Telegram',
  session: 'single sign-on',
};

/** Asks the gateway who the stored token (or the session cookie) is (GET /me) and keeps it. */
export async function loadMe() {
  const who = await api('GET', '/me');
  setMe(who);
  return who;
}
