/** Removing a PKI mount: its D1 rows and its Authority's state. */
import type { Db } from "../db/client";
import type { MountRow } from "../sys/mount-store";
import { authorityOf } from "./serials";
import { purgePkiRows } from "./store";

export async function purgePkiMount(db: Db, env: Env, mount: MountRow): Promise<void> {
  await purgePkiRows(db, mount.id);
  await authorityOf(env, mount).purge();
}
