/**
 * Requests as Prometheus takes them (issue 32): parameters from the URL query and a form body, any
 * Content-Type with an empty body, other bodies ignored, and every error under the prefix — Fastify's
 * own included — in Prometheus' envelope with Prometheus' status code. Sent over a raw socket so
 * headers and bodies are exactly the ones under test (fetch would add or fix some).
 */
import assert from "node:assert/strict";
import { request } from "node:http";
import { after, before, describe, it } from "node:test";
import { type PromFixture, startPromFixture } from "../../testing/promapi-fixture.ts";

interface Raw {
  status: number;
  allow: string | undefined;
  text: string;
  // biome-ignore lint/suspicious/noExplicitAny: checked field by field
  json: any;
}

describe("Prometheus API requests", () => {
  let f: PromFixture;
  let api: string;
  before(async () => {
    f = await startPromFixture();
    api = "/v1/monitoring/projects/mine/prometheus/api/v1";
  });
  after(() => f?.close());

  function send(
    method: string,
    path: string,
    headers: Record<string, string> = {},
    body?: string | Buffer,
  ): Promise<Raw> {
    const u = new URL(f.t.baseUrl);
    return new Promise((resolve, reject) => {
      const r = request(
        {
          host: u.hostname,
          port: u.port,
          method,
          path,
          headers: { authorization: `Bearer ${f.mine.key}`, ...headers },
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on("data", (c: Buffer) => chunks.push(c));
          res.on("end", () => {
            const text = Buffer.concat(chunks).toString();
            let json: unknown;
            try {
              json = JSON.parse(text);
            } catch {
              json = undefined;
            }
            resolve({ status: res.statusCode ?? 0, allow: res.headers.allow, text, json });
          });
        },
      );
      r.on("error", reject);
      if (body !== undefined) r.write(body);
      r.end();
    });
  }

  const scalar = (r: Raw, v: string) => {
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json.data.resultType, "scalar", r.text);
    assert.equal(r.json.data.result[1], v, r.text);
  };
  const promError = (r: Raw, status: number, errorType: string, error: RegExp) => {
    assert.equal(r.status, status, r.text);
    assert.deepEqual(Object.keys(r.json ?? {}), ["status", "errorType", "error"], r.text);
    assert.equal(r.json.status, "error");
    assert.equal(r.json.errorType, errorType, r.text);
    assert.match(r.json.error, error);
  };

  it("takes vmalert's POST: parameters in the query string, Content-Type JSON, empty body", async () => {
    const r = await send(
      "POST",
      `${api}/query_range?query=1&start=1&end=61&step=30s`,
      { "content-type": "application/json", "content-length": "0", "user-agent": "vmalert/v1.79.5" },
      "",
    );
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json.data.resultType, "matrix");
  });

  it("ignores a body that is not a form, whatever its Content-Type says", async () => {
    const bodies: [Record<string, string>, string][] = [
      [{ "content-type": "application/json" }, "not json {"],
      [{ "content-type": "application/json" }, '{"query":"2"}'],
      [{ "content-type": "application/octet-stream" }, "\u0000\u0001binary"],
      [{ "content-type": "text/plain; charset=utf-8" }, "query=2"],
      [{ "content-type": "not a media type" }, "query=2"],
      [{ "content-type": "" }, "query=2"],
      [{}, "query=2"],
    ];
    for (const [headers, body] of bodies) {
      const r = await send("POST", `${api}/query?query=1&time=4`, headers, body);
      scalar(r, "1");
    }
  });

  it("ignores a non-form body larger than the request limit", async () => {
    const big = Buffer.alloc(f.t.app.config.maxRequestBytes + 1024, 0x61);
    const r = await send("POST", `${api}/query?query=1&time=4`, { "content-type": "application/json" }, big);
    scalar(r, "1");
  });

  it("reads a form body first, then the query string, as Go's Request.Form", async () => {
    const type = { "content-type": "application/x-www-form-urlencoded" };
    scalar(await send("POST", `${api}/query?query=1&time=4`, type, "query=2"), "2");
    scalar(await send("POST", `${api}/query?time=4`, type, "query=3%2B%20%31"), "4");
    scalar(await send("POST", `${api}/query?query=5&time=4`, type, ""), "5");
    const charset = { "content-type": "Application/X-WWW-Form-Urlencoded; charset=UTF-8" };
    scalar(await send("POST", `${api}/query?time=4`, charset, "query=6"), "6");
    const series = await send(
      "POST",
      `${api}/series?match[]=svc_vm_vcpus`,
      type,
      `match[]=${encodeURIComponent('svc_vm_memory_free_bytes{vm_id="vm-1"}')}`,
    );
    assert.equal(series.status, 200, series.text);
    assert.deepEqual(series.json.data.map((l: Record<string, string>) => `${l.__name__}/${l.vm_id}`).sort(), [
      "svc_vm_memory_free_bytes/vm-1",
      "svc_vm_vcpus/vm-1",
      "svc_vm_vcpus/vm-2",
    ]);
  });

  it("reads a multipart form's fields and skips its files", async () => {
    const boundary = "svcBoundary42";
    const body = [
      `--${boundary}`,
      'Content-Disposition: form-data; name="query"',
      "",
      "7",
      `--${boundary}`,
      'Content-Disposition: form-data; name="time"; filename="t.txt"',
      "Content-Type: text/plain",
      "",
      "yesterday",
      `--${boundary}--`,
      "",
    ].join("\r\n");
    const r = await send(
      "POST",
      `${api}/query?time=4`,
      { "content-type": `multipart/form-data; boundary=${boundary}` },
      body,
    );
    scalar(r, "7");
  });

  it("answers a malformed form, escape or separator with 400 bad_data naming it", async () => {
    const type = { "content-type": "application/x-www-form-urlencoded" };
    promError(
      await send("POST", `${api}/query`, type, "query=%zz"),
      400,
      "bad_data",
      /^error parsing form values: invalid URL escape "%zz"$/,
    );
    promError(
      await send("GET", `${api}/query?query=1%`),
      400,
      "bad_data",
      /^error parsing form values: invalid URL escape "%"$/,
    );
    promError(
      await send("GET", `${api}/labels?limit=1;start=2`),
      400,
      "bad_data",
      /invalid semicolon separator/,
    );
    promError(
      await send("POST", `${api}/query`, { "content-type": "multipart/form-data; boundary=x" }, "garbage"),
      400,
      "bad_data",
      /^error parsing form values: /,
    );
  });

  it("refuses a form body over the request limit with 400 bad_data", async () => {
    const big = `query=${"1".repeat(f.t.app.config.maxRequestBytes)}`;
    promError(
      await send("POST", `${api}/query`, { "content-type": "application/x-www-form-urlencoded" }, big),
      400,
      "bad_data",
      /exceeds the limit of \d+ bytes \[REQUEST_TOO_LARGE\]/,
    );
    // The connection's next request is answered (the rest of the body was read and dropped).
    scalar(await send("GET", `${api}/query?query=8&time=4`), "8");
  });

  it("answers 405 with Allow for a method a served path does not take, 204 to OPTIONS", async () => {
    const cases: [string, string, string][] = [
      ["POST", "label/vm/values", "GET, OPTIONS"],
      ["POST", "metadata", "GET, OPTIONS"],
      ["POST", "rules", "GET, OPTIONS"],
      ["PUT", "query", "GET, POST, OPTIONS"],
      ["DELETE", "series", "GET, POST, OPTIONS"],
      ["PATCH", "query_range", "GET, POST, OPTIONS"],
    ];
    for (const [method, path, allow] of cases) {
      const r = await send(method, `${api}/${path}`);
      promError(r, 405, "method_not_allowed", new RegExp(`^method ${method} not allowed`));
      assert.equal(r.allow, allow, path);
    }
    const o = await send("OPTIONS", `${api}/query`);
    assert.equal(o.status, 204);
    assert.equal(o.allow, "GET, POST, OPTIONS");
  });

  it("answers Fastify's own errors under the prefix in the envelope, and only there", async () => {
    promError(await send("GET", `${api}/label/%zz/values`), 400, "bad_data", /malformed request path/);
    promError(await send("GET", `${api}/quer%zz`), 400, "bad_data", /malformed request path/);
    const propfind = await send("PROPFIND", `${api}/query?query=1`);
    promError(propfind, 405, "method_not_allowed", /^method PROPFIND not allowed on api\/v1\/query/);
    assert.equal(propfind.allow, "GET, POST, OPTIONS");
    promError(await send("PROPFIND", `${api}/queries`), 404, "not_found", /not found/);
    promError(await send("LOCK", `${api}/label/vm/values`), 405, "method_not_allowed", /label\/…\/values/);
    promError(await send("GET", `${api}/nothing`), 404, "not_found", /not found/);
    promError(await send("GET", "/v1/monitoring/projects/mine/prometheus"), 404, "not_found", /not found/);
    const outside = await send("GET", "/v1/monitoring/projects/mine/scrape-targets%zz");
    assert.equal(outside.status, 400);
    assert.equal(outside.json.code, "FST_ERR_BAD_URL", "outside the prefix Fastify answers as before");
  });

  it("authenticates before reading a body or routing", async () => {
    const r = await send(
      "POST",
      `${api}/nothing`,
      { authorization: "", "content-type": "application/x-www-form-urlencoded" },
      "query=%zz",
    );
    promError(r, 401, "unauthorized", /./);
  });
});
