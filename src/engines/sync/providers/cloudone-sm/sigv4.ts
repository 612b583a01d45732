/**
 * AWS Signature Version 4 (AWS Secrets Manager API Reference "SigV4 in brief") on WebCrypto: canonical request,
 * string to sign, HMAC key chain. Used by the cloudone-sm connector for the secrets manager
 * (JSON 1.1) and STS (query protocol); exported for the test fake, which verifies with it.
 */
import { BoundedCache } from "../../../../core/bounded-cache";
import { bytesToHex, sha256Hex } from "../../../../core/encoding";

export interface AwsCredentials {
  accessKeyId: string;
  secretAccessKey: string;
  sessionToken?: string;
}

const enc = new TextEncoder();

async function hmac(key: Uint8Array<ArrayBuffer> | ArrayBuffer, data: string): Promise<ArrayBuffer> {
  const k = await crypto.subtle.importKey("raw", key, { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
  return crypto.subtle.sign("HMAC", k, enc.encode(data));
}

/**
 * Derived signing keys, per isolate: AWS's key chain depends only on the secret key, the day,
 * the region and the service, and AWS documents caching the result for the day. This memoises a
 * pure function (nothing read from storage, so nothing can go stale: not a read-cache.ts cache);
 * keyed by a digest of the secret key, never the key itself; at most 64 entries, the oldest
 * evicted first.
 */
const signingKeys = new BoundedCache<CryptoKey>("sync.sigv4SigningKeys", 64);

async function signingKey(secretAccessKey: string, day: string, region: string, service: string): Promise<CryptoKey> {
  const id = `${day}\u0000${region}\u0000${service}\u0000${await sha256Hex(secretAccessKey)}`;
  const hit = signingKeys.get(id);
  if (hit) return hit;
  let key = await hmac(new Uint8Array(enc.encode(`AWS4${secretAccessKey}`)), day);
  key = await hmac(key, region);
  key = await hmac(key, service);
  key = await hmac(key, "aws4_request");
  const k = await crypto.subtle.importKey("raw", key, { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
  signingKeys.set(id, k);
  return k;
}

/** "20240101T000000Z" */
export function amzDate(d: Date): string {
  return d.toISOString().replace(/[-:]/g, "").replace(/\.\d{3}/, "");
}

const encodeRfc3986 = (s: string): string => encodeURIComponent(s).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);

export interface SignInput {
  method: string;
  url: URL;
  /** Header names in any case; host is taken from the URL. */
  headers: Record<string, string>;
  body: string;
  region: string;
  service: string;
  amzDate: string;
}

/** The signature and signed-header list for a request (the pieces of the Authorization header). */
export async function signature(creds: Pick<AwsCredentials, "secretAccessKey">, i: SignInput, signedHeaderNames?: string[]): Promise<{ signature: string; signedHeaders: string; scope: string }> {
  const headers: Record<string, string> = { host: i.url.host };
  for (const [k, v] of Object.entries(i.headers)) headers[k.toLowerCase()] = v.trim().replace(/\s+/g, " ");
  const names = (signedHeaderNames ?? Object.keys(headers)).map((n) => n.toLowerCase()).sort();
  const canonicalHeaders = names.map((n) => `${n}:${headers[n] ?? ""}\n`).join("");
  const signedHeaders = names.join(";");
  const query = [...i.url.searchParams.entries()]
    .map(([k, v]) => [encodeRfc3986(k), encodeRfc3986(v)] as const)
    .sort(([a, av], [b, bv]) => (a === b ? (av < bv ? -1 : 1) : a < b ? -1 : 1))
    .map(([k, v]) => `${k}=${v}`)
    .join("&");
  const path = i.url.pathname === "" ? "/" : i.url.pathname;
  const canonical = [i.method, path, query, canonicalHeaders, signedHeaders, await sha256Hex(i.body)].join("\n");
  const day = i.amzDate.slice(0, 8);
  const scope = `${day}/${i.region}/${i.service}/aws4_request`;
  const toSign = ["AWS4-HMAC-SHA256", i.amzDate, scope, await sha256Hex(canonical)].join("\n");
  const key = await signingKey(creds.secretAccessKey, day, i.region, i.service);
  return { signature: bytesToHex(new Uint8Array(await crypto.subtle.sign("HMAC", key, enc.encode(toSign)))), signedHeaders, scope };
}

/** Headers of a signed request: the given ones plus X-Amz-Date, the token and Authorization. */
export async function signedHeaders(creds: AwsCredentials, req: Omit<SignInput, "amzDate">, now = new Date()): Promise<Record<string, string>> {
  const date = amzDate(now);
  const headers: Record<string, string> = { ...req.headers, "x-amz-date": date };
  if (creds.sessionToken) headers["x-amz-security-token"] = creds.sessionToken;
  const s = await signature(creds, { ...req, headers, amzDate: date });
  headers.authorization = `AWS4-HMAC-SHA256 Credential=${creds.accessKeyId}/${s.scope}, SignedHeaders=${s.signedHeaders}, Signature=${s.signature}`;
  return headers;
}
