/**
 * The inventory columns of a pki_certs row (docs/pki-inventory.md), from the certificate's DER:
 * written with every new row, and by the backfill job (./backfill.ts) for rows stored before the
 * columns existed. SAN values are kept one per line: none of them can hold a line break (DNS
 * names, email addresses and URIs are IA5 strings without controls, RFC 5280 §4.2.1.6), so a
 * line break never splits one value, and a substring filter cannot match across two values
 * unless the substring itself holds one.
 */
import { inventoryFacts } from "../x509/inventory-facts";

export interface InventoryColumns {
  commonName: string;
  sans: string;
  notBefore: number;
}

export function inventoryColumns(der: Uint8Array<ArrayBuffer>): InventoryColumns {
  const f = inventoryFacts(der);
  return { commonName: f.commonName, sans: f.sans.join("\n"), notBefore: f.notBefore };
}

/** The SAN list of a stored `sans` column. */
export const sanList = (sans: string | null): string[] => (sans ? sans.split("\n") : []);
