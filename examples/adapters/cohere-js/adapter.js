// Component glue: the WIT world `switchyard:adapter/adapter-world` for componentize-js.
// The mapping itself lives in cohere.js (plain JS, tested in Node).
import { log, nowUnixMs } from 'switchyard:adapter/host@0.1.0';
import { AdapterFailure, CohereSession, describe } from './cohere.js';

const host = {
  // u64 arrives as a BigInt.
  now: () => Number(nowUnixMs()),
};

/** Runs one session call. An AdapterFailure is rethrown as is: its own `payload` property is
 *  what componentize-js lowers into the `err` of the `result`. Anything else is a bug: it is
 *  logged through the host (the component has no stdio) and rethrown, which traps the call. */
function guarded(call, fn) {
  try {
    return fn();
  } catch (e) {
    if (e instanceof AdapterFailure) throw e;
    log('error', `cohere adapter: ${call} failed: ${e && e.stack ? e.stack : String(e)}`);
    throw e;
  }
}

class Session {
  constructor(context) {
    this.inner = new CohereSession(context, host);
  }

  transformRequest(request) {
    return guarded('transform-request', () => this.inner.transformRequest(request));
  }

  transformResponse(response) {
    return guarded('transform-response', () => this.inner.transformResponse(response));
  }

  transformStreamChunk(event) {
    return guarded('transform-stream-chunk', () => this.inner.transformStreamChunk(event));
  }

  finishStream() {
    return guarded('finish-stream', () => this.inner.finishStream());
  }
}

export const adapter = { describe, Session };
