// A headless "browser" for oauth_server.mjs's authorization server: given an
// authorization URL, it signs in and consents on oidc-provider's development pages
// (any login and password are accepted), then delivers the authorization response to
// the client's redirect URI, as a user's browser would.
//
// Usage: node oauth_login.mjs [<.peers dir>] AUTHORIZATION_URL [--print] [--deny]
//          [--login NAME]
//   The .peers dir is accepted for symmetry with the other peers and ignored (only
//   Node built-ins are used), so `node oauth_login.mjs URL` is the form to run as a
//   $BROWSER-style opener (CORRAL_TEST_PEERS is not needed).
//   --print   print the final redirect URL (redirect_uri?code=…&state=…&iss=…, or
//             ?error=access_denied…) on stdout instead of requesting it
//   --deny    cancel at the first page instead of signing in, so the redirect carries
//             error=access_denied
//   --login   the account name to sign in as (default corral-test), which becomes
//             the tokens' subject
// Without --print it requests the final redirect URL (the client's loopback callback),
// prints `callback: STATUS` on stdout, and exits 0 when that answered 2xx, 1 otherwise.
// Exits 1 too when the server does not behave as expected (the steps go to stderr).
//
// The steps, following what the server answers (no automatic redirects; cookies kept
// in a jar with their paths):
//   GET  /auth?…                       → 303 /interaction/UID   (a login form)
//   POST /interaction/UID  prompt=login&login=…&password=…
//                                      → 303 /auth/UID → 303 /interaction/UID2 (consent)
//   POST /interaction/UID2 prompt=consent
//                                      → 303 /auth/UID2 → 303 redirect_uri?code&state&iss
// (With --deny: GET /interaction/UID/abort → 303 /auth/UID → 303 redirect_uri?error=….)
// Pages it already has a session or grant for are skipped by the server itself.

const args = process.argv.slice(2);
const flags = new Set(args.filter((a) => a.startsWith('--')));
const loginIdx = args.indexOf('--login');
const login = loginIdx >= 0 ? args[loginIdx + 1] : 'corral-test';
const positional = args.filter((a, i) => !a.startsWith('--') && !(loginIdx >= 0 && i === loginIdx + 1));
const authUrl = positional.find((a) => /^https?:\/\//.test(a));
if (!authUrl) {
  console.error('usage: node oauth_login.mjs [<.peers dir>] AUTHORIZATION_URL [--print] [--deny] [--login NAME]');
  process.exit(2);
}
const print = flags.has('--print');
const deny = flags.has('--deny');
const asOrigin = new URL(authUrl).origin;

function fail(msg) {
  console.error(`oauth_login: ${msg}`);
  process.exit(1);
}

// ---- A small cookie jar: name + path, expiry honoured, host-only. ----
const jar = new Map(); // `${path}\0${name}` -> {name, value, path, expires}
function storeCookies(res, url) {
  for (const line of res.headers.getSetCookie()) {
    const [pair, ...attrs] = line.split(';');
    const eq = pair.indexOf('=');
    const name = pair.slice(0, eq).trim();
    const value = pair.slice(eq + 1).trim();
    let cpath = url.pathname.replace(/\/[^/]*$/, '') || '/';
    let expires = Infinity;
    for (const a of attrs) {
      const [k, v = ''] = a.split('=');
      const key = k.trim().toLowerCase();
      if (key === 'path') cpath = v.trim() || '/';
      else if (key === 'max-age') expires = Date.now() + Number(v) * 1000;
      else if (key === 'expires' && expires === Infinity) expires = Date.parse(v);
    }
    const id = `${cpath}\0${name}`;
    if (expires <= Date.now()) jar.delete(id);
    else jar.set(id, { name, value, path: cpath, expires });
  }
}
function cookieHeader(url) {
  const now = Date.now();
  const out = [];
  for (const c of jar.values()) {
    const inPath = url.pathname === c.path || url.pathname.startsWith(c.path.endsWith('/') ? c.path : `${c.path}/`);
    if (c.expires > now && inPath) out.push(`${c.name}=${c.value}`);
  }
  return out.join('; ');
}

async function request(method, url, form) {
  const u = new URL(url);
  const headers = { cookie: cookieHeader(u), accept: 'text/html' };
  let body;
  if (form) {
    headers['content-type'] = 'application/x-www-form-urlencoded';
    body = new URLSearchParams(form).toString();
  }
  const res = await fetch(u, { method, headers, body, redirect: 'manual' });
  storeCookies(res, u);
  console.error(`oauth_login: ${method} ${u.pathname} → ${res.status}`);
  return res;
}

const unescape = (s) =>
  s
    .replace(/&#x([0-9a-f]+);/gi, (_, h) => String.fromCodePoint(parseInt(h, 16)))
    .replace(/&#(\d+);/g, (_, d) => String.fromCodePoint(Number(d)))
    .replace(/&quot;/g, '"')
    .replace(/&lt;/g, '<')
    .replace(/&gt;/g, '>')
    .replace(/&amp;/g, '&');

// The page's form: where it posts and the fields it carries (hidden ones with their
// values, the login and password fields filled in).
function readForm(html, pageUrl) {
  const form = /<form\b[^>]*\baction="([^"]*)"[^>]*>([\s\S]*?)<\/form>/i.exec(html);
  if (!form) return undefined;
  const fields = {};
  for (const input of form[2].matchAll(/<input\b([^>]*)>/gi)) {
    const name = /\bname="([^"]*)"/i.exec(input[1])?.[1];
    if (!name) continue;
    const type = /\btype="([^"]*)"/i.exec(input[1])?.[1]?.toLowerCase();
    const value = unescape(/\bvalue="([^"]*)"/i.exec(input[1])?.[1] ?? '');
    if (type === 'password') fields[name] = 'any-password';
    else if (name === 'login') fields[name] = login;
    else fields[name] = value;
  }
  return { action: new URL(unescape(form[1]), pageUrl).href, fields };
}

let url = authUrl;
let res = await request('GET', url);
let finalUrl;
for (let step = 0; step < 20 && !finalUrl; step += 1) {
  if (res.status >= 300 && res.status < 400) {
    const next = new URL(res.headers.get('location'), url).href;
    if (new URL(next).origin !== asOrigin) {
      finalUrl = next; // to the client's redirect URI: the end of the authorization server's part
      break;
    }
    url = next;
    res = await request('GET', url);
    continue;
  }
  const html = await res.text();
  if (res.status !== 200) fail(`unexpected ${res.status} at ${url}: ${html.slice(0, 500)}`);
  if (deny) {
    const abort = /<a\b[^>]*\bhref="([^"]*\/abort)"/i.exec(html);
    if (!abort) fail(`no cancel link on ${url}`);
    url = new URL(unescape(abort[1]), url).href;
    res = await request('GET', url);
    continue;
  }
  const form = readForm(html, url);
  if (!form) fail(`no form on ${url}: ${html.slice(0, 500)}`);
  console.error(`oauth_login: submitting prompt=${form.fields.prompt}`);
  url = form.action;
  res = await request('POST', url, form.fields);
}
if (!finalUrl) fail('no redirect to the client after 20 steps');

if (print) {
  process.stdout.write(`${finalUrl}\n`);
  process.exit(0);
}
const callback = await fetch(finalUrl, { redirect: 'manual' }).catch((e) => fail(`callback ${finalUrl}: ${e.message}`));
await callback.text().catch(() => {});
process.stdout.write(`callback: ${callback.status}\n`);
process.exit(callback.status >= 200 && callback.status < 300 ? 0 : 1);
