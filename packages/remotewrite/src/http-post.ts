import { request as httpRequest } from "node:http";
import { request as httpsRequest } from "node:https";
import type { FetchLike } from "./push.ts";

const MAX_ANSWER_BYTES = 64 * 1024;

/**
 * The agent's POST, through node:http rather than fetch: fetch loads undici on first use (several MiB
 * resident in a process that otherwise holds little) and costs more CPU per request, and on Node 18 it
 * is experimental and warns. Answers are read up to 64 KiB (the pusher keeps the first 4,096 characters).
 * Failures carry the system error code as `cause.code`, which is what the pusher reports.
 */
export const httpPost: FetchLike = (url, init) =>
  new Promise((resolve, reject) => {
    const u = new URL(url);
    const request = u.protocol === "https:" ? httpsRequest : httpRequest;
    const req = request(u, {
      method: init.method,
      headers: { ...init.headers, "Content-Length": String(init.body.length) },
      signal: init.signal,
    });
    req.on("error", (err: NodeJS.ErrnoException) => {
      reject(Object.assign(new Error("request failed"), { cause: { code: err.code ?? err.name } }));
    });
    req.on("response", (res) => {
      const chunks: Buffer[] = [];
      let bytes = 0;
      res.on("data", (c: Buffer) => {
        if (bytes < MAX_ANSWER_BYTES) chunks.push(c);
        bytes += c.length;
      });
      res.on("error", (err: NodeJS.ErrnoException) => {
        reject(Object.assign(new Error("answer failed"), { cause: { code: err.code ?? err.name } }));
      });
      res.on("end", () => {
        const text = Buffer.concat(chunks).toString("utf8");
        const get = (name: string) => {
          const v = res.headers[name.toLowerCase()];
          return v === undefined ? null : Array.isArray(v) ? v.join(", ") : v;
        };
        resolve({ status: res.statusCode ?? 0, headers: { get }, text: async () => text });
      });
    });
    req.end(init.body);
  });
