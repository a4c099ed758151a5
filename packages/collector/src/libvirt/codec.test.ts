import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { decodeAllDomainStats, readTypedParams } from "./remote.ts";
import {
  decodeError,
  encodeMessage,
  MessageStatus,
  MessageType,
  REMOTE_PROGRAM,
  splitMessages,
} from "./rpc.ts";
import { XdrError, XdrReader, XdrWriter } from "./xdr.ts";

/** A GetAllDomainStats reply body as libvirtd encodes it (remote_protocol.x), written by hand. */
function statsReply(): Buffer {
  const w = new XdrWriter().uint(1); // one record
  w.string("web-1").fixedOpaque(Buffer.from("00112233445566778899aabbccddeeff", "hex")).int(7);
  const params: [string, number, (w: XdrWriter) => void][] = [
    ["state.state", 1, (x) => x.int(1)],
    ["vcpu.current", 2, (x) => x.uint(2)],
    ["cpu.time", 4, (x) => x.uint(0x2).uint(0x540be400)], // 2^33 + 1.41e9 = 10,000,000,000 ns
    ["net.0.name", 7, (x) => x.string("vnet3")],
    ["balloon.rss", 3, (x) => x.int(-1).int(-2)], // a negative hyper
    ["x.ratio", 5, (x) => x.uint(0x3ff80000).uint(0)], // 1.5
    ["x.flag", 6, (x) => x.int(1)],
  ];
  w.uint(params.length);
  for (const [name, type, value] of params) {
    w.string(name).int(type);
    value(w);
  }
  return w.bytes();
}

describe("libvirt remote protocol codec", () => {
  it("decodes a GetAllDomainStats reply: domain, UUID, id and every typed-parameter type", () => {
    const [rec] = decodeAllDomainStats(statsReply());
    assert.equal(rec.domain.name, "web-1");
    assert.equal(rec.domain.uuid.toString("hex"), "00112233445566778899aabbccddeeff");
    assert.equal(rec.domain.id, 7);
    assert.deepEqual(Object.fromEntries(rec.params), {
      "state.state": 1,
      "vcpu.current": 2,
      "cpu.time": 10_000_000_000n,
      "net.0.name": "vnet3",
      "balloon.rss": -2n,
      "x.ratio": 1.5,
      "x.flag": true,
    });
  });

  it("pads strings and opaques to 4 bytes and writes optional strings as a pointer", () => {
    const b = new XdrWriter().string("abcde").optionalString(undefined).optionalString("q").bytes();
    assert.equal(b.toString("hex"), "00000005616263646500000000000000" + "00000001" + "0000000171000000");
    const r = new XdrReader(b);
    assert.deepEqual(
      [r.string(), r.optionalString(), r.optionalString(), r.remaining],
      ["abcde", undefined, "q", 0],
    );
  });

  it("refuses a truncated body, an unknown parameter type and an array over its bound", () => {
    const full = statsReply();
    assert.throws(() => decodeAllDomainStats(full.subarray(0, full.length - 3)), XdrError);
    const bad = new XdrWriter().uint(1).string("x").int(9).bytes();
    assert.throws(() => readTypedParams(new XdrReader(bad)), /unknown type 9/);
    assert.throws(() => decodeAllDomainStats(new XdrWriter().uint(0xffffffff).bytes()), /exceeds its bound/);
  });

  it("frames messages with the 28-byte header and splits a stream at message boundaries", () => {
    const h = {
      program: REMOTE_PROGRAM,
      version: 1,
      procedure: 344,
      type: MessageType.REPLY,
      serial: 9,
      status: MessageStatus.OK,
    };
    const one = encodeMessage(h, Buffer.from([1, 2, 3, 4]));
    assert.equal(one.length, 32);
    assert.equal(one.readUInt32BE(0), 32);
    assert.equal(one.readUInt32BE(4), 0x20008086);
    const two = Buffer.concat([one, encodeMessage({ ...h, serial: 10 }, Buffer.alloc(0))]);
    const partial = splitMessages(two.subarray(0, 40));
    assert.deepEqual(
      partial.messages.map((m) => [m.header.serial, m.header.procedure, m.body.length]),
      [[9, 344, 4]],
    );
    assert.equal(partial.rest.length, 8);
    assert.equal(splitMessages(two).messages.length, 2);
    const bogus = Buffer.alloc(8);
    bogus.writeUInt32BE(5, 0);
    assert.throws(() => splitMessages(bogus), /outside/);
  });

  it("reads libvirt's error: code, domain and message", () => {
    const body = new XdrWriter().int(80).int(10).optionalString("metadata not found").int(2).bytes();
    const err = decodeError(body);
    assert.deepEqual([err.code, err.domain, err.message], [80, 10, "metadata not found"]);
  });
});
