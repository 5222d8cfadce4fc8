// A real OpenID provider (panva's oidc-provider, pinned in package.json) on loopback, for the
// WebUI single sign-on test (sso.mjs, run by the Rust test that spawns this). Plain http, bound
// to 127.0.0.1; one confidential client, `switchyard`; the provider's own development login and
// consent pages (any password).
//
//   node tests/browser/idp.mjs [PORT|0] [REDIRECT_URI[,REDIRECT_URI...]]
//
// Environment (argv wins where both are given):
//   IDP_PORT            port to listen on (default 0: any free one)
//   IDP_REDIRECT_URIS   comma-separated redirect URIs of the client (or register them later with
//                       POST /__client, once the gateway's address is known)
//   IDP_CLIENT_SECRET   the client's secret (default `switchyard-test-secret`; client_secret_basic
//                       or client_secret_post). IDP_PUBLIC=1 makes it a public client (auth method
//                       `none`) instead. PKCE S256 is required either way.
//   IDP_MODE            starting mode for ID tokens (see MODES; default `normal`)
//   IDP_HOST            host name in the issuer URL (default `localhost`; the socket is always
//                       127.0.0.1). With the gateway on 127.0.0.1 the two are then different sites
//                       with separate cookie jars, as in production.
//   IDP_STAY=1          keep running when stdin closes (for a manual `node idp.mjs &`)
//
// Prints exactly one line on stdout once listening:
//   {"issuer":"http://localhost:PORT","client_id":"switchyard","client_secret":"...","control":"http://localhost:PORT"}
// Everything else (the provider's own notices included) goes to stderr.
//
// It exits when its stdin closes: the test that spawns it holds the pipe's other end, so a test
// that dies (or forgets to kill it) leaves no provider behind.
//
// Control endpoints (on `control`, the issuer's origin; for the test only):
//   GET  /__mode                         -> {"mode": "..."}
//   POST /__mode  {"mode": "expired"}    (or the bare word as text/plain) -> {"mode": "..."}
//   GET  /__client                       -> {"redirect_uris": [...], "post_logout_redirect_uris": [...]}
//   POST /__client {"redirect_uris": [...], "post_logout_redirect_uris": [...]}
//        replaces the client's registration (idempotent: posting the same twice is fine).
//
// Users (the dev login takes any password): alice (groups [gateway-admins]), bob (groups
// [gateway-viewers]), carol (no groups). Any other login name signs in as a user with no groups
// and email <name>@example.test.

// The provider prints notices with console.info (stdout): keep stdout for the one JSON line.
console.info = console.error;
console.log = console.error;
console.warn = console.error;

if (process.env.IDP_STAY !== '1') {
  const bye = () => process.exit(0);
  process.stdin.on('end', bye);
  process.stdin.on('close', bye);
  process.stdin.on('error', bye);
  process.stdin.resume();
}
for (const sig of ['SIGTERM', 'SIGINT', 'SIGHUP']) process.on(sig, () => process.exit(0));

const crypto = await import('node:crypto');
const http = await import('node:http');
const { default: Provider } = await import('oidc-provider');
// The provider's own in-memory store (oidc-provider has no `exports` map; the version is pinned).
const { createMemoryAdapter } = await import('oidc-provider/lib/adapters/memory_adapter.js');

const CLIENT_ID = 'switchyard';

const USERS = {
  alice: { name: 'Alice Admin', email: 'alice@example.test', groups: ['gateway-admins'] },
  bob: { name: 'Bob Viewer', email: 'bob@example.test', groups: ['gateway-viewers'] },
  carol: { name: 'Carol Nogroup', email: 'carol@example.test', groups: [] },
};

/**
 * What the token endpoint does to the ID token it issues. Every mode except `tampered` re-signs
 * with the provider's own key (this script made it and handed it to the provider), so exactly
 * one check fails at the relying party and the signature is still good.
 */
const MODES = {
  normal: null,
  // exp ten minutes ago (iat an hour before that): only the expiry check can refuse it.
  expired: (p) => ({ ...p, iat: p.iat - 4200, exp: p.iat - 600, ...(p.auth_time ? { auth_time: p.auth_time - 4200 } : {}) }),
  // the payload changed after signing (someone else, an admin), the signature left as it was.
  tampered: null,
  // audience another client's
  wrong_aud: (p) => ({ ...p, aud: 'someone-else' }),
  // issuer another provider's
  wrong_iss: (p) => ({ ...p, iss: 'http://127.0.0.1:1/other-issuer' }),
  // nonce not the one the relying party sent
  wrong_nonce: (p) => ({ ...p, nonce: 'not-the-nonce-you-sent' }),
  // signed with a key that is in no JWKS the provider publishes (kid unknown)
  foreign_key: null,
};

