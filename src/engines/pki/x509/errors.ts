/**
 * The error of the x509 modules: input that is not a usable certificate, request or key. Its
 * message is written for the client (callers prefix the request field and answer 400); it never
 * carries key material.
 */
export class X509Error extends Error {}
