// The npm registry this project installs from does not carry every platform binary of @biomejs/biome and
// @bufbuild/buf, so `npm install` leaves their lock entries out and `npm ci` then refuses the lock. This adds
// the entries (os/cpu-restricted, optional), which npm ci skips on other platforms without fetching.
// Run after any `npm install` that rewrote package-lock.json: node scripts/fix-lock-platforms.mjs
import { readFileSync, writeFileSync } from "node:fs";

const path = new URL("../package-lock.json", import.meta.url);
const lock = JSON.parse(readFileSync(path, "utf8"));
const pk = lock.packages;
const biome = pk["node_modules/@biomejs/biome"].version;
const buf = pk["node_modules/@bufbuild/buf"].version;
const entries = {
  "@biomejs/cli-android-arm64": [biome, "android", "arm64"],
  "@biomejs/cli-android-x64": [biome, "android", "x64"],
  "@biomejs/cli-darwin-arm64": [biome, "darwin", "arm64"],
  "@biomejs/cli-darwin-x64": [biome, "darwin", "x64"],
  "@biomejs/cli-linux-arm64-musl": [biome, "linux", "arm64", "musl"],
  "@biomejs/cli-linux-x64-musl": [biome, "linux", "x64", "musl"],
  "@biomejs/cli-win32-arm64": [biome, "win32", "arm64"],
  "@biomejs/cli-win32-x64": [biome, "win32", "x64"],
  "@bufbuild/buf-darwin-arm64": [buf, "darwin", "arm64"],
  "@bufbuild/buf-darwin-x64": [buf, "darwin", "x64"],
  "@bufbuild/buf-linux-armv7": [buf, "linux", "arm"],
  "@bufbuild/buf-win32-arm64": [buf, "win32", "arm64"],
  "@bufbuild/buf-win32-x64": [buf, "win32", "x64"],
};
let added = 0;
for (const [name, [version, os, cpu, libc]] of Object.entries(entries)) {
  const key = `node_modules/${name}`;
  if (pk[key]) continue;
  pk[key] = { version, cpu: [cpu], dev: true, optional: true, os: [os], ...(libc ? { libc: [libc] } : {}) };
  added++;
}
const sorted = Object.fromEntries(
  Object.entries(pk).sort(([a], [b]) => (a === "" ? -1 : b === "" ? 1 : a < b ? -1 : a > b ? 1 : 0)),
);
lock.packages = sorted;
writeFileSync(path, `${JSON.stringify(lock, null, 2)}\n`);
console.log(`package-lock.json: ${added} platform entries added`);
