import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { Code } from "@connectrpc/connect";
import * as protoConnect from "@connectrpc/connect/protocol-connect";
import * as protoGrpc from "@connectrpc/connect/protocol-grpc";
import * as protoGrpcWeb from "@connectrpc/connect/protocol-grpc-web";
import { servicesRpcRoutes } from "../../testing/rpc-routes.ts";
import { type ErrorCode, HTTP_STATUS_OF_CODE } from "../errors.ts";
import { CONNECT_CONTENT_TYPE_PATTERNS, CONNECT_CONTENT_TYPES } from "./connect-plugin.ts";
import { RPC_ROUTES } from "./rpc-routes.ts";

describe("what a start knows of the RPCs without loading Connect (rpc-routes.ts)", () => {
  it("lists every route of the services, and only those (else: npm run generate)", () => {
    assert.deepEqual(RPC_ROUTES, servicesRpcRoutes());
  });

  it("passes the content types of Connect's protocols to Connect, as Connect names them", () => {
    assert.deepEqual(CONNECT_CONTENT_TYPES, [
      protoConnect.contentTypeUnaryJson,
      protoConnect.contentTypeStreamJson,
      protoGrpcWeb.contentTypeProto,
      protoGrpcWeb.contentTypeJson,
      protoGrpc.contentTypeProto,
      protoGrpc.contentTypeJson,
    ]);
    assert.deepEqual(
      CONNECT_CONTENT_TYPE_PATTERNS.map(String),
      [protoGrpc.contentTypeRegExp, protoGrpcWeb.contentTypeRegExp, protoConnect.contentTypeRegExp].map(
        String,
      ),
    );
  });

  it("maps svc's error codes to HTTP statuses as Connect does (the console's answers)", () => {
    for (const [code, status] of Object.entries(HTTP_STATUS_OF_CODE)) {
      const c = protoConnect.codeFromString(code as ErrorCode);
      assert.ok(c !== undefined && c !== Code.Unknown, code);
      assert.equal(status, protoConnect.codeToHttpStatus(c), code);
    }
  });
});
