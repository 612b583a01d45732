/** Removing a PKI mount: its certificate bodies in R2, its D1 rows (certificates, revocations, ACME, notifications) and its Authority's state. */
import type { Db } from "../../core/db/client";
import type { MountRow } from "../../core/mount-store";
import { authorityOf } from "./issuance/serials";
import { purgeAcmeStmts } from "./storage/acme-store";
import { purgeNotifyStmts } from "./storage/notify-store";
import { purgeRevocationStmts } from "./storage/revocation-store";
import { purgePkiRows, runBatch } from "./storage/store";
import { purgeBodies } from "./storage/cert-bodies";

export async function purgePkiMount(db: Db, env: Env, mount: MountRow): Promise<void> {
  // Bodies before rows (storage/cert-bodies.ts): a disable that stops between the two is repeated,
  // and no row of a mount still being removed is read.
  await purgeBodies(env.CERTS, mount.id);
  await purgePkiRows(db, mount.id);
  await runBatch(db, purgeRevocationStmts(db, mount.id));
  await runBatch(db, purgeAcmeStmts(db, mount.id));
  await runBatch(db, purgeNotifyStmts(db, mount.id));
  await authorityOf(env, mount).purge();
}
