// Exchanges the one-time secret in the URL's fragment for the dashboard's cookie.
// The fragment never goes to the server in a request line, and is wiped from the
// address bar and history before anything else happens.
let secret = location.hash.replace(/^#/, '');
try { secret = decodeURIComponent(secret); } catch { /* keep it as it is */ }
history.replaceState(null, '', '/dashboard/login');

const status = document.getElementById('login-status');
// Before the session exists only this script and the icon are served, not app.css:
// the few styles are set here (CSSOM, which the CSP allows).
Object.assign(document.body.style, { font: '15px/1.5 system-ui, sans-serif', margin: '12vh auto', maxWidth: '36em', padding: '0 16px' });
const say = (msg, bad) => { status.textContent = msg; status.style.color = bad ? '#d1242f' : ''; status.style.fontWeight = bad ? '600' : ''; };


async function login() {
  if (!secret) {
    say('This link has no login secret: run `corral dashboard` for a new one.', true);
    return;
  }
  let r;
  try {
    r = await fetch('/dashboard/login', {
      method: 'POST',
      credentials: 'same-origin',
      cache: 'no-store',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ secret }),
    });
  } catch (e) {
    say('The daemon does not answer (' + e.message + '): is `corral up` running?', true);
    return;
  }
  if (r.status === 204 || r.ok) {
    location.replace('/dashboard/');
    return;
  }
  let msg = '';
  try { msg = (await r.json()).error || ''; } catch { /* not JSON */ }
  say(String(msg || 'login refused (HTTP ' + r.status + '): run `corral dashboard` for a new link'), true);
}
login();
