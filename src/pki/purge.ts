/** Removing a PKI mount: its D1 rows and its Authority's state. */
import type { Db } from "../db/client";
import type { MountRow } from "../sys/mount-store";
import { authorityOf } from "./serials";
import { purgeRevocationStmts } from "./revocation-store";
import { purgePkiRows, runBatch } from "./store";

export async function purgePkiMount(db: Db, env: Env, mount: MountRow): Promise<void> {
  await purgePkiRows(db, mount.id);
  await runBatch(db, purgeRevocationStmts(db, mount.id));
  await authorityOf(env, mount).purge();
}
