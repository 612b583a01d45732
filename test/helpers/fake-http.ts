/**
 * The five fake providers (test/helpers/fake-*.ts) served over real HTTP from Node, for manual
 * runs (./fake-serve.ts) and the sync benchmark (scripts/bench-sync.mjs). Each fake gets its own
 * port; `GET /__fake/state` on a port shows what that fake holds (values included: these are
 * fakes). The fakes know the credentials of ./sync-bodies.ts, so the bodies there work as-is.
 * The five provider fakes also take control calls (docs/secrets-sync.md "What Lanyard guarantees at the destination", for walk-throughs and e2e tests):
 * `POST /__fake/edit` and `POST /__fake/delete` change a secret out of band (JSON body: `name`,
 * `value`, and `where` "<owner>/<repo>[/<environment>]" for the repository host; delete with
 * `force`/`purge` to skip AWS's recovery window / Key Vault's soft delete), `POST /__fake/throttle`
 * sets the fake's limits ({"per_second"?, "concurrency"?, "retry_after"?: seconds,
 * "throttle_next"?: n}, see ./fake-limits.ts) and `GET /__fake/throttle` shows what it recorded.
 * The three cloud fakes take `POST /__fake/trust`, the cloud-side setup of a keyless destination
 * (docs/secrets-sync.md "Keyless destinations"): `issuer`, `audience`, `subject`, and per cloud
 * `role_arn` (an IAM OIDC provider and a role trusting it), `tenant_id`/`client_id` (a federated
 * credential on the app registration), or `provider` and `service_account` (a workload identity
 * pool provider, and the principal allowed to impersonate the service account, or to use Secret
 * Manager directly when none is named).
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { parsePem } from "../../src/engines/sync/rsa";
import { FakeCloudone } from "./fake-cloudone";
import { FakeCloudthree } from "./fake-cloudthree";
import { FakeCloudtwo } from "./fake-cloudtwo";
import { FakeRepohost } from "./fake-repohost";
import type { FakeThrottle } from "./fake-limits";
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

/** Out-of-band changes and limits of one provider fake, driven over HTTP (`/__fake/...`). */
export interface FakeControl {
  edit(b: Record<string, unknown>): void;
  delete(b: Record<string, unknown>): void;
  throttle: FakeThrottle;
  /** The cloud's trust of an OIDC issuer (the three cloud fakes). */
  trust?(b: Record<string, unknown>): void;
}

const text = (b: Record<string, unknown>, k: string): string => {
  const v = b[k];
  if (typeof v !== "string") throw new Error(`${k} is required`);
  return v;
};

/** Answers a `/__fake/...` control call; null when the path is not one. */
async function controlCall(control: FakeControl, req: Request): Promise<Response | null> {
  const path = new URL(req.url).pathname;
  const ok = (body: unknown) => new Response(JSON.stringify(body), { headers: { "content-type": "application/json" } });
  if (path === "/__fake/throttle" && req.method === "GET") {
    const t = control.throttle;
    return ok({ requests: t.requests, maxInFlight: t.maxInFlight, overLimit: t.overLimit, windows: t.windows, insideWindow: t.insideWindow });
  }
  if (req.method !== "POST" || !["/__fake/edit", "/__fake/delete", "/__fake/throttle", "/__fake/trust"].includes(path)) return null;
  try {
    const b = (await req.json()) as Record<string, unknown>;
    if (path === "/__fake/trust") {
      if (!control.trust) throw new Error("this fake has no token service");
      control.trust(b);
    } else if (path === "/__fake/edit") control.edit(b);
    else if (path === "/__fake/delete") control.delete(b);
    else {
      const perSecond = typeof b.per_second === "number" ? b.per_second : undefined;
      control.throttle.configure({
        rules: perSecond === undefined ? [] : [{ perWindow: perSecond, windowMs: 1000 }],
        concurrency: typeof b.concurrency === "number" ? b.concurrency : undefined,
        retryAfterSeconds: typeof b.retry_after === "number" ? b.retry_after : 1,
      });
      if (typeof b.throttle_next === "number") control.throttle.throttleNext(b.throttle_next);
    }
    return ok({ ok: true });
  } catch (e) {
    return new Response(JSON.stringify({ error: e instanceof Error ? e.message : String(e) }), { status: 400, headers: { "content-type": "application/json" } });
  }
}

