// One 8-byte scratch shared by encoder and decoder: doubles move through it as raw bytes so that NaN
// payloads (the staleness marker) are copied bit for bit, never through arithmetic or a DataView.
export const scratchF64 = new Float64Array(1);
export const scratchU8 = new Uint8Array(scratchF64.buffer);
