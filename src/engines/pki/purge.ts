/** Removing a PKI mount: its D1 rows (certificates, revocations, ACME, notifications) and its Authority's state. */
import type { Db } from "../../core/db/client";
import type { MountRow } from "../../core/mount-store";
import { authorityOf } from "./issuance/serials";
import { purgeAcmeStmts } from "./storage/acme-store";
import { purgeNotifyStmts } from "./storage/notify-store";
import { purgeRevocationStmts } from "./storage/revocation-store";
import { purgePkiRows, runBatch } from "./storage/store";

export async function purgePkiMount(db: Db, env: Env, mount: MountRow): Promise<void> {
  await purgePkiRows(db, mount.id);
  await runBatch(db, purgeRevocationStmts(db, mount.id));
  await runBatch(db, purgeAcmeStmts(db, mount.id));
  await runBatch(db, purgeNotifyStmts(db, mount.id));
  await authorityOf(env, mount).purge();
}