const port = Number(process.argv[2] ?? process.env.IDP_PORT ?? 0);
const redirectArg = process.argv[3] ?? process.env.IDP_REDIRECT_URIS ?? '';
let mode = process.env.IDP_MODE ?? 'normal';
if (!Object.hasOwn(MODES, mode)) throw new Error(`unknown IDP_MODE ${mode}; one of ${Object.keys(MODES).join(', ')}`);

const isPublic = process.env.IDP_PUBLIC === '1';
const clientSecret = isPublic ? undefined : (process.env.IDP_CLIENT_SECRET ?? 'switchyard-test-secret');

let clientMetadata = {
  client_id: CLIENT_ID,
  ...(isPublic ? { token_endpoint_auth_method: 'none' } : { client_secret: clientSecret }),
  redirect_uris: redirectArg.split(',').map((s) => s.trim()).filter(Boolean),
  post_logout_redirect_uris: [],
  grant_types: ['authorization_code'],
  response_types: ['code'],
  id_token_signed_response_alg: 'RS256',
};

// The signing key: made here, so the script can re-sign ID tokens exactly as the provider does.
const { privateKey } = crypto.generateKeyPairSync('rsa', { modulusLength: 2048 });
const signingJwk = { ...privateKey.export({ format: 'jwk' }), kid: 'idp-key-1', use: 'sig', alg: 'RS256' };
const { privateKey: foreignKey } = crypto.generateKeyPairSync('rsa', { modulusLength: 2048 });

const b64 = (buf) => Buffer.from(buf).toString('base64url');
const json64 = (obj) => b64(JSON.stringify(obj));

function resign(header, payload, key = privateKey, kid = signingJwk.kid) {
  const h = json64({ ...header, kid });
  const p = json64(payload);
  const sig = crypto.sign('sha256', Buffer.from(`${h}.${p}`), key); // RS256 = RSASSA-PKCS1-v1_5 + SHA-256
  return `${h}.${p}.${b64(sig)}`;
}

function rewriteIdToken(jwt) {
  const [h, p, s] = jwt.split('.');
  const header = JSON.parse(Buffer.from(h, 'base64url'));
  const payload = JSON.parse(Buffer.from(p, 'base64url'));
  switch (mode) {
    case 'normal':
      return jwt;
    case 'tampered': {
      // Always a different payload (alice is an admin already): someone else, with the admins' group.
      const forged = json64({ ...payload, sub: 'mallory', email: 'mallory@example.test', preferred_username: 'mallory', groups: ['gateway-admins'] });
      if (forged === p) throw new Error('tampering left the payload as it was');
      return `${h}.${forged}.${s}`;
    }
    case 'foreign_key':
      return resign(header, payload, foreignKey, 'not-in-the-jwks');
    default:
      return resign(header, MODES[mode](payload));
  }
}

// Listen first: with port 0 the issuer (which names the port) is known only then.
const server = http.createServer();
await new Promise((resolve, reject) => {
  server.once('error', reject);
  server.listen(port, '127.0.0.1', resolve);
});
const issuer = `http://${process.env.IDP_HOST || 'localhost'}:${server.address().port}`;

const memory = createMemoryAdapter();
const clientStore = {
  // Read on every lookup: oidc-provider re-validates a client whose metadata changed.
  async find(id) { return id === CLIENT_ID ? clientMetadata : undefined; },
  async upsert() {}, async destroy() {}, async consume() {},
  async findByUid() {}, async findByUserCode() {}, async revokeByGrantId() {},
};

