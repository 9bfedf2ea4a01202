/** The Skulk version this program speaks; peers of another version are refused (see cluster/peers). */
export const VERSION = "0.1.0";
/** The upstream control-API contract this build is wire-compatible with. */
export const UPSTREAM_API_VERSION = "1.3.0";
