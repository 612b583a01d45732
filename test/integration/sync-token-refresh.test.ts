/**
 * Provider tokens that stop working before their stated expiry (revoked, rotated, forgotten by
 * the provider): a 401 to a cached token drops it, fetches a fresh one and retries once, so the
 * sync succeeds instead of failing for good with CLIENT_SIDE_ERROR. A 401 to a fresh token is
 * still the caller's problem (the bad-credentials cases are in the per-connector tests).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { write } from "../helpers/api";
import { FakeCloudthree, CLOUDTHREE_HOSTS } from "../helpers/fake-cloudthree";
import { FakeCloudtwo, CLOUDTWO_HOSTS } from "../helpers/fake-cloudtwo";
import { FakeRepohost, REPOHOST_HOSTS } from "../helpers/fake-repohost";
import { installFakes } from "../helpers/fake-router";
import { BODIES, SECRETS, uid } from "../helpers/sync-bodies";
import { RSA_PKCS8_PEM } from "../helpers/sync-fixtures";
import { destPath, kvSecret, setAssoc, type SyncSetup } from "../helpers/sync-engine";
import { parsePem } from "../../src/engines/sync/rsa";

const azure = new FakeCloudtwo();
const gcp = new FakeCloudthree();
const gh = new FakeRepohost([SECRETS.ghToken]);
let uninstall: () => void;
beforeAll(async () => {
  azure.addClient(BODIES["cloudtwo-kv"].tenant_id, BODIES["cloudtwo-kv"].client_id, SECRETS.clientSecret);
  await gcp.addAccount("sync@lanyard-test-project.iam.gserviceaccount.com", parsePem(RSA_PKCS8_PEM).der);
  await gh.addApp(5151, parsePem(RSA_PKCS8_PEM).der);
  uninstall = installFakes([
    { hosts: CLOUDTWO_HOSTS, fake: azure },
    { hosts: CLOUDTHREE_HOSTS, fake: gcp },
    { hosts: REPOHOST_HOSTS, fake: gh },
  ]);
});
afterAll(() => uninstall());

async function statusOf(type: string, dest: string, s: SyncSetup): Promise<{ sync_status: string; last_error?: string }> {
  const r = await setAssoc(type, dest, s);
  return r.body.data.associated_secrets[`${s.accessor}/${s.secret}`];
}

describe("a cached provider token that became invalid", () => {
  it("cloudtwo-kv: dropped, a fresh one fetched, the call retried once → SYNCED", async () => {
    const dest = `az-${uid()}`;
    await write(destPath("cloudtwo-kv", dest), BODIES["cloudtwo-kv"]);
    const s = await kvSecret({ a: "1" });
    expect((await statusOf("cloudtwo-kv", dest, s)).sync_status).toBe("SYNCED");
    azure.revokeIssuedTokens();
    const before = azure.tokenRequests;
    const after = await statusOf("cloudtwo-kv", dest, s);
    expect(after.last_error).toBe("");
    expect(after.sync_status).toBe("SYNCED");
    expect(azure.tokenRequests - before).toBe(1);
  });

  it("cloudthree-sm: the same → SYNCED", async () => {
    const dest = `gcp-${uid()}`;
    await write(destPath("cloudthree-sm", dest), BODIES["cloudthree-sm"]);
    const s = await kvSecret({ b: "1" });
    expect((await statusOf("cloudthree-sm", dest, s)).sync_status).toBe("SYNCED");
    gcp.revokeIssuedTokens();
    const before = gcp.tokenRequests;
    const after = await statusOf("cloudthree-sm", dest, s);
    expect(after.last_error).toBe("");
    expect(after.sync_status).toBe("SYNCED");
    expect(gcp.tokenRequests - before).toBe(1);
  });

  it("repohost through an app: the installation token is renewed → SYNCED", async () => {
    await write("sys/sync/repohost-apps/refresh-app", { app_id: "5151", private_key: RSA_PKCS8_PEM });
    const dest = `gh-${uid()}`;
    await write(destPath("repohost", dest), {
      app_name: "refresh-app",
      installation_id: "9",
      repository_owner: "octo-org",
      repository_name: "hello-world",
      granularity: "secret-path",
    });
    const s = await kvSecret({ c: "1" });
    expect((await statusOf("repohost", dest, s)).sync_status).toBe("SYNCED");
    gh.revokeIssuedTokens();
    const before = gh.tokenRequests;
    const after = await statusOf("repohost", dest, s);
    expect(after.last_error).toBe("");
    expect(after.sync_status).toBe("SYNCED");
    expect(gh.tokenRequests - before).toBe(1);
  });
});