const provider = new Provider(issuer, {
  adapter: (model) => (model === 'Client' ? clientStore : memory(model)),
  clients: [],
  jwks: { keys: [signingJwk] },
  cookies: { keys: [crypto.randomBytes(32).toString('base64url')] },
  // Scope -> claims. Scopes named here are advertised in scopes_supported.
  claims: {
    openid: ['sub'],
    email: ['email', 'email_verified'],
    profile: ['name', 'preferred_username'],
    groups: ['groups'],
  },
  // Put scope-requested claims (email, groups) in the ID token too, as Keycloak, Entra and
  // Okta (with a groups claim configured) do; the spec's default is userinfo only.
  conformIdTokenClaims: false,
  pkce: { required: () => true }, // S256 is the only method oidc-provider 9 accepts
  features: {
    devInteractions: { enabled: true }, // GET/POST /interaction/:uid, any password
    rpInitiatedLogout: { enabled: true },
  },
  async findAccount(ctx, sub) {
    const user = USERS[sub] ?? { name: sub, email: `${sub}@example.test`, groups: [] };
    return {
      accountId: sub,
      async claims() {
        return {
          sub,
          name: user.name,
          preferred_username: sub,
          email: user.email,
          email_verified: true,
          groups: user.groups,
        };
      },
    };
  },
  ttl: {
    AccessToken: 600,
    AuthorizationCode: 60,
    IdToken: 600,
    Interaction: 600,
    Session: 3600,
    Grant: 3600,
  },
  clientBasedCORS: () => false,
});

async function readBody(req) {
  const chunks = [];
  for await (const c of req) chunks.push(c);
  const text = Buffer.concat(chunks).toString('utf8').trim();
  if (!text) return {};
  try { return JSON.parse(text); } catch { return { mode: text }; }
}

const isUriList = (v) => Array.isArray(v) && v.every((u) => typeof u === 'string');

provider.use(async (ctx, next) => {
  if (ctx.path === '/__mode') {
    if (ctx.method === 'POST') {
      const { mode: wanted } = await readBody(ctx.req);
      if (typeof wanted !== 'string' || !Object.hasOwn(MODES, wanted)) {
        ctx.status = 400;
        ctx.body = { error: `unknown mode ${wanted}`, modes: Object.keys(MODES) };
        return;
      }
      mode = wanted;
      console.error(`idp: ID token mode now ${mode}`);
    }
    ctx.body = { mode };
    return;
  }
  if (ctx.path === '/__client' && ctx.method === 'GET') {
    ctx.body = { redirect_uris: clientMetadata.redirect_uris, post_logout_redirect_uris: clientMetadata.post_logout_redirect_uris };
    return;
  }
  if (ctx.path === '/__client' && ctx.method === 'POST') {
    const body = await readBody(ctx.req);
    for (const k of ['redirect_uris', 'post_logout_redirect_uris']) {
      if (body[k] !== undefined && !isUriList(body[k])) {
        ctx.status = 400;
        ctx.body = { error: `${k} must be a list of URLs` };
        return;
      }
    }
    clientMetadata = {
      ...clientMetadata,
      ...(body.redirect_uris ? { redirect_uris: [...new Set(body.redirect_uris)] } : {}),
      ...(body.post_logout_redirect_uris ? { post_logout_redirect_uris: [...new Set(body.post_logout_redirect_uris)] } : {}),
    };
    console.error(`idp: client ${CLIENT_ID} redirect_uris now ${clientMetadata.redirect_uris.join(' ')}`);
    ctx.body = { redirect_uris: clientMetadata.redirect_uris, post_logout_redirect_uris: clientMetadata.post_logout_redirect_uris };
    return;
  }
  await next();
  // The interposer: the real token response, its ID token rewritten per the mode.
  if (ctx.oidc?.route === 'token' && ctx.status === 200 && ctx.body?.id_token && mode !== 'normal') {
    ctx.body = { ...ctx.body, id_token: rewriteIdToken(ctx.body.id_token) };
    console.error(`idp: the token endpoint answered a ${mode} ID token`);
  }
});

provider.on('server_error', (ctx, err) => console.error('idp: server_error', err));
provider.on('grant.error', (ctx, err) => console.error(`idp: token request refused: ${err.message} (${err.error_description ?? ''})`));
provider.on('authorization.error', (ctx, err) => console.error(`idp: authorization refused: ${err.message} (${err.error_description ?? ''})`));

server.on('request', provider.callback());
process.stdout.write(`${JSON.stringify({
  issuer,
  client_id: CLIENT_ID,
  client_secret: clientSecret ?? null,
  control: issuer,
})}\n`);
console.error(`idp: listening at ${issuer} (socket 127.0.0.1:${server.address().port}); modes ${Object.keys(MODES).join(', ')}`);
