// Re-encodes a parsed GGUF file as another version and tensor type, so that
// the reader is tested on v1, v3 and F16 from the one real model. The writer
// itself, and every tensor type, are in tests/gguf/.
import { retypedMetadata } from '../gguf/models.mjs';
import { ggmlType } from '../gguf/types.mjs';
import { encodeGguf } from '../gguf/writer.mjs';

/** Encodes `gguf` (a GgufFile) as GGUF `version` with every tensor in `tensorType` (a ggml id or name: 0 F32, 1 F16, ...). */
export function writeGguf(gguf, { version = 3, tensorType = 0 } = {}) {
  const type = ggmlType(tensorType);
  const tensors = [...gguf.tensors.values()].map((info) => ({
    name: info.name, dims: info.dims, type, data: () => type.encode(gguf.tensor(info.name)),
  }));
  return encodeGguf({ version, metadata: retypedMetadata(gguf), tensors });
}
