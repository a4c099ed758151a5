/**
 * CRC-32 (IEEE 802.3, the one zlib computes) of the spool's records. The agent runs on Node.js 18, which
 * lacks zlib.crc32 (Node 20.15): same sums, so spools written by either stay readable.
 */
const TABLE = new Uint32Array(256);
for (let n = 0; n < 256; n++) {
  let c = n;
  for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
  TABLE[n] = c >>> 0;
}

export function crc32(data: Uint8Array): number {
  // -1 rather than 0xffffffff: the same 32 bits as an int32, so V8's optimized loop is not thrown away
  // ("lost precision") on its first pass.
  let c = -1;
  for (let i = 0; i < data.length; i++) c = TABLE[(c ^ data[i]) & 0xff] ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}
