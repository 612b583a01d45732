/**
 * The operator's console at /ui/ (docs/console.md): static files from the console/ folder
 * (wrangler.toml `[assets]`, reached through the ASSETS binding), answered by this Worker so that
 * each one carries the security headers below. The console is only a client of the public /v1
 * API with the signed-in token; nothing here reads a token or the database.
 *
 * Headers (docs/security.md "The console"):
 * - Content-Security-Policy: scripts, styles and requests from this origin only, no inline script
 *   or style, no frames, no form submissions, no <base> (CSP Level 3,
 *   https://www.w3.org/TR/CSP3/). A value the API returns can never become a script: the page
 *   inserts data as text, and even an injected inline script would be refused.
 * - X-Content-Type-Options: nosniff (https://fetch.spec.whatwg.org/#x-content-type-options-header).
 * - Referrer-Policy: no-referrer, so no console address leaves with a request.
 * - Cache-Control: no-cache: a browser revalidates (ETag) and never runs yesterday's script.
 */

export const CONSOLE_CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'";

const SECURITY_HEADERS: Record<string, string> = {
  "content-security-policy": CONSOLE_CSP,
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer",
  "x-frame-options": "DENY",
  "cross-origin-opener-policy": "same-origin",
  "cache-control": "no-cache",
};

/** Whether a path belongs to the console (`/ui` and everything under `/ui/`). */
export function isConsolePath(pathname: string): boolean {
  return pathname === "/ui" || pathname.startsWith("/ui/");
}

/**
 * Answers a console request: `/ui` redirects to `/ui/`, `/ui/` is console/index.html, `/ui/<file>`
 * is console/<file>; only GET and HEAD. The asset's own status and validators (ETag, 304) are
 * kept; the security headers are added to every answer, errors included.
 */
export async function serveConsole(request: Request, assets: Fetcher | undefined): Promise<Response> {
  const url = new URL(request.url);
  if (request.method !== "GET" && request.method !== "HEAD") {
    return withHeaders(new Response("method not allowed\n", { status: 405, headers: { allow: "GET, HEAD", "content-type": "text/plain; charset=utf-8" } }));
  }
  if (url.pathname === "/ui") return withHeaders(new Response(null, { status: 308, headers: { location: "/ui/" } }));
  if (!assets) return withHeaders(new Response("the console is not deployed (no ASSETS binding)\n", { status: 404, headers: { "content-type": "text/plain; charset=utf-8" } }));
  const rest = url.pathname.slice("/ui".length);
  const file = rest === "/" ? "/index.html" : rest;
  const assetUrl = new URL(file, url.origin);
  const res = await assets.fetch(new Request(assetUrl, { method: request.method, headers: request.headers }));
  if (res.status === 404) return withHeaders(new Response("not found\n", { status: 404, headers: { "content-type": "text/plain; charset=utf-8" } }));
  return withHeaders(res);
}

function withHeaders(res: Response): Response {
  const out = new Response(res.body, res);
  for (const [k, v] of Object.entries(SECURITY_HEADERS)) out.headers.set(k, v);
  return out;
}
