/**
 * Types of the PKI tables' JSON columns, for modules outside storage that build or read them
 * (../defaults.ts, the issuer routes). Only storage modules import the Drizzle schema
 * (test/unit/architecture.test.ts); this one imports nothing else, so anything in the engine
 * may import it without a cycle through ./store.ts.
 */
export type { IssuerAia } from "../../../core/db/schema/pki";
