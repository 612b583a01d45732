/**
 * Serves the five fake providers over HTTP for manual runs and benchmarks (docs/secrets-sync.md
 * "Trying it against the fakes"). Bundle and run with Node:
 *   npx esbuild test/helpers/fake-serve.ts --bundle --platform=node --format=cjs --outfile=/tmp/lanyard-fakes.cjs --log-level=warning
 *   node /tmp/lanyard-fakes.cjs # ports 9101-9105, or FAKE_PORT_BASE=9200 node /tmp/lanyard-fakes.cjs
 * then point the Worker at them with the endpoint variables it prints. `GET /__fake/state` on
 * each port shows what the fake holds (values included: these are fakes).
 */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import { FakeCloudone } from "./fake-cloudone";
import { FakeCloudthree } from "./fake-cloudthree";
import { FakeCloudtwo } from "./fake-cloudtwo";
import { FakeRepohost } from "./fake-repohost";
import type { FakeProvider } from "./fake-router";
import { FakeWebhost } from "./fake-webhost";
import { BODIES, SECRETS } from "./sync-bodies";
import { RSA_PKCS8_PEM } from "./sync-fixtures";
import { parsePem } from "../../src/sync/rsa";

async function toRequest(req: IncomingMessage, port: number): Promise<Request> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  const body = Buffer.concat(chunks);
  const headers = new Headers();
  for (const [k, v] of Object.entries(req.headers)) if (typeof v === "string") headers.set(k, v);
  return new Request(`http://127.0.0.1:${port}${req.url ?? "/"}`, { method: req.method, headers, body: body.length > 0 && req.method !== "GET" ? body : undefined });
}

function serve(port: number, fake: FakeProvider, state: () => unknown): void {
  createServer((req: IncomingMessage, res: ServerResponse) => {
    void (async () => {
      try {
        const r = req.url === "/__fake/state" ? new Response(JSON.stringify(state(), null, 2), { headers: { "content-type": "application/json" } }) : await fake.handle(await toRequest(req, port));
        const headers: Record<string, string> = {};
        r.headers.forEach((v, k) => {
          headers[k] = v;
        });
        res.writeHead(r.status, headers);
        res.end(Buffer.from(await r.arrayBuffer()));
      } catch (e) {
        res.writeHead(500, { "content-type": "application/json" });
        res.end(JSON.stringify({ error: String(e) }));
      }
    })();
  }).listen(port, "127.0.0.1");
}

async function main(): Promise<void> {
  const base = Number(process.env.FAKE_PORT_BASE ?? "9100");
  const one = new FakeCloudone({ [SECRETS.awsKey]: SECRETS.awsSecret });
  const two = new FakeCloudtwo();
  two.addClient(BODIES["cloudtwo-kv"].tenant_id, BODIES["cloudtwo-kv"].client_id, SECRETS.clientSecret);
  const three = new FakeCloudthree();
  await three.addAccount("sync@lanyard-test-project.iam.gserviceaccount.com", parsePem(RSA_PKCS8_PEM).der);
  const gh = new FakeRepohost([SECRETS.ghToken]);
  const vc = new FakeWebhost(SECRETS.vercelToken);
  vc.addProject("prj_abc123");
  serve(base + 1, one, () => Object.fromEntries([...one.secrets].map(([k, v]) => [k, { value: v.value, tags: v.tags }])));
  serve(base + 2, two, () => Object.fromEntries([...two.secrets].map(([k, v]) => [k, { value: v.value, deleted: v.deleted, tags: v.tags }])));
  serve(base + 3, three, () => Object.fromEntries([...three.secrets].map(([k, v]) => [k, { latest: v.versions[v.versions.length - 1], labels: v.labels }])));
  serve(base + 4, gh, () => gh.state());
  serve(base + 5, vc, () => Object.fromEntries([...vc.projects].map(([k, p]) => [k, p.envs.map((e) => ({ key: e.key, value: e.value, target: e.target }))])));
  console.log(`fake providers listening; put these in .dev.vars:
CLOUDONE_ENDPOINT=http://127.0.0.1:${base + 1}
CLOUDTWO_ENDPOINT=http://127.0.0.1:${base + 2}
CLOUDTHREE_ENDPOINT=http://127.0.0.1:${base + 3}
REPOHOST_ENDPOINT=http://127.0.0.1:${base + 4}
WEBHOST_ENDPOINT=http://127.0.0.1:${base + 5}`);
}

void main();
