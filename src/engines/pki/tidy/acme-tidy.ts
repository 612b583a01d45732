/**
 * What `tidy_acme` does with one ACME account and its orders (upstream
 * tidyAcmeAccountByThumbprint and acmeTidyOrder in path_tidy.go). Pure: the job
 * (tidy-job.ts) reads a page of accounts, asks here, and writes through
 * storage/acme-tidy-store.ts.
 *
 * - An order with a certificate goes once the certificate's notAfter + `safety_buffer` has
 *   passed; an order without one as soon as it expires (24 h, no buffer).
 * - An account whose orders are all gone, created more than `acme_account_safety_buffer` ago,
 *   and whose latest certificate expired more than that buffer ago: a valid one is revoked; a
 *   revoked or deactivated one, revoked (or deactivated) more than the buffer ago, is deleted.
 *
 * Upstream remembers an account's latest certificate expiry on the account record, so it still
 * counts after the order holding that certificate was tidied. Lanyard's account row has no such
 * column; instead the order holding the account's latest certificate is kept until that
 * certificate is older than the account buffer too, which gives the account the same verdicts.
 */
import type { AcmeTidyAccount, AcmeTidyOrder } from "../storage/acme-tidy-store";

export type AcmeAccountVerdict = "keep" | "revoke" | "delete";

/**
 * The orders of `account` to delete and what happens to the account. Times in Unix ms; the
 * buffers in seconds, as tidy's parameters hold them.
 */
export function acmeAccountVerdict(
  account: AcmeTidyAccount,
  orders: AcmeTidyOrder[],
  now: number,
  safetyBufferSec: number,
  accountBufferSec: number,
): { deleteOrders: string[]; account: AcmeAccountVerdict } {
  const safety = safetyBufferSec * 1000;
  const buffer = accountBufferSec * 1000;
  let latest: AcmeTidyOrder | null = null;
  for (const o of orders) if (o.certExpiresAt > 0 && (latest === null || o.certExpiresAt > latest.certExpiresAt)) latest = o;
  const latestCertExpiry = latest?.certExpiresAt ?? 0;
  const deleteOrders = orders
    .filter((o) => {
      if (o.certExpiresAt === 0) return now > o.expiresAt;
      if (now <= o.certExpiresAt + safety) return false;
      // The account's latest certificate still counts for the account buffer: keep its order until then.
      return o !== latest || now > latestCertExpiry + buffer;
    })
    .map((o) => o.id);
  const allTidied = deleteOrders.length === orders.length;
  let verdict: AcmeAccountVerdict = "keep";
  if (allTidied && now > account.createdAt + buffer && now > latestCertExpiry + buffer) {
    if ((account.status === "revoked" || account.status === "deactivated") && now > account.updatedAt + buffer) verdict = "delete";
    else if (account.status === "valid") verdict = "revoke";
  }
  return { deleteOrders, account: verdict };
}
