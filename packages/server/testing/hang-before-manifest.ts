/**
 * Test-only preload (`node --import tsx --import <this> …`): the backup's last step, renaming its
 * manifest into place, never finishes and says so on stderr, so a test can SIGKILL the server in the
 * middle of a backup at a known point (backup/backup.test.ts), not by timing.
 */
import fs from "node:fs";
import { syncBuiltinESMExports } from "node:module";

const rename = fs.promises.rename;
fs.promises.rename = async (from, to) => {
  if (String(to).endsWith("manifest.json")) {
    process.stderr.write("test preload: backup hangs before its manifest\n");
    return new Promise<void>(() => {});
  }
  return rename(from, to);
};
syncBuiltinESMExports();
