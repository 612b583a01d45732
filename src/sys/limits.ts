/** Default and maximum lease TTL of every mount and token unless tuned (CONTRACT.md: 768h). */
export const SYSTEM_MAX_TTL = 768 * 3600;
