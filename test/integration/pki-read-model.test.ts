/**
 * The issue/sign hot path reads its issuance state from the isolate's PKI read model
 * (loadIssuanceState, src/engines/pki/storage/store.ts; docs/architecture.md "Caches"). These
 * cases check that a mount deeper than one segment is found, and that the isolate that changes a
 * role, removes a mount or makes a new one sees the change on its next request.
 */
import { describe, expect, it } from "vitest";
import { del, write } from "../helpers/api";
import { expectSignedBy, parseCert } from "../helpers/pki";

async function rootAt(path: string, cn: string): Promise<string> {
  await write(`sys/mounts/${path}`, { type: "pki" }, {}, 204);
  return (await write(`${path}/root/generate/internal`, { common_name: cn, key_type: "ec", ttl: "700h" })).body.data.certificate;
}

describe("the PKI read model in the writing isolate", () => {
  it("a mount whose path has two segments is found", async () => {
    const id = crypto.randomUUID().slice(0, 8);
    const real = await rootAt(`team-${id}/pki`, "Real");
    await write(`team-${id}/pki/roles/web`, { allow_any_name: true, key_type: "ec", ttl: "1h", organization: "Real" });
    const r = await write(`team-${id}/pki/issue/web`, { common_name: "a.example" });
    await expectSignedBy(r.body.data.certificate, real);
    expect(parseCert(r.body.data.certificate).subject).toContain("O=Real");
    expect((await write(`team-${id}/pki/issue/nope`, { common_name: "a.example" }, {}, 400)).body.errors[0]).toContain("unknown role");
  });

  it("role and issuer changes show on the next request (the write invalidates)", async () => {
    const path = `pf-${crypto.randomUUID().slice(0, 8)}`;
    const first = await rootAt(path, "First");
    await write(`${path}/roles/web`, { allow_any_name: true, key_type: "ec", ttl: "1h", organization: "One" });
    expect(parseCert((await write(`${path}/issue/web`, { common_name: "a.example" })).body.data.certificate).subject).toContain("O=One");
    await write(`${path}/roles/web`, { allow_any_name: true, key_type: "ec", ttl: "1h", organization: "Two" });
    expect(parseCert((await write(`${path}/issue/web`, { common_name: "a.example" })).body.data.certificate).subject).toContain("O=Two");

    // The mount is removed and made again at the same path: the new one's role and root are used.
    await del(`sys/mounts/${path}`);
    const second = await rootAt(path, "Second");
    expect((await write(`${path}/issue/web`, { common_name: "a.example" }, {}, 400)).body.errors[0]).toContain("unknown role");
    await write(`${path}/roles/web`, { allow_any_name: true, key_type: "ec", ttl: "1h" });
    const r = await write(`${path}/issue/web`, { common_name: "a.example" });
    await expectSignedBy(r.body.data.certificate, second);
    expect(second).not.toBe(first);
  });

  it("a role field in the body does not replace the role in the path", async () => {
    const path = `pf-${crypto.randomUUID().slice(0, 8)}`;
    await rootAt(path, "Root");
    await write(`${path}/roles/web`, { allow_any_name: true, key_type: "ec", ttl: "1h", organization: "Web" });
    await write(`${path}/roles/other`, { allow_any_name: true, key_type: "ec", ttl: "1h", organization: "Other" });
    const r = await write(`${path}/issue/web`, { common_name: "a.example", role: "other" });
    expect(parseCert(r.body.data.certificate).subject).toContain("O=Web");
  });
});
