/**
 * The console's files as the Worker serves them at /ui/ (src/app/console.ts, docs/console.md):
 * every answer carries the strict Content-Security-Policy and the other security headers, the
 * files have their content types, nothing outside /ui/ is shadowed, and no file names a host of
 * another origin (the console talks to its own origin only). The browser behaviour is
 * test/e2e/console-browser.test.ts.
 */
import { SELF } from "cloudflare:test";
import { describe, expect, it } from "vitest";

const CSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'";
const BASE = "http://lanyard.test";

async function gzipSize(text: string): Promise<number> {
  const stream = new Blob([text]).stream().pipeThrough(new CompressionStream("gzip"));
  return (await new Response(stream).arrayBuffer()).byteLength;
}

function expectSecurityHeaders(res: Response) {
  expect(res.headers.get("content-security-policy")).toBe(CSP);
  expect(res.headers.get("x-content-type-options")).toBe("nosniff");
  expect(res.headers.get("referrer-policy")).toBe("no-referrer");
}

describe("the console at /ui/", () => {
  it("serves the page with the strict CSP; /ui redirects to /ui/", async () => {
    const res = await SELF.fetch(`${BASE}/ui/`);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/^text\/html/);
    expectSecurityHeaders(res);
    const html = await res.text();
    expect(html).toContain('<script type="module" src="/ui/js/main.js"></script>');
    const bare = await SELF.fetch(`${BASE}/ui`, { redirect: "manual" });
    expect(bare.status).toBe(308);
    expect(bare.headers.get("location")).toBe("/ui/");
  });

  it("serves every file the page loads, each with its type and the headers, and names no other host", async () => {
    const html = await (await SELF.fetch(`${BASE}/ui/`)).text();
    const queue = [...html.matchAll(/(?:src|href)="(\/ui\/[^"]+)"/g)].map((m) => m[1] ?? "");
    expect(queue.length).toBeGreaterThanOrEqual(2);
    const seen = new Set<string>();
    let gzipped = 0;
    while (queue.length > 0) {
      const path = queue.shift() ?? "";
      if (seen.has(path)) continue;
      seen.add(path);
      const res = await SELF.fetch(`${BASE}${path}`);
      expect(res.status, path).toBe(200);
      expectSecurityHeaders(res);
      const body = await res.text();
      gzipped += await gzipSize(body);
      if (path.endsWith(".js")) {
        expect(res.headers.get("content-type"), path).toMatch(/javascript/);
        // Module imports are followed, so every module of the console is checked.
        for (const m of body.matchAll(/from "\.\/([\w-]+\.js)"/g)) queue.push(`/ui/js/${m[1]}`);
      }
      if (path.endsWith(".css")) expect(res.headers.get("content-type"), path).toMatch(/^text\/css/);
      // No absolute URL of any host (the SVG namespace is an identifier, never fetched).
      const urls = [...body.matchAll(/(?:https?:)?\/\/[a-z0-9.-]+\.[a-z]{2,}/gi)].map((m) => m[0]).filter((u) => !u.endsWith("www.w3.org"));
      expect(urls, path).toEqual([]);
      expect(body, path).not.toMatch(/innerHTML|outerHTML|insertAdjacentHTML|document\.write|eval\(|new Function/);
    }
    expect(seen.size).toBeGreaterThanOrEqual(5);
    // Small enough for a phone: docs/console.md "Size" gives the figure; this is its ceiling.
    expect(gzipped).toBeLessThan(32 * 1024);
  });

  it("answers a missing file 404 and a write 405, with the headers; /v1 is unaffected", async () => {
    const missing = await SELF.fetch(`${BASE}/ui/nope.js`);
    expect(missing.status).toBe(404);
    expectSecurityHeaders(missing);
    const post = await SELF.fetch(`${BASE}/ui/`, { method: "POST", body: "x" });
    expect(post.status).toBe(405);
    expectSecurityHeaders(post);
    const health = await SELF.fetch(`${BASE}/v1/sys/health`);
    expect(health.status).toBe(200);
    expect(health.headers.get("content-security-policy")).toBeNull();
    // A file of the console is not reachable outside /ui/.
    expect((await SELF.fetch(`${BASE}/index.html`)).status).toBe(404);
  });
});
