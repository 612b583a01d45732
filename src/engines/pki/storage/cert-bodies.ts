/**
 * Certificate bodies in R2 (docs/architecture.md "Certificate bodies"): the DER of each issued
 * certificate as one object of the CERTS bucket under `<mount id>/<serial>`, beside a slim
 * pki_certs row in D1 whose `der` is '' (empty text, the column's default since migration 0019
 * rebuilt the table; it was NOT NULL before). Rows stored before bodies moved (and the few rows still written
 * with their body: CA certificates committed with their issuer, certificates stored at
 * revocation) keep base64 DER in `der`; a reader takes the row's body when it has one, else R2.
 *
 * Invariants:
 * - **A row never answers without its body.** Issuance writes the body and the row concurrently
 *   and answers only once both are durable (../issuance/cert-commit.ts storeLeafCertificate). If
 *   the put fails after the row committed, the body goes into the row instead (the layout before
 *   R2); only if that write fails too does a row stay without a body, and the issue then fails.
 *   Between the row's commit and the put's end a reader may find the row but no body: it treats
 *   the certificate as not stored yet (bodyOf answers null), which is what it was.
 *   One case is left: a D1 batch that reports an error but did commit (an ambiguous failure). The
 *   issue then fails and deletes the body, so a row without a body stays; nobody was given that
 *   certificate, reads treat it as not stored, and tidy removes it (at expiry, or at once with
 *   tidy_invalid_certs, which counts a row without a body as invalid).
 * - **An orphan body is harmless.** A body whose row never committed (the batch failed, the
 *   mount is being disabled) is deleted by the issue that wrote it; one left over (that delete
 *   failed too) is never read, because every read starts from a row.
 * - **Rows and bodies leave together.** Tidy deletes the bodies of the rows it deleted
 *   (tidy-store.ts deleteBySerial); disabling a mount deletes every object under its prefix
 *   before its rows (../purge.ts), at most DELETE_KEYS keys per R2 call.
 * - **Serials are unique per mount** (the Authority reserves them, the D1 unique index guards
 *   them), so a put never overwrites another certificate's body.
 */
import { bytesToBase64 } from "../../../core/encoding";

/** R2 deletes at most 1000 keys per call (https://developers.cloudflare.com/r2/api/workers/workers-api-reference/#bucket-method-definitions). */
export const DELETE_KEYS = 1000;

/** The object key of a certificate's body. Mount ids are UUIDs, serials colon hex: no escaping needed. */
export const bodyKey = (mountId: string, serial: string): string => `${mountId}/${serial}`;

/** Stores a certificate's DER (raw bytes: a third smaller than the base64 the D1 column held). */
export async function putBody(bucket: R2Bucket, mountId: string, serial: string, der: Uint8Array): Promise<void> {
  await bucket.put(bodyKey(mountId, serial), der, { httpMetadata: { contentType: "application/pkix-cert" } });
}

/** A stored row's body as base64 DER: the row's own when it has one, else its R2 object; null when neither exists. */
export async function bodyOf(bucket: R2Bucket, row: { mountId: string; serial: string; der: string }): Promise<string | null> {
  if (row.der !== "") return row.der;
  const obj = await bucket.get(bodyKey(row.mountId, row.serial));
  return obj ? bytesToBase64(new Uint8Array(await obj.arrayBuffer())) : null;
}

/** The bodies of several rows of one mount (R2 reads concurrently, for the rows without one in D1). */
export async function bodiesOf<T extends { serial: string; der: string }>(bucket: R2Bucket, mountId: string, rows: T[]): Promise<(string | null)[]> {
  return Promise.all(rows.map((r) => bodyOf(bucket, { mountId, serial: r.serial, der: r.der })));
}

/** Deletes the bodies of the given serials (missing keys are no error), DELETE_KEYS per call. */
export async function deleteBodies(bucket: R2Bucket, mountId: string, serials: string[]): Promise<void> {
  for (let i = 0; i < serials.length; i += DELETE_KEYS) {
    await bucket.delete(serials.slice(i, i + DELETE_KEYS).map((s) => bodyKey(mountId, s)));
  }
}

/**
 * Deletes every body of a mount: a listing of its prefix, page by page (1000 keys), each page
 * deleted in one call. Idempotent: a disable that failed part-way deletes the rest when repeated.
 * Returns how many objects were deleted.
 */
export async function purgeBodies(bucket: R2Bucket, mountId: string): Promise<number> {
  const prefix = `${mountId}/`;
  let deleted = 0;
  for (;;) {
    // Always from the start: the previous page is gone, so the next listing begins after it.
    const page = await bucket.list({ prefix, limit: DELETE_KEYS });
    const keys = page.objects.map((o) => o.key);
    if (keys.length === 0) return deleted;
    await bucket.delete(keys);
    deleted += keys.length;
    if (!page.truncated) return deleted;
  }
}
