/**
 * Login token lifetimes and policies (src/auth/methods/login.ts): Vault's CalculateTTL — the
 * role's token_ttl else the mount's default, capped by token_max_ttl, the mount's maximum and
 * the explicit max; periodic tokens live one period, bounded only by the explicit max.
 */
import { describe, expect, it } from "vitest";
import { loginLifetime, loginPolicies } from "../../src/auth/methods/login";
import { DEFAULT_TOKEN_PARAMS, type TokenParams } from "../../src/auth/methods/token-params";
import type { MountRow } from "../../src/core/mount-store";

const NOW = 1_700_000_000_000;
const mount = (defaultLeaseTtl = 0, maxLeaseTtl = 0): MountRow => ({
  id: "m",
  namespaceId: "root",
  path: "auth/approle/",
  type: "approle",
  accessor: "auth_approle_00000000",
  description: "",
  options: {},
  defaultLeaseTtl,
  maxLeaseTtl,
  createdAt: 0,
  state: "active",
});
const params = (p: Partial<TokenParams>): TokenParams => ({ ...DEFAULT_TOKEN_PARAMS, ...p });

describe("loginLifetime", () => {
  it("defaults to the mount's TTLs, and to the system's 768h when the mount has none", () => {
    expect(loginLifetime(NOW, params({}), mount())).toMatchObject({ ttl: 2764800, maxExpireTime: NOW + 2764800_000 });
    expect(loginLifetime(NOW, params({}), mount(600, 1200))).toMatchObject({ ttl: 600, expireTime: NOW + 600_000, maxExpireTime: NOW + 1200_000 });
  });

  it("the role's token_ttl and token_max_ttl apply inside the mount's maximum", () => {
    expect(loginLifetime(NOW, params({ ttl: 300, maxTtl: 900 }), mount(600, 1200))).toMatchObject({ ttl: 300, maxExpireTime: NOW + 900_000 });
    // token_max_ttl above the mount's maximum is truncated to it.
    expect(loginLifetime(NOW, params({ maxTtl: 5000 }), mount(600, 1200))).toMatchObject({ maxExpireTime: NOW + 1200_000 });
    const capped = loginLifetime(NOW, params({ ttl: 5000 }), mount(600, 1200));
    expect(capped.ttl).toBe(1200);
    expect(capped.warnings[0]).toContain("capped");
  });

  it("the explicit max caps everything, renewals included", () => {
    expect(loginLifetime(NOW, params({ ttl: 3600, explicitMaxTtl: 60 }), mount())).toMatchObject({ ttl: 60, maxExpireTime: NOW + 60_000 });
  });

  it("a periodic token lives one period with no maximum but the explicit one", () => {
    expect(loginLifetime(NOW, params({ period: 900, maxTtl: 60 }), mount(10, 20))).toMatchObject({ ttl: 900, maxExpireTime: null });
    expect(loginLifetime(NOW, params({ period: 900, explicitMaxTtl: 100 }), mount())).toMatchObject({ ttl: 100, maxExpireTime: NOW + 100_000 });
  });
});

describe("loginPolicies", () => {
  it("adds default unless refused, and sorts", () => {
    expect(loginPolicies(params({ policies: ["web", "app"] }))).toEqual(["app", "default", "web"]);
    expect(loginPolicies(params({ policies: ["web"], noDefaultPolicy: true }))).toEqual(["web"]);
  });

  it("never gives root: a role holding it is refused with Vault's 400", () => {
    for (const policies of [["root"], ["web", "root"], [" Root "]]) {
      expect(() => loginPolicies(params({ policies }))).toThrow("auth methods cannot create root tokens");
      expect(() => loginPolicies(params({ policies, noDefaultPolicy: true }))).toThrow("auth methods cannot create root tokens");
    }
  });
});
