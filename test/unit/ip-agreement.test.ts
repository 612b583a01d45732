/**
 * Every reader of IP text agrees on the shared table (test/helpers/ip-cases.ts): the auth
 * methods' CIDR bindings (token_bound_cidrs and AppRole's lists), the PKI's ip_sans and
 * allowed_ip_sans_cidr, ACME IP identifiers, the sync outbound-host safeguard and the
 * development loopback rule for outbound URLs. Each is driven through its own public function,
 * so a caller that kept a parser of its own would show here.
 */
import { describe, expect, it } from "vitest";
import { ipInCidrs, parseCidrs } from "../../src/core/cidr";
import { ApiError } from "../../src/core/errors";
import { describeIpKind } from "../../src/core/ip";
import { checkOutboundUrl as checkCoreOutboundUrl } from "../../src/core/outbound-url";
import { isIpIdentifier } from "../../src/engines/pki/acme/validate-net";
import { applyRole, type NameRequest } from "../../src/engines/pki/policy/policy";
import { buildRole, defaultRole, roleToFields } from "../../src/engines/pki/policy/roles";
import { checkOutboundUrl as checkSyncUrl } from "../../src/engines/sync/hosts";
import { CIDR_MATCH_CASES, IP_CASES } from "../helpers/ip-cases";

const bits = (canonical: string): number => (canonical.includes(":") ? 128 : 32);
const urlHost = (canonical: string): string => (canonical.includes(":") ? `[${canonical}]` : canonical);

function errorOf(f: () => unknown): string | null {
  try {
    f();
  } catch (e) {
    if (e instanceof ApiError) return `${e.status} ${e.messages.join("; ")}`;
    throw e;
  }
  return null;
}

function request(ipSans: string[]): NameRequest {
  return { common_name: "", alt_names: [], ip_sans: ipSans, uri_sans: [], other_sans: [], serial_number: "", user_ids: [], exclude_cn_from_sans: false };
}

function pkiRole(cidrs: string[]) {
  return { ...defaultRole(), require_cn: false, allow_ip_sans: true, allowed_ip_sans_cidr: cidrs };
}

function pkiRoleCidrs(list: string[]): string[] {
  return buildRole({ ...roleToFields(defaultRole()), allowed_ip_sans_cidr: list }).role.allowed_ip_sans_cidr;
}

describe.each(IP_CASES.map((c) => [c.text, c] as const))("%j", (_, c) => {
  if (c.canonical === null) {
    it("is refused by every caller", () => {
      // List entries are trimmed and blank ones dropped by every list reader (core/fields.ts for
      // the PKI's, parseCidrs for the auth methods'), so only the address reader sees white space.
      if (c.text.trim() === c.text && c.text !== "") {
        expect(errorOf(() => parseCidrs("token_bound_cidrs", [c.text]))).toMatch(/^400 token_bound_cidrs: invalid CIDR block/);
        expect(ipInCidrs(c.text, ["0.0.0.0/0", "::/0"])).toBe(false);
      }
      expect(errorOf(() => applyRole(pkiRole([]), request([c.text]), null))).toMatch(/^400 .*not a valid IP address/);
      expect(errorOf(() => pkiRoleCidrs([`${c.text}/32`]))).toMatch(/^400 .*allowed_ip_sans_cidr/);
      expect(isIpIdentifier(c.text)).toBe(false);
    });
    return;
  }
  const canonical = c.canonical;
  const block = `${canonical}/${bits(canonical)}`;

  it(`reads as ${canonical} everywhere`, () => {
    expect(parseCidrs("token_bound_cidrs", [c.text])).toEqual([block]);
    expect(ipInCidrs(c.text, [block])).toBe(true);
    expect(pkiRoleCidrs([`${c.text}/${bits(canonical)}`])).toEqual([block]);
    // The PKI names the address it refuses in its canonical form.
    expect(errorOf(() => applyRole(pkiRole(["203.0.113.254/32", "2001:db8:ffff::/48"]), request([c.text]), null))).toBe(`400 the IP address "${canonical}" is not allowed in this role`);
    expect(errorOf(() => applyRole(pkiRole([block]), request([c.text]), null))).toBeNull();
    expect(isIpIdentifier(c.text)).toBe(true);
  });

  it(`is ${c.kind ?? "a global address"} to the outbound safeguards`, () => {
    const sync = checkSyncUrl(`https://${urlHost(canonical)}/`, { field: "key_vault_uri", allowedHosts: [".vault.azure.net"], endpointOverride: false });
    expect(sync).toBe(c.kind ? `key_vault_uri: ${describeIpKind(c.kind)} addresses are not allowed` : "key_vault_uri: an IP address is not allowed; use the provider's host name");
    const devHttp = errorOf(() => checkCoreOutboundUrl({ ENVIRONMENT: "development" } as unknown as Env, "jwks_url", `http://${urlHost(canonical)}/keys`, "AUTH_ALLOW_HTTP"));
    expect(devHttp === null).toBe(c.kind === "loopback");
  });
});

describe("CIDR matching is the same for token bindings and PKI SAN policy", () => {
  it.each(CIDR_MATCH_CASES)("%s in %s: %s", (ip, block, inside) => {
    expect(ipInCidrs(ip, [block])).toBe(inside);
    const pki = errorOf(() => applyRole(pkiRole([block]), request([ip]), null));
    expect(pki === null).toBe(inside);
  });
});
