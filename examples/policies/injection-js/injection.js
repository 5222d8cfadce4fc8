// The injection policy's logic, plain JavaScript with no imports (tested in Node): refuses a
// unified request (OpenAI Chat JSON) when a checked message holds a phrase typical of prompt
// injection. The component glue is policy.js.

export const POLICY_NAME = 'injection';
export const POLICY_VERSION = '0.1.0';

/** Checked when `phrases` is not set: the classic "forget what you were told" openers. */
export const DEFAULT_PHRASES = [
  'ignore previous instructions',
  'ignore all previous instructions',
  'ignore the previous instructions',
  'disregard previous instructions',
  'disregard all previous instructions',
  'disregard the system prompt',
  'you are now in developer mode',
];

export const DEFAULT_ROLES = ['user', 'tool'];
export const DEFAULT_STATUS = 400;
export const CODE = 'prompt_injection';

/** A setting the policy cannot use: every request is refused with 500 `policy_misconfigured`,
 *  as the built-in policies do, so a typo never passes traffic unchecked. */
export class Misconfigured extends Error {}

/** A setting by key (`list<tuple<string, string>>` arrives as [key, value] pairs); the first wins. */
export function setting(settings, key) {
  for (const pair of settings || []) {
    if (pair[0] === key) return pair[1];
  }
  return undefined;
}

const escape = (s) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/** A letter or digit: an ASCII one, `_`, or any character with an upper and a lower case.
 *  (componentize-js's engine is built without Unicode property escapes: no `\p{L}`.) */
export function isWordChar(c) {
  if (c === undefined || c === '') return false;
  return /[0-9A-Za-z_]/.test(c) || c.toLowerCase() !== c.toUpperCase();
}

/** One phrase as a matcher: any run of whitespace between its words, any case, and whole
 *  words at either end (a boundary checked only where the phrase starts or ends with a letter
 *  or digit, so `c++ mode` works). */
export function phraseMatcher(phrase) {
  const trimmed = phrase.trim();
  const chars = Array.from(trimmed);
  const re = new RegExp(trimmed.split(/\s+/u).map(escape).join('\\s+'), 'giu');
  const start = isWordChar(chars[0]);
  const end = isWordChar(chars[chars.length - 1]);
  return (text) => {
    re.lastIndex = 0;
    for (let m = re.exec(text); m !== null; m = re.exec(text)) {
      const before = Array.from(text.slice(Math.max(0, m.index - 2), m.index)).pop();
      const after = Array.from(text.slice(m.index + m[0].length, m.index + m[0].length + 2))[0];
      if ((!start || !isWordChar(before)) && (!end || !isWordChar(after))) return true;
      re.lastIndex = m.index + 1;
    }
    return false;
  };
}

/** The policy's settings, read and checked. Throws Misconfigured. */
export function config(settings) {
  const rawPhrases = setting(settings, 'phrases');
  const phrases = rawPhrases === undefined
    ? DEFAULT_PHRASES
    : rawPhrases.split(/[\n|]/).map((p) => p.trim()).filter((p) => p !== '');
  if (phrases.length === 0) throw new Misconfigured('`phrases` lists no phrase');

  const rawRoles = setting(settings, 'roles');
  const roles = rawRoles === undefined
    ? DEFAULT_ROLES
    : rawRoles.split(',').map((r) => r.trim().toLowerCase()).filter((r) => r !== '');
  if (roles.length === 0) throw new Misconfigured('`roles` lists no role');

  let status = DEFAULT_STATUS;
  const rawStatus = setting(settings, 'status');
  if (rawStatus !== undefined) {
    const s = rawStatus.trim();
    status = /^\d{3}$/.test(s) ? Number(s) : NaN;
    if (!(status >= 400 && status <= 599)) {
      throw new Misconfigured(`\`status\` is \`${s}\`; it must be an HTTP status from 400 to 599`);
    }
  }
  const matchers = phrases.map(phraseMatcher);
  return { matches: (text) => matchers.some((m) => m(text)), roles: new Set(roles), status };
}

/** The last settings read: the host calls with the same settings every time. */
let cached = { key: null, value: null };

function compiled(settings) {
  const key = JSON.stringify(settings || []);
  if (cached.key !== key) {
    let value;
    try {
      value = { ok: config(settings) };
    } catch (e) {
      if (!(e instanceof Misconfigured)) throw e;
      value = { problem: e.message };
    }
    cached = { key, value };
  }
  return cached.value;
}

/** The texts of one message: string content, or the `text` of each text part. */
export function textsOf(message) {
  const content = message && message.content;
  if (typeof content === 'string') return [content];
  if (!Array.isArray(content)) return [];
  return content
    .filter((part) => part && typeof part === 'object' && (part.type === undefined || part.type === 'text'))
    .map((part) => part.text)
    .filter((text) => typeof text === 'string');
}

export const allow = () => ({ tag: 'allow' });
export const deny = (status, code, message) => ({ tag: 'deny', val: { status, message, code } });

export function misconfigured(problem) {
  return deny(500, 'policy_misconfigured', `the ${POLICY_NAME} policy is misconfigured: ${problem}`);
}

/** The number (from 1) of the first checked message holding a listed phrase, or 0. */
export function findInjection(request, cfg) {
  const messages = request && Array.isArray(request.messages) ? request.messages : [];
  for (let i = 0; i < messages.length; i++) {
    const message = messages[i];
    const role = message && typeof message.role === 'string' ? message.role.toLowerCase() : '';
    if (!cfg.roles.has(role)) continue;
    if (textsOf(message).some((text) => cfg.matches(text))) return i + 1;
  }
  return 0;
}

/** The `on-request` hook: a verdict for a unified request (JSON text). */
export function checkRequest(settings, requestText) {
  const cfg = compiled(settings);
  if (cfg.problem !== undefined) return misconfigured(cfg.problem);
  let request;
  try {
    request = JSON.parse(requestText);
  } catch {
    return allow(); // not JSON: the host's to refuse, not ours
  }
  const number = findInjection(request, cfg.ok);
  if (number === 0) return allow();
  return deny(
    cfg.ok.status,
    CODE,
    `message ${number} looks like a prompt injection (it tells the model to set aside its instructions); the request was refused`,
  );
}

/** What `describe` returns: the request hook only, nothing held back. */
export function describe() {
  return {
    name: POLICY_NAME,
    version: POLICY_VERSION,
    hooks: { request: true, answer: false, stream: false, finish: false },
    holdBack: 0,
  };
}
