/**
 * A stored certificate's body as the storage holds it (docs/storage-schema.md "pki_certs"): the
 * row's base64 `der` when it has one (rows stored before bodies moved to R2), else the object
 * `<mount id>/<serial>` of the CERTS bucket. For tests that build rows of other tables from it.
 */
import { env } from "cloudflare:test";

/** Base64 DER of the stored certificate `serial`; throws when there is no row or no body. */
export async function storedBody(serial: string): Promise<{ mountId: string; der: string; inRow: boolean }> {
  const row = await env.DB.prepare("SELECT (SELECT id FROM pki_ids WHERE no = mount_no) AS mount_id, der FROM pki_certs WHERE serial = unhex(replace(?, ':', ''))").bind(serial).first<{ mount_id: string; der: string }>();
  if (!row) throw new Error(`no stored certificate ${serial}`);
  if (row.der !== "") return { mountId: row.mount_id, der: row.der, inRow: true };
  const obj = await env.CERTS.get(`${row.mount_id}/${serial}`);
  if (!obj) throw new Error(`stored certificate ${serial} has no body`);
  return { mountId: row.mount_id, der: btoa(String.fromCharCode(...new Uint8Array(await obj.arrayBuffer()))), inRow: false };
}
