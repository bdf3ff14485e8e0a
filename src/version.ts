/** This release of Coffer, as `/healthz`, the API reference and backups name it; equal to package.json's. */
export const VERSION = '0.2.0'
