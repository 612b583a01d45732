/** Connector pieces without the network: endpoint variables, sealed box, name rules, token cache. */
import { describe, expect, it } from "vitest";
import * as nacl from "tweetnacl";
import { serviceUrl } from "../../src/engines/sync/providers/cloudone-sm/client";
import { tokenUrl, vaultBase } from "../../src/engines/sync/providers/cloudtwo-kv/client";
import { apiBase as gcpBase, tokenEndpoint } from "../../src/engines/sync/providers/cloudthree-sm/client";
import { apiBase as ghBase } from "../../src/engines/sync/providers/repohost/client";
import { apiBase as vercelBase } from "../../src/engines/sync/providers/webhost-project/client";
import { checkSecretName } from "../../src/engines/sync/providers/repohost/connector";
import { openSealed, seal } from "../../src/engines/sync/providers/repohost/sealed-box";
import { cachedToken } from "../../src/engines/sync/connectors/http";

const env = (vars: Record<string, string>) => vars as unknown as Env;

describe("endpoint variables (docs/configuration.md)", () => {
  it("default to the providers' public endpoints", () => {
    const e = env({});
    expect(serviceUrl(e, "secretsmanager", "eu-west-1")).toBe("https://secretsmanager.eu-west-1.amazonaws.com/");
    expect(serviceUrl(e, "sts", "eu-west-1")).toBe("https://sts.eu-west-1.amazonaws.com/");
    expect(tokenUrl(e, "login.microsoftonline.com", "t1")).toBe("https://login.microsoftonline.com/t1/oauth2/v2.0/token");
    expect(vaultBase(e, "https://kv1.vault.azure.net/")).toBe("https://kv1.vault.azure.net");
    expect(gcpBase(e)).toBe("https://secretmanager.googleapis.com");
    expect(tokenEndpoint(e, "https://oauth2.googleapis.com/token")).toBe("https://oauth2.googleapis.com/token");
    expect(ghBase(e)).toBe("https://api.github.com");
    expect(vercelBase(e)).toBe("https://api.vercel.com");
  });
  it("replace them when set", () => {
    const e = env({
      CLOUDONE_ENDPOINT: "http://127.0.0.1:9001",
      CLOUDTWO_ENDPOINT: "http://127.0.0.1:9002",
      CLOUDTHREE_ENDPOINT: "http://127.0.0.1:9003/",
      REPOHOST_ENDPOINT: "http://127.0.0.1:9004",
      WEBHOST_ENDPOINT: "http://127.0.0.1:9005",
    });
    expect(serviceUrl(e, "sts", "eu-west-1")).toBe("http://127.0.0.1:9001/");
    expect(tokenUrl(e, "login.microsoftonline.com", "t1")).toBe("http://127.0.0.1:9002/t1/oauth2/v2.0/token");
    expect(vaultBase(e, "https://kv1.vault.azure.net")).toBe("http://127.0.0.1:9002");
    expect(gcpBase(e)).toBe("http://127.0.0.1:9003");
    expect(tokenEndpoint(e, "https://oauth2.googleapis.com/token")).toBe("http://127.0.0.1:9003/token");
    expect(ghBase(e)).toBe("http://127.0.0.1:9004");
    expect(vercelBase(e)).toBe("http://127.0.0.1:9005");
  });
});

describe("sealed box", () => {
  it("opens with the recipient's key only, and differs every time", () => {
    const r = nacl.box.keyPair();
    const msg = new TextEncoder().encode("hello");
    const a = seal(msg, r.publicKey);
    expect(a.length).toBe(32 + 16 + 5);
    expect(new TextDecoder().decode(openSealed(a, r.publicKey, r.secretKey) ?? new Uint8Array())).toBe("hello");
    expect(seal(msg, r.publicKey)).not.toEqual(a);
    const other = nacl.box.keyPair();
    expect(openSealed(a, other.publicKey, other.secretKey)).toBeNull();
  });
});

describe("repository-host names", () => {
  it("ok and error cases", () => {
    expect(checkSecretName("VAULT_KV_1_FOO")).toBeNull();
    expect(checkSecretName("1ABC")).toContain("digit");
    expect(checkSecretName("GITHUB_TOKEN")).toContain("GITHUB_");
    expect(checkSecretName("A-B")).toContain("letters");
  });
});

describe("token cache", () => {
  it("reuses a token until 5 minutes before expiry", async () => {
    let n = 0;
    const get = () => cachedToken("k-unit", async () => ({ token: `t${++n}`, expiresAt: 1_000_000 + 10 * 60_000 }), 1_000_000);
    expect(await get()).toBe("t1");
    expect(await get()).toBe("t1");
    expect(await cachedToken("k-unit", async () => ({ token: "t9", expiresAt: 0 }), 1_000_000 + 6 * 60_000)).toBe("t9");
  });
});
