import fs from 'node:fs'
import path from 'node:path'
import type { Config } from '../config.ts'
import { makeDataDirectory, writePrivateFile } from '../secrets/private-files.ts'
import { createToken, hashToken } from './tokens.ts'

export interface AdminKey {
  hash: string
  /** Where the generated key is kept; undefined when it comes from ADMIN_API_KEY. */
  file: string | undefined
}

export function adminKeyFile(config: Config): string {
  return path.join(config.dataDir, 'admin-key')
}

/**
 * The admin key from ADMIN_API_KEY, else the one generated on first start and kept in the data
 * directory with mode 0600. Several instances must share ADMIN_API_KEY.
 */
export function resolveAdminKey(config: Config): AdminKey {
  if (config.adminApiKey) return { hash: hashToken(config.adminApiKey), file: undefined }
  const file = adminKeyFile(config)
  makeDataDirectory(config.dataDir)
  try {
    writePrivateFile(file, `${createToken('admin')}\n`)
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error
  }
  return { hash: hashToken(readAdminKey(config)), file }
}

export function readAdminKey(config: Config): string {
  return config.adminApiKey ?? fs.readFileSync(adminKeyFile(config), 'utf8').trim()
}
