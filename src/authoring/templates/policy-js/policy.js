// {{name}}: a Switchyard policy in JavaScript, started by `switchyard policy new {{name}} --lang js`.
//
// It refuses a request whose last user message is empty (400 `empty_message`), and replaces the
// value after `password:` with `[REDACTED]` in answers and streamed answers. Change it to check
// what you need (wit/policy.wit is the contract).
//
// How componentize-js maps the WIT types:
//   record     -> object with camelCase fields (requestId, requestedModel, holdBack)
//   variant    -> { tag: 'allow' }, { tag: 'rewrite', val: text }, { tag: 'deny', val: {...} }
//   flags      -> object of booleans ({ request: true, answer: true, stream: true, finish: false })
//   option<T>  -> the value, or undefined
//   tuple      -> array ([key, value] settings)
// The host's import (the module name carries the WIT package version):
//   log('warn', 'something worth knowing');
// Anything thrown out of a hook traps the call: the policy's `on_error` decides what then.
import { log } from 'switchyard:policy/host@0.1.0';

/** Characters of streamed text the host holds back: a `password: value` up to this long that
 *  arrives split across chunks is still seen whole before any of it is sent. */
const HOLD_BACK = 32;
const REDACTED = '[REDACTED]';

const allow = () => ({ tag: 'allow' });
const rewrite = (text) => ({ tag: 'rewrite', val: text });
const deny = (status, code, message) => ({ tag: 'deny', val: { status, message, code } });

/** A setting by key (`settings` arrives as [key, value] pairs); the first wins. */
export function setting(settings, key) {
  const found = (settings || []).find(([k]) => k === key);
  return found ? found[1] : undefined;
}

/** A message's text: a string, or the text parts of a list. */
function textOf(content) {
  if (typeof content === 'string') return content;
  if (Array.isArray(content)) return content.map((p) => (p && typeof p.text === 'string' ? p.text : '')).join('');
  return '';
}

/** `text` with the value after each `password:` (any case) replaced, or undefined when nothing
 *  changed. A value running to the end of the text may still grow with the next delta: unless
 *  this is the `last` text, it is left for a later call (the host keeps it held back). */
function redact(text, last) {
  let changed = false;
  const out = text.replace(/(password:[ \t]*)(\S+)/gi, (match, key, value, offset) => {
    if (value === REDACTED || (!last && offset + match.length === text.length)) return match;
    changed = true;
    return key + REDACTED;
  });
  return changed ? out : undefined;
}

function onRequest(context, request) {
  let body;
  try {
    body = JSON.parse(request);
  } catch {
    return allow(); // not JSON: the host's to refuse, not ours
  }
  const messages = Array.isArray(body.messages) ? body.messages : [];
  const users = messages.filter((m) => m && m.role === 'user');
  if (users.length > 0 && textOf(users[users.length - 1].content).trim() === '') {
    return deny(400, 'empty_message', 'the last user message is empty');
  }
  return allow();
}

function onAnswer(context, answer) {
  let body;
  try {
    body = JSON.parse(answer);
  } catch {
    return allow();
  }
  let changed = false;
  for (const choice of Array.isArray(body.choices) ? body.choices : []) {
    const message = choice && choice.message;
    if (message && typeof message.content === 'string') {
      const redacted = redact(message.content, true);
      if (redacted !== undefined) {
        message.content = redacted;
        changed = true;
      }
    }
  }
  return changed ? rewrite(JSON.stringify(body)) : allow();
}

function onStream(context, text, last) {
  const redacted = redact(text, last);
  return redacted === undefined ? allow() : rewrite(redacted);
}

/** Runs a hook; what it throws is logged through the host (the component has no console) and
 *  thrown again, which traps the call. */
function guarded(hook, fn) {
  return (...args) => {
    try {
      return fn(...args);
    } catch (e) {
      log('error', `{{name}}: ${hook} failed: ${e && e.stack ? e.stack : String(e)}`);
      throw e;
    }
  };
}

export const policy = {
  describe() {
    return {
      name: '{{name}}',
      version: '0.1.0',
      hooks: { request: true, answer: true, stream: true, finish: false },
      holdBack: HOLD_BACK,
    };
  },
  onRequest: guarded('on-request', onRequest),
  onAnswer: guarded('on-answer', onAnswer),
  onStream: guarded('on-stream', onStream),
  // Not in describe's hooks: the host never calls it; the world still needs it.
  onFinish: () => {},
};
