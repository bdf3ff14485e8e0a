/** This release of Coffer, as `/healthz`, the API reference and backups name it; equal to package.json's (test/operations/upgrade.test.ts). */
export const VERSION = '0.2.0'
