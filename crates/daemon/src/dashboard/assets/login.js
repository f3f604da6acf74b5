"use strict";
(async () => {
  const secret = location.hash.slice(1);
  history.replaceState(null, "", "/dashboard/login");
  const say = (t) => { document.getElementById("status").textContent = t; };
  const r = await fetch("/dashboard/login", { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ secret }) });
  if (r.status === 204) { location.replace("/dashboard/"); return; }
  let msg = "sign-in refused";
  try { msg = (await r.json()).error || msg; } catch (_) {}
  if (document.readyState === "loading") await new Promise((ok) => document.addEventListener("DOMContentLoaded", ok));
  say(msg);
})();
