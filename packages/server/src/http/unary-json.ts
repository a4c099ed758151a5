/**
 * Connect unary requests in JSON, answered with svc's compiled JSON writer (json-writer.ts).
 *
 * Connect serializes a JSON answer with protobuf-es's `toJsonString`, and offers no per-method or
 * per-router codec. `withJsonWriter` wraps the router that svc's services register on: for each
 * unary method it puts a handler in front of Connect's own. A Connect-protocol POST with a unary JSON
 * body is served here; everything else (GET, binary protobuf, gRPC, gRPC-Web) goes to Connect's
 * handler untouched.
 *
 * The handler follows Connect's unary handler (connect-es 2.1, protocol-connect/handler-factory.js)
 * step for step, and reuses Connect's own parts for each step: content type, protocol version,
 * timeout, compression negotiation, body read limit, request parsing, interceptors
 * (`invokeUnaryImplementation`), errors (`errorToJsonBytes`, HTTP status), response headers and
 * trailers. Only the answer's serialization differs, and it writes the same bytes.
 * unary-json.test.ts sends the same requests, successes and every kind of failure, through both and
 * compares status, headers and body.
 */

import type { DescMessage } from "@bufbuild/protobuf";
import {
  Code,
  ConnectError,
  type ConnectRouter,
  type ConnectRouterOptions,
  createHandlerContext,
  createServiceImplSpec,
  type MethodImplSpec,
} from "@connectrpc/connect";
import {
  compressionNegotiate,
  createAsyncIterable,
  createMethodSerializationLookup,
  invokeUnaryImplementation,
  readAllBytes,
  type UniversalHandler,
  type UniversalServerRequest,
  type UniversalServerResponse,
  validateUniversalHandlerOptions,
} from "@connectrpc/connect/protocol";
import {
  codeToHttpStatus,
  contentTypeUnaryJson,
  errorToJsonBytes,
  headerContentType,
  headerProtocolVersion,
  headerTimeout,
  headerUnaryAcceptEncoding,
  headerUnaryContentLength,
  headerUnaryEncoding,
  parseContentType,
  parseTimeout,
  protocolVersion,
  trailerMux,
} from "@connectrpc/connect/protocol-connect";
import { compileJsonWriter, type JsonWriter } from "./json-writer.ts";

type HandlerOptions = ReturnType<typeof validateUniversalHandlerOptions>;

/**
 * A router that registers on `router` and serves unary JSON answers with the compiled writer.
 * `options` must be the options the router was created with (read when a service registers, so
 * that a shutdown signal set on them before registration is seen).
 */
export function withJsonWriter(router: ConnectRouter, options: ConnectRouterOptions): ConnectRouter {
  const wrapped: ConnectRouter = {
    handlers: router.handlers,
    service(service, implementation, serviceOptions) {
      const before = router.handlers.length;
      router.service(service, implementation, serviceOptions);
      const spec = createServiceImplSpec(service, implementation);
      const opt = { ...validateUniversalHandlerOptions(options), ...serviceOptions } as HandlerOptions;
      for (let i = before; i < router.handlers.length; i++) {
        const connect = router.handlers[i];
        const method = spec.methods[connect.method.localName];
        if (method?.kind === "unary") router.handlers[i] = unaryJsonHandler(method, connect, opt);
      }
      return wrapped;
    },
    rpc(method, implementation, rpcOptions) {
      router.rpc(method, implementation, rpcOptions);
      return wrapped;
    },
  };
  return wrapped;
}

type UnarySpec = Extract<MethodImplSpec, { kind: "unary" }>;

