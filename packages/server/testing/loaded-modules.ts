/**
 * The files Node's ES module loader has loaded since `traceLoadedModules()` was called, through a
 * module hook (node:module's register) that runs on the loader's thread and answers over a port. Only
 * what is imported after the call is seen: call it before importing what the test is about.
 */
import { register } from "node:module";
import { MessageChannel } from "node:worker_threads";

const HOOKS = `
let port;
const urls = [];
export function initialize(data) {
  port = data.port;
  port.on("message", () => port.postMessage(urls));
  port.unref();
}
export async function load(url, context, next) {
  urls.push(url);
  return next(url, context);
}
`;

export function traceLoadedModules(): () => Promise<string[]> {
  const { port1, port2 } = new MessageChannel();
  register(`data:text/javascript,${encodeURIComponent(HOOKS)}`, import.meta.url, {
    data: { port: port2 },
    transferList: [port2],
  });
  port1.unref();
  return () =>
    new Promise((resolve) => {
      port1.once("message", (urls: string[]) => resolve(urls));
      port1.postMessage("list");
    });
}
