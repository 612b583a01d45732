/**
 * The five fake providers (test/helpers/fake-*.ts) served over real HTTP from Node, for manual
 * runs (./fake-serve.ts) and the sync benchmark (scripts/bench-sync.mjs). Each fake gets its own
 * port; `GET /__fake/state` on a port shows what that fake holds (values included: these are
 * fakes). The fakes know the credentials of ./sync-bodies.ts, so the bodies there work as-is.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { parsePem } from "../../src/engines/sync/rsa";
import { FakeCloudone } from "./fake-cloudone";
import { FakeCloudthree } from "./fake-cloudthree";
import { FakeCloudtwo } from "./fake-cloudtwo";
import { FakeRepohost } from "./fake-repohost";
import type { FakeProvider } from "./fake-router";
import { FakeWebhost } from "./fake-webhost";
import { BODIES, SECRETS } from "./sync-bodies";
import { RSA_PKCS8_PEM, serviceAccountJson } from "./sync-fixtures";

export { BODIES, SECRETS, serviceAccountJson };

/** The app the repohost fake trusts: its id and PKCS#8 key (register it with repohost-apps). */
export const FAKE_APP = { name: "lanyard-fake-app", appId: 123456, installationId: 424242, privateKey: RSA_PKCS8_PEM };

export interface FakeProviders {
  one: FakeCloudone;
  two: FakeCloudtwo;
  three: FakeCloudthree;
  gh: FakeRepohost;
  vc: FakeWebhost;
}

/** The fakes, each knowing the credentials of ./sync-bodies.ts and the app FAKE_APP. */
export async function createFakeProviders(): Promise<FakeProviders> {
  const one = new FakeCloudone({ [SECRETS.awsKey]: SECRETS.awsSecret });
  const two = new FakeCloudtwo();
  two.addClient(BODIES["cloudtwo-kv"].tenant_id, BODIES["cloudtwo-kv"].client_id, SECRETS.clientSecret);
  const three = new FakeCloudthree();
  await three.addAccount("sync@lanyard-test-project.iam.gserviceaccount.com", parsePem(RSA_PKCS8_PEM).der);
  const gh = new FakeRepohost([SECRETS.ghToken]);
  await gh.addApp(FAKE_APP.appId, parsePem(FAKE_APP.privateKey).der);
  const vc = new FakeWebhost(SECRETS.vercelToken);
  vc.addProject(BODIES["webhost-project"].project_id);
  return { one, two, three, gh, vc };
}

async function toRequest(req: IncomingMessage, port: number): Promise<Request> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  const body = Buffer.concat(chunks);
  const headers = new Headers();
  for (const [k, v] of Object.entries(req.headers)) if (typeof v === "string") headers.set(k, v);
  const hasBody = body.length > 0 && req.method !== "GET" && req.method !== "HEAD";
  return new Request(`http://127.0.0.1:${port}${req.url ?? "/"}`, { method: req.method, headers, body: hasBody ? body : undefined });
}

/** Serves one fake on 127.0.0.1:`port` (0 picks a free port); resolves once it listens. */
export function serveFake(port: number, fake: FakeProvider, state: () => unknown): Promise<{ server: Server; port: number }> {
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    void (async () => {
      try {
        const actual = (server.address() as AddressInfo).port;
        const r =
          req.url === "/__fake/state"
            ? new Response(JSON.stringify(state(), null, 2), { headers: { "content-type": "application/json" } })
            : await fake.handle(await toRequest(req, actual));
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
  });
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, "127.0.0.1", () => resolve({ server, port: (server.address() as AddressInfo).port }));
  });
}

export interface FakeServers {
  fakes: FakeProviders;
  /** The Worker's endpoint variables (CONTRACT.md) pointing at the fakes. */
  endpoints: Record<"CLOUDONE_ENDPOINT" | "CLOUDTWO_ENDPOINT" | "CLOUDTHREE_ENDPOINT" | "REPOHOST_ENDPOINT" | "WEBHOST_ENDPOINT", string>;
  close(): Promise<void>;
}

/**
 * Starts all five fakes: on ports base+1 … base+5, or on free ports when `base` is 0.
 */
export async function startFakeServers(base: number, fakes?: FakeProviders): Promise<FakeServers> {
  const f = fakes ?? (await createFakeProviders());
  const { one, two, three, gh, vc } = f;
  const at = (i: number) => (base === 0 ? 0 : base + i);
  const servers = await Promise.all([
    serveFake(at(1), one, () => Object.fromEntries([...one.secrets].map(([k, v]) => [k, { value: v.value, tags: v.tags }]))),
    serveFake(at(2), two, () => Object.fromEntries([...two.secrets].map(([k, v]) => [k, { value: v.value, deleted: v.deleted, tags: v.tags }]))),
    serveFake(at(3), three, () => Object.fromEntries([...three.secrets].map(([k, v]) => [k, { latest: v.versions[v.versions.length - 1], labels: v.labels }]))),
    serveFake(at(4), gh, () => gh.state()),
    serveFake(at(5), vc, () => Object.fromEntries([...vc.projects].map(([k, p]) => [k, p.envs.map((e) => ({ key: e.key, value: e.value, target: e.target }))]))),
  ]);
  const url = (i: number) => `http://127.0.0.1:${servers[i]?.port ?? 0}`;
  return {
    fakes: f,
    endpoints: {
      CLOUDONE_ENDPOINT: url(0),
      CLOUDTWO_ENDPOINT: url(1),
      CLOUDTHREE_ENDPOINT: url(2),
      REPOHOST_ENDPOINT: url(3),
      WEBHOST_ENDPOINT: url(4),
    },
    close: () =>
      Promise.all(
        servers.map(
          (s) =>
            new Promise<void>((resolve) => {
              s.server.closeAllConnections();
              s.server.close(() => resolve());
            }),
        ),
      ).then(() => undefined),
  };
}
