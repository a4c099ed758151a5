// True when the module at `url` is the script node was started with (not imported by another).
import { resolve } from "node:path";
import { pathToFileURL } from "node:url";

export function isMain(url) {
  return process.argv[1] !== undefined && pathToFileURL(resolve(process.argv[1])).href === url;
}
