import type { Db } from "../db/client";

export async function purgeKvMount(_db: Db, _mountId: string): Promise<void> {}
