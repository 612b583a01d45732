import { describe, expect, it } from "vitest";
import { checkOutboundUrl, hostAllowed } from "../../src/engines/sync/hosts";

const rule = { field: "key_vault_uri", allowedHosts: [".vault.azure.net"], endpointOverride: false };
const check = (url: string, override = false) => checkOutboundUrl(url, { ...rule, endpointOverride: override });

describe("outbound host safeguard", () => {
  it("accepts the provider's hosts over https", () => {
    expect(check("https://kv1.vault.azure.net")).toBeNull();
    expect(check("https://kv1.vault.azure.net/")).toBeNull();
    expect(check("https://KV1.Vault.Azure.Net/")).toBeNull();
  });

  it("refuses other hosts, look-alikes and the bare suffix", () => {
    expect(check("https://evil.example.com/")).toMatch(/not one of the provider's hosts/);
    expect(check("https://kv1.vault.azure.net.evil.com/")).toMatch(/not one of the provider's hosts/);
    expect(check("https://kv1vault.azure.net/")).toMatch(/not one of the provider's hosts/);
    expect(check("https://vault.azure.net/")).toMatch(/not one of the provider's hosts/);
  });

  it("refuses plain http, other ports, credentials, queries and junk", () => {
    expect(check("http://kv1.vault.azure.net/")).toMatch(/scheme must be https/);
    expect(check("https://kv1.vault.azure.net:8443/")).toMatch(/default https port/);
    expect(check("https://user:pw@kv1.vault.azure.net/")).toMatch(/credentials in the URL/);
    expect(check("https://user:pw@kv1.vault.azure.net/")).not.toContain("pw");
    expect(check("https://kv1.vault.azure.net/?x=1")).toMatch(/query or fragment/);
    expect(check("kv1.vault.azure.net")).toMatch(/not a valid absolute URL/);
    expect(check("file:///etc/passwd")).toMatch(/scheme must be https/);
  });

  it.each([
    ["https://127.0.0.1/", "loopback"],
    ["https://2130706433/", "loopback"], // decimal form, normalised by the URL parser
    ["https://0x7f.1/", "loopback"],
    ["https://10.1.2.3/", "private"],
    ["https://172.16.0.1/", "private"],
    ["https://172.31.255.255/", "private"],
    ["https://192.168.1.1/", "private"],
    ["https://169.254.169.254/", "link-local"],
    ["https://100.64.0.1/", "shared"],
    ["https://0.0.0.0/", "unspecified"],
    ["https://[::1]/", "loopback"],
    ["https://[::]/", "unspecified"],
    ["https://[fe80::1]/", "link-local"],
    ["https://[fd00::1]/", "private"],
    ["https://[::ffff:127.0.0.1]/", "loopback"],
    ["https://[::ffff:169.254.169.254]/", "link-local"],
  ])("refuses the special-purpose literal %s", (url, kind) => {
    expect(check(url)).toMatch(new RegExp(`${kind}.* addresses are not allowed`));
  });

  it("refuses public IP literals too: only the provider's names are allowed", () => {
    expect(check("https://8.8.8.8/")).toMatch(/an IP address is not allowed/);
    expect(check("https://[2606:4700::1111]/")).toMatch(/an IP address is not allowed/);
  });

  it("with the operator's endpoint variable set, any http(s) URL is accepted (the host is replaced anyway)", () => {
    expect(check("https://127.0.0.1:8443/", true)).toBeNull();
    expect(check("http://localhost:9999", true)).toBeNull();
    expect(check("ftp://kv1.vault.azure.net/", true)).toMatch(/scheme/);
    expect(check("not a url", true)).toMatch(/not a valid absolute URL/);
  });
});

describe("host helpers", () => {
  // Address parsing and classification: src/core/ip.ts, test/unit/ip.test.ts and ip-agreement.test.ts.
  it("matches exact hosts and suffixes on a label boundary", () => {
    expect(hostAllowed("oauth2.googleapis.com", ["oauth2.googleapis.com"])).toBe(true);
    expect(hostAllowed("oauth2.googleapis.com.", ["oauth2.googleapis.com"])).toBe(true);
    expect(hostAllowed("xoauth2.googleapis.com", ["oauth2.googleapis.com"])).toBe(false);
    expect(hostAllowed("a.vault.azure.cn", [".vault.azure.cn"])).toBe(true);
  });
});
