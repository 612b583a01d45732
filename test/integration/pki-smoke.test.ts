import { describe, expect, it } from "vitest";
import { read, write } from "../helpers/api";
import { expectSignedBy, parseCert, pkiWithRoot, sans } from "../helpers/pki";

describe("pki smoke", () => {
  it("generates a root and issues a leaf", async () => {
    const { path, root } = await pkiWithRoot();
    await write(`${path}/roles/web`, { allowed_domains: ["example.com"], allow_subdomains: true, key_type: "ec", key_bits: 256 });
    const r = await write(`${path}/issue/web`, { common_name: "a.example.com", alt_names: "b.example.com", ttl: "1h" });
    const leaf = r.body.data.certificate as string;
    await expectSignedBy(leaf, root);
    expect(sans(parseCert(leaf))).toEqual(["dns:a.example.com", "dns:b.example.com"]);
    const c = await read(`${path}/cert/${r.body.data.serial_number}`, { token: null });
    expect(c.body.data.certificate).toBe(leaf);
  });
});
