// Component glue: the WIT world `switchyard:policy/policy-world` for componentize-js.
// The logic lives in injection.js (plain JS, tested in Node).
import { log } from 'switchyard:policy/host@0.1.0';
import { allow, checkRequest, describe } from './injection.js';

/** Runs one hook. Anything thrown is a bug: it is logged through the host (the component has
 *  no stdio) and rethrown, which traps the call; the policy's `on_error` decides what then. */
function guarded(hook, fn) {
  try {
    return fn();
  } catch (e) {
    log('error', `injection policy: ${hook} failed: ${e && e.stack ? e.stack : String(e)}`);
    throw e;
  }
}

export const policy = {
  describe,
  onRequest: (context, request) => guarded('on-request', () => checkRequest(context.settings, request)),
  // Not in `describe`'s hooks, so the host never calls these; the world still needs them.
  onAnswer: () => allow(),
  onStream: () => allow(),
  onFinish: () => {},
};