function unaryJsonHandler(spec: UnarySpec, connect: UniversalHandler, opt: HandlerOptions): UniversalHandler {
  const input = createMethodSerializationLookup(spec.method, opt.binaryOptions, opt.jsonOptions, opt).getI(
    false,
  );
  const write = writerFor(spec.method.output, opt);
  const encoder = new TextEncoder();
  const encode = (json: string) => encoder.encode(json);

  async function handle(req: UniversalServerRequest): Promise<UniversalServerResponse> {
    if (req.method !== "POST") return connect(req);
    const type = parseContentType(req.header.get(headerContentType));
    // A body some framework already parsed is left to Connect, as is anything but unary JSON.
    if (type === undefined || type.binary || type.stream || !isByteStream(req.body)) return connect(req);
    const body = req.body;

    const timeout = parseTimeout(req.header.get(headerTimeout), opt.maxTimeoutMs);
    const context = createHandlerContext({
      ...spec,
      service: spec.method.parent,
      requestMethod: req.method,
      protocolName: "connect",
      timeoutMs: timeout.timeoutMs,
      shutdownSignal: opt.shutdownSignal,
      requestSignal: req.signal,
      requestHeader: req.header,
      url: req.url,
      responseHeader: { [headerContentType]: contentTypeUnaryJson },
      contextValues: req.contextValues,
    });
    const compression = compressionNegotiate(
      opt.acceptCompression,
      req.header.get(headerUnaryEncoding),
      req.header.get(headerUnaryAcceptEncoding),
      headerUnaryAcceptEncoding,
    );
    let status = 200;
    let answer: Uint8Array;
    try {
      if (opt.requireConnectProtocolHeader) requireProtocolVersion(req.header);
      if (compression.error) throw compression.error;
      if (timeout.error) throw timeout.error;
      let bytes = await readAllBytes(body, opt.readMaxBytes, req.header.get(headerUnaryContentLength));
      if (compression.request) bytes = await compression.request.decompress(bytes, opt.readMaxBytes);
      const message = input.parse(bytes);
      const output = await invokeUnaryImplementation(spec, context, message, opt.interceptors);
      answer = serialize(encode, write, output, opt.writeMaxBytes);
    } catch (e) {
      context.abort(e);
      const error =
        e instanceof ConnectError
          ? e
          : new ConnectError("internal error", Code.Internal, undefined, undefined, e);
      status = codeToHttpStatus(error.code);
      context.responseHeader.set(headerContentType, contentTypeUnaryJson);
      error.metadata.forEach((value, key) => {
        context.responseHeader.set(key, value);
      });
      answer = errorToJsonBytes(error, opt.jsonOptions);
    } finally {
      context.abort();
    }
    if (compression.response && answer.byteLength >= opt.compressMinBytes) {
      answer = await compression.response.compress(answer);
      context.responseHeader.set(headerUnaryEncoding, compression.response.name);
    }
    const header = trailerMux(context.responseHeader, context.responseTrailer);
    header.set(headerUnaryContentLength, answer.byteLength.toString(10));
    return { status, body: createAsyncIterable([answer]), header };
  }
  return Object.assign(handle, {
    service: connect.service,
    method: connect.method,
    requestPath: connect.requestPath,
    supportedContentType: connect.supportedContentType,
    protocolNames: connect.protocolNames,
    allowedMethods: connect.allowedMethods,
  });
}

function writerFor(output: DescMessage, opt: HandlerOptions): JsonWriter {
  const j = opt.jsonOptions ?? {};
  return compileJsonWriter(output, {
    alwaysEmitImplicit: j.alwaysEmitImplicit,
    enumAsInteger: j.enumAsInteger,
    useProtoFieldName: j.useProtoFieldName,
  });
}

/** Connect's JSON serialization with its write limit, with the compiled writer in place of toJsonString. */
function serialize(
  encode: (json: string) => Uint8Array,
  write: JsonWriter,
  output: Parameters<JsonWriter>[0],
  max: number,
): Uint8Array {
  let bytes: Uint8Array;
  try {
    bytes = encode(write(output));
  } catch (e) {
    throw ConnectError.from(e, Code.Internal);
  }
  if (bytes.byteLength > max)
    throw new ConnectError(
      `message size ${bytes.byteLength} is larger than configured writeMaxBytes ${max}`,
      Code.ResourceExhausted,
    );
  return bytes;
}

/** Connect's requireProtocolVersionHeader (not among the package's exports), same errors. */
function requireProtocolVersion(header: Headers): void {
  const v = header.get(headerProtocolVersion);
  if (v === null)
    throw new ConnectError(
      `missing required header: set ${headerProtocolVersion} to "${protocolVersion}"`,
      Code.InvalidArgument,
    );
  if (v !== protocolVersion)
    throw new ConnectError(
      `${headerProtocolVersion} must be "${protocolVersion}": got "${v}"`,
      Code.InvalidArgument,
    );
}

function isByteStream(body: unknown): body is AsyncIterable<Uint8Array> {
  return typeof body === "object" && body !== null && Symbol.asyncIterator in body;
}
