/** Credentials of the e2e Worker (throwaway: a fresh local state directory per run). */
export const E2E_ROOT_TOKEN = "e2e-root-token-0123456789";
// 32 fixed bytes, base64: tests only.
export const E2E_SEAL_KEY = "HyAhIiMkJSYnKCkqKywtLi8wMTIzNDU2Nzg5Ojs8PT4=";