/** Serves one fake on 127.0.0.1:`port` (0 picks a free port); resolves once it listens. */
export function serveFake(port: number, fake: FakeProvider, state: () => unknown, control?: FakeControl): Promise<{ server: Server; port: number }> {
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    void (async () => {
      try {
        const actual = (server.address() as AddressInfo).port;
        const request = req.url === "/__fake/state" ? null : await toRequest(req, actual);
        const controlled = request && control && request.url.includes("/__fake/") ? await controlCall(control, request) : null;
        const r =
          request === null
            ? new Response(JSON.stringify(state(), null, 2), { headers: { "content-type": "application/json" } })
            : (controlled ?? (await fake.handle(request)));
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
  /** The Worker's endpoint variables (docs/configuration.md) pointing at the fakes. */
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
  const project = (b: Record<string, unknown>) => (typeof b.project === "string" ? b.project : BODIES["webhost-project"].project_id);
  const gcpProject = (b: Record<string, unknown>) => (typeof b.project === "string" ? b.project : "lanyard-test-project");
  const servers = await Promise.all([
    serveFake(at(1), one, () => Object.fromEntries([...one.secrets].map(([k, v]) => [k, { value: v.value, tags: v.tags, ...(v.deletedDate !== undefined ? { scheduled_for_deletion: true } : {}) }])), {
      edit: (b) => one.editOutOfBand(text(b, "name"), text(b, "value")),
      delete: (b) => one.deleteOutOfBand(text(b, "name"), { force: b.force === true }),
      throttle: one.throttle,
      trust: (b) => {
        one.oidcProviders.set(text(b, "issuer"), [...(one.oidcProviders.get(text(b, "issuer")) ?? []), text(b, "audience")]);
        one.roles.set(text(b, "role_arn"), { trusted: [], webIdentity: { issuer: text(b, "issuer"), sub: text(b, "subject") } });
      },
    }),
    serveFake(at(2), two, () => Object.fromEntries([...two.secrets].map(([k, v]) => [k, { value: v.value, deleted: v.deleted, tags: v.tags }])), {
      edit: (b) => two.editOutOfBand(text(b, "name"), text(b, "value")),
      delete: (b) => two.deleteOutOfBand(text(b, "name"), { purge: b.purge === true }),
      throttle: two.throttle,
      trust: (b) =>
        two.addFederatedCredential(typeof b.tenant_id === "string" ? b.tenant_id : BODIES["cloudtwo-kv"].tenant_id, typeof b.client_id === "string" ? b.client_id : BODIES["cloudtwo-kv"].client_id, {
          issuer: text(b, "issuer"),
          subject: text(b, "subject"),
          audience: text(b, "audience"),
        }),
    }),
    serveFake(at(3), three, () => Object.fromEntries([...three.secrets].map(([k, v]) => [k, { latest: v.versions[v.versions.length - 1], labels: v.labels }])), {
      edit: (b) => three.editOutOfBand(gcpProject(b), text(b, "name"), text(b, "value")),
      delete: (b) => three.deleteOutOfBand(gcpProject(b), text(b, "name")),
      throttle: three.throttle,
      trust: (b) => {
        const provider = text(b, "provider");
        three.providers.set(provider, { issuer: text(b, "issuer"), allowedAudiences: [text(b, "audience")] });
        const principal = `principal://${provider.replace(/^\/\//, "").replace(/\/providers\/[^/]+$/, "")}/subject/${text(b, "subject")}`;
        const sa = b.service_account;
        if (typeof sa === "string") three.impersonators.set(sa, [...(three.impersonators.get(sa) ?? []), principal]);
        else three.directPrincipals.add(principal);
      },
    }),
    serveFake(at(4), gh, () => gh.state(), {
      // An edit is stamped a second later than now, so it differs from a write made this second.
      edit: (b) => gh.editOutOfBand(text(b, "where"), text(b, "name"), text(b, "value"), Date.now() + 1000),
      delete: (b) => gh.deleteOutOfBand(text(b, "where"), text(b, "name")),
      throttle: gh.throttle,
    }),
    serveFake(at(5), vc, () => Object.fromEntries([...vc.projects].map(([k, p]) => [k, p.envs.map((e) => ({ key: e.key, value: e.value, target: e.target }))])), {
      edit: (b) => vc.editOutOfBand(project(b), text(b, "name"), text(b, "value")),
      delete: (b) => vc.deleteOutOfBand(project(b), text(b, "name")),
      throttle: vc.throttle,
    }),
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
