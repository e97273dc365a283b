// Every export, class, method, getter and option of the entries,
// 'kvcache-wasm', 'kvcache-wasm/llama', 'kvcache-wasm/chat',
// 'kvcache-wasm/worker', 'kvcache-wasm/prompt-api' and 'kvcache-wasm/ai-sdk', as a TypeScript user writes them: package.test.mjs
// checks this file with `tsc --noEmit --strict` against the installed
// tarball's .d.ts files, then compiles and runs it, so each declaration is
// used at least once and matches what the JavaScript does -- but the
// worker's, which Node cannot start (it has no Worker): useWorker is
// type-checked only, and tests/runtimes/worker-smoke.mjs runs the same calls
// in browsers.
import init, {
  init as namedInit, kernelIsa, kernelInfo, version, attentionHead, KvCacheError, LayerKvCache, KvCache,
  Q8_WINDOW, MAX_KV_HEADS, MAX_HEAD_DIM, MAX_POSITIONS, threadCount, threadInfo, setThreadLimit, shutdown,
  PROFILE_OPERATIONS, profile,
} from 'kvcache-wasm';
import type {
  AliveMask, AttentionResult, EvictionPolicy, FullLayerOptions, InitOptions, KvCacheConfig, KvMode,
  KernelInfo, LayerKvCacheOptions, LinearLayerOptions, Profile, ThreadInfo,
} from 'kvcache-wasm';
import {
  GgufError, GgufFile, Llama, LlamaSession, Projector, Tokenizer, decode, generate, promptLookup, readGguf, seededRandom, slideCache,
} from 'kvcache-wasm/llama';
import type {
  DecodeEvent, ForwardOptions, GenerateOptions, GeneratePiece, GenerateStats, GenerateTextOptions, GgufTensorInfo, LlamaConfig, LoadOptions,
  ModelSource, ReplyOptions, ReplyStats, SamplingOptions, SessionOptions, StopReason, StreamingDecoder,
} from 'kvcache-wasm/llama';
import { Chat, ChatTemplate, ChatTemplateError, PLAIN_TEMPLATE } from 'kvcache-wasm/chat';
import type { ChatMessage, ChatOptions, ChatRenderOptions } from 'kvcache-wasm/chat';
import { LlamaWorker, RemoteLlama, RemotePrefixCache, RemoteSession } from 'kvcache-wasm/worker';
import type { ImageTokenCount, LlamaWorkerOptions, PreparedImage, RemoteModelSource, RemoteSessionOptions, RemoteTokenizer } from 'kvcache-wasm/worker';
import { defineLanguageModel, installLanguageModel } from 'kvcache-wasm/prompt-api';
import type { Availability, LanguageModel, LanguageModelMessage, LanguageModelStatic } from 'kvcache-wasm/prompt-api';
import { createKvcache, kvcache, KvcacheLanguageModel } from 'kvcache-wasm/ai-sdk';
import type { KvcacheProvider, LanguageModelCallOptions } from 'kvcache-wasm/ai-sdk';

function check(condition: boolean, what: string): void {
  if (!condition) throw new Error(`whole-api: ${what}`);
}

function expectThrow(call: () => unknown, type: new (...args: never[]) => Error, what: string): Error {
  try {
    call();
  } catch (error) {
    check(error instanceof type, `${what} throws a ${type.name} (got ${String(error)})`);
    return error as Error;
  }
  throw new Error(`whole-api: ${what} did not throw`);
}

function filled(n: number, random: () => number): Float32Array {
  return Float32Array.from({ length: n }, () => 2 * random() - 1);
}

async function useInit(): Promise<void> {
  const options: InitOptions = { isa: 'wasm-simd128', threads: 2, maxMemory: 256 * 2 ** 20 };
  await init(options);
  await namedInit();
  const byModule: InitOptions = { module: new WebAssembly.Module(new Uint8Array([0, 97, 115, 109, 1, 0, 0, 0])) };
  const byWasm: InitOptions[] = [{ wasm: new Uint8Array(8) }, { wasm: new ArrayBuffer(8) }, { wasm: 'kvcache.wasm' },
    { wasm: new URL('kvcache.wasm', import.meta.url) }, { wasm: new Response(new Uint8Array(8)) },
    { locateFile: (name) => new URL(name, import.meta.url) }, { locateFile: (name) => `/assets/${name}` }];
  // Loaded already: every later call resolves to the same module, whatever it is given.
  for (const later of [byModule, ...byWasm]) await init(later);
  check(kernelIsa() === 'wasm-simd128', 'kernelIsa()');
  const kernel: KernelInfo = kernelInfo();
  check(kernel.isa === 'wasm-simd128' && kernel.wanted === 'wasm-simd128' && kernel.reason === null, 'kernelInfo()');
  const info: ThreadInfo = threadInfo();
  check(threadCount() === 2 && info.threads === 2 && info.wanted === 2 && info.reason === null && info.limit === 2, 'threads');
  setThreadLimit(1);
  check(threadInfo().limit === 1, 'setThreadLimit');
  setThreadLimit(2);
  const profiled: Profile<number> = await profile(() => 3);
  check(profiled.value === 3 && Object.keys(profiled.ms).join() === PROFILE_OPERATIONS.join() && profiled.ms.qkv === 0, 'profile()');
  check(/^\d+\.\d+\.\d+/.test(version()), 'version()');
  check(Q8_WINDOW === 64 && MAX_KV_HEADS === 4096 && MAX_HEAD_DIM === 4096 && MAX_POSITIONS > 0, 'the limits');
  const error = new KvCacheError('out of memory', 'KVC_E_NOMEM');
  check(error instanceof Error && error.code === 'KVC_E_NOMEM' && error.name === 'KvCacheError', 'KvCacheError');
  check(new GgufError('not a GGUF file') instanceof Error, 'GgufError');
}

function useAttentionHead(random: () => number): void {
  const d = 8;
  const n = 5;
  const result: AttentionResult = attentionHead(filled(d, random), filled(n * d, random), filled(n * d, random), n, d);
  check(result.out.length === d && result.probs.length === n, 'attentionHead');
}

function useFullLayer(random: () => number): void {
  const H = 2;
  const d = 16;
  const mode: KvMode = 'q8';
  const options: FullLayerOptions = { kind: 'full', numKvHeads: H, headDim: d, mode, maxRows: 200, sinks: 4, recent: 100 };
  const layer = new LayerKvCache(options);
  check(layer.kind === 'full' && layer.numKvHeads === H && layer.headDim === d && layer.mode === mode, 'geometry');
  const alive: AliveMask = [true, false];
  layer.append(filled(H * d, random), filled(H * d, random), alive);
  layer.append(filled(H * d, random), filled(H * d, random), new Uint8Array([1, 1]));
  layer.append(filled(H * d, random), filled(H * d, random), null);
  layer.appendBatch(filled(100 * H * d, random), filled(100 * H * d, random));
  layer.appendBatch(filled(2 * H * d, random), filled(2 * H * d, random), new Uint8Array(2 * H).fill(1));
  check(layer.seqLen === 105 && layer.nextPosition === 105 && layer.fieldFrozen, `after appends: ${layer.toString()}`);
  check(layer.memoryBytes > 0 && layer.capacityBytes >= layer.memoryBytes, 'memoryBytes, capacityBytes');
  check(layer.numHeads === 0 && layer.numFeatures === 0 && layer.valueDim === 0 && layer.phaseMass === 0 &&
    layer.steps === 0 && layer.linearState.length === 0 && layer.linearScratch.length === 0, 'no linear state');

  const q = filled(d, random);
  const rows = layer.headLen(0);
  const { out, probs } = layer.attend(q, 0);
  layer.attend(q, 0, { out: new Float32Array(d), probs: new Float32Array(rows) });
  const group = layer.attendGroup(filled(2 * d, random), 1, {});
  check(group.out.length === 2 * d && group.probs.length === 2 * layer.headLen(1), 'attendGroup');
  const heads = layer.attendHeads(filled(2 * H * d, random));
  check(heads.probs === null && heads.out.length === 2 * H * d, 'attendHeads without probs');
  const withProbs = layer.attendHeads(filled(H * d, random), { probs: new Float32Array(H * layer.seqLen) });
  check(withProbs.probs !== null && withProbs.probs.length === H * layer.seqLen, 'attendHeads with probs');
  const causal = layer.attendCausal(filled(3 * d, random), 1);
  check(causal.out.length === 3 * d, 'attendCausal');
  check(out.length === d && probs.length === rows, 'attend');

  layer.accumulateImpHead(0, probs);
  layer.accumulateImp(new Float32Array(layer.seqLen).fill(0.5));
  check(layer.imp.length === layer.seqLen, 'imp');
  check(layer.headKeys(0).length === rows * d && layer.headValues(1).length === layer.headLen(1) * d, 'headKeys, headValues');
  check(layer.headPositions(1).length === layer.headLen(1) && layer.positions().length === layer.seqLen, 'positions');

  layer.beginVerify();
  layer.append(filled(H * d, random), filled(H * d, random));
  check(layer.verifying && layer.draftLen === 1, 'a verify is open');
  layer.accept(1);
  layer.beginVerify();
  layer.appendBatch(filled(2 * H * d, random), filled(2 * H * d, random));
  layer.reject();
  check(!layer.verifying && layer.seqLen === 106, 'accept and reject');

  layer.truncateLast(1);
  const policy: EvictionPolicy = { budget: 64, sinks: 4, recent: 16 };
  const plan = layer.evictionPlan(policy);
  const kept = layer.evict(policy);
  check(kept.length === plan.length && kept.every((p, i) => p === plan[i]), 'evict keeps its plan');
  check(layer.slideWindow(32).length === 32 && layer.slideWindow(16, 2).length === 16, 'slideWindow');
  layer.setMaxRows(12, { sinks: 2, recent: 6 });
  layer.setMaxRows(0);

  const bytes: Uint8Array = layer.serialize();
  const restored = LayerKvCache.deserialize(bytes);
  const fromBuffer = LayerKvCache.deserialize(bytes.slice().buffer);
  const copy = layer.clone();
  check(restored.memoryBytes === layer.memoryBytes && copy.seqLen === layer.seqLen && fromBuffer.seqLen === layer.seqLen, 'snapshot, clone');
  const refused = expectThrow(() => LayerKvCache.deserialize(bytes.subarray(0, 10)), KvCacheError, 'a cut snapshot') as KvCacheError;
  check(refused.code.startsWith('KVC_E_SNAPSHOT'), `refused with ${refused.code}`);
  restored.free();
  fromBuffer[Symbol.dispose]();
  copy.clear();
  copy.free();
  layer.free();
  layer.free(); // idempotent
  expectThrow(() => layer.seqLen, TypeError, 'a freed layer');
}

function useLinearLayer(random: () => number): void {
  const options: LinearLayerOptions = { kind: 'linear', numHeads: 2, numFeatures: 4, valueDim: 3, phaseMass: 0.5 };
  const layer = new LayerKvCache(options);
  check(layer.kind === 'linear' && layer.mode === null && layer.numHeads === 2 && layer.numFeatures === 4 &&
    layer.valueDim === 3 && layer.phaseMass === 0.5, 'linear geometry');
  const out = layer.linearStep(filled(8, random), filled(8, random), filled(6, random));
  layer.linearStep(filled(8, random), filled(8, random), filled(6, random), new Float32Array(8).fill(0.9), new Float32Array(6));
  layer.linearStep(filled(8, random), filled(8, random), filled(6, random), null);
  layer.beginVerify();
  layer.linearStepPhase(filled(4, random), filled(4, random), filled(6, random));
  layer.linearStepPhase(filled(4, random), filled(4, random), filled(6, random), null, new Float32Array(6));
  check(layer.steps === 5 && layer.draftLen === 2 && layer.linearScratch.length === 2 * 24, 'tentative steps');
  layer.accept(1);
  check(out.length === 6 && layer.linearState.length === 24 && layer.steps === 4, 'linear state');
  layer.free();
}

function useKvCache(random: () => number): void {
  const uniform: KvCacheConfig = { numLayers: 2, numKvHeads: 2, headDim: 8, mode: 'f32', maxRows: 100, sinks: 2, recent: 50 };
  const layers: LayerKvCacheOptions[] = [{ numKvHeads: 2, headDim: 8, mode: 'q8k' }, { kind: 'linear', numHeads: 1, numFeatures: 2, valueDim: 2 }];
  const mixed = new KvCache({ layers });
  check(mixed.numLayers === 2 && mixed.layer(1).kind === 'linear', 'a mixed KvCache');
  expectThrow(() => mixed.truncateLast(1), KvCacheError, 'truncateLast with a linear layer');
  mixed.free();

  const cache = new KvCache(uniform);
  cache.appendLayer(0, filled(16, random), filled(16, random), [true, true]);
  cache.appendLayerBatch(1, filled(16, random), filled(16, random));
  cache.appendLayer(1, filled(16, random), filled(16, random));
  cache.appendLayerBatch(0, filled(16, random), filled(16, random), new Uint8Array([1, 1]));
  check(cache.seqLen === 2, `seqLen ${cache.seqLen}`);
  const { out } = cache.attendLayer(0, filled(8, random), 1, { out: new Float32Array(8) });
  const heads = cache.attendLayerHeads(1, filled(16, random), { probs: new Float32Array(2 * 2) });
  check(out.length === 8 && heads.out.length === 16 && heads.probs !== null, 'attendLayer, attendLayerHeads');
  check(cache.memoryBytesByLayer.reduce((a, b) => a + b, 0) === cache.memoryBytes && cache.capacityBytes >= cache.memoryBytes, 'memory');
  cache.beginVerify();
  cache.appendLayer(0, filled(16, random), filled(16, random));
  cache.appendLayer(1, filled(16, random), filled(16, random));
  check(cache.verifying, 'verifying');
  cache.accept(1);
  cache.beginVerify();
  cache.reject();
  cache.truncateLast(1);
  cache.evict({ budget: 2 });
  const restored = KvCache.deserialize(cache.serialize());
  const copy = cache.clone();
  check(restored.memoryBytes === cache.memoryBytes && copy.seqLen === cache.seqLen, `snapshot of ${cache.toString()}`);
  restored.free();
  copy[Symbol.dispose]();
  cache.clear();
  cache.free();
}

function useTokenizer(): void {
  const tokenizer = new Tokenizer({ tokens: ['<unk>', '<s>', '</s>', '\u2581', 'a', 'b', '\u2581a', 'ab'], scores: [0, 0, 0, 0, 0, 0, 1, 2], bosId: 1, eosId: 2, unkId: 0 });
  check(tokenizer.vocabSize === 8 && tokenizer.tokens.length === 8 && tokenizer.bosId === 1 && tokenizer.eosId === 2, 'Tokenizer');
  check(tokenizer.scores.length === 8 && tokenizer.unkId === 0, 'the vocabulary');
  const ids = tokenizer.encode('ab a');
  check(ids.join() === '1,3,7,6' && tokenizer.encode('ab', { bos: false }).join() === '3,7', `encode: ${ids.join()}`);
  const decoder: StreamingDecoder = tokenizer.decoder();
  const text = ids.map((id) => decoder.push(id)).join('') + decoder.flush();
  check(text === tokenizer.decode(ids) && text === 'ab a', `decode: ${text}`);
}

function useGguf(model: Uint8Array): Llama {
  expectThrow(() => readGguf(new Uint8Array(8)), GgufError, 'readGguf of 8 zero bytes');
  const gguf: GgufFile = readGguf(model.slice().buffer);
  check(gguf.version >= 1 && gguf.metadata.size > 0 && gguf.get('general.architecture') === 'llama', 'GgufFile');
  const info: GgufTensorInfo | undefined = gguf.tensors.get('token_embd.weight');
  if (info === undefined) throw new Error('whole-api: the model has no token_embd.weight');
  const elements = info.dims.reduce((n, d) => n * d, 1);
  check(gguf.tensor(info.name).length === elements && info.dims.length === 2 && info.type === 'F32' &&
    info.typeId === 0 && info.bytes === 4 * elements && info.offset > 0, 'tensor info');
  check(Tokenizer.fromGguf(gguf).vocabSize === info.dims[1], 'Tokenizer.fromGguf');
  check(Llama.fromGguf(gguf).config.dim === Llama.fromGguf(model).config.dim, 'Llama.fromGguf of a GgufFile and of bytes');
  return Llama.fromGguf(model);
}

async function useLoad(model: Uint8Array): Promise<void> {
  const progress: number[] = [];
  const options: LoadOptions = { onProgress: ({ loaded, total }) => progress.push(loaded / (total ?? loaded)), contextLength: 512, cacheMode: 'q8',
    perLayerEmbeddings: 'outside' };
  const copy = new Uint8Array(model); // an ArrayBuffer's view, as Blob and Response take
  const sources: ModelSource[] = [model, new Blob([copy]), new Response(copy)];
  for (const source of sources) {
    const loaded: Llama = await Llama.load(source, options);
    check(loaded.config.vocabSize > 0 && progress.at(-1) === 1 && loaded.session().mode === 'q8', 'Llama.load');
    await loaded.preparePerLayerRows([1, 2]); // nothing to read: the model has no per-layer embeddings
    loaded.free();
  }
  const controller = new AbortController();
  controller.abort();
  let refused = false;
  try {
    await Llama.load(model, { signal: controller.signal });
  } catch {
    refused = true;
  }
  check(refused, 'Llama.load with an aborted signal');
}

function useLlama(llama: Llama): GenerateStats {
  const config: LlamaConfig = llama.config;
  check(config.dim === config.numHeads * config.headDim && config.numLayers > 0 && config.hiddenDim > 0 &&
    config.numKvHeads > 0 && config.eps > 0 && config.contextLength > 0 && config.ropeBase > 0 && config.vocabSize > 0, 'LlamaConfig');
  check(config.architecture === 'llama', 'LlamaConfig.architecture');
  check(config.layerKinds.every((kind) => kind === 'full') && config.layerHeadDims.every((d) => d === config.headDim) &&
    config.layerKvHeads.every((h) => h === config.numKvHeads) && config.layerOwners.every((o) => o === -1), 'LlamaConfig per layer');
  const memory: { weights: number; scratch: number; perLayerOutside: number } = llama.memoryBytes;
  check(memory.weights > 0 && memory.scratch >= 0 && memory.perLayerOutside === 0 && llama.tensors.has('token_embd.weight'), 'Llama.memoryBytes, tensors');
  check(!llama.readsRowsAsync, 'Llama.readsRowsAsync');
  // A model loaded without a projector takes no image.
  const projector: Projector | null = llama.projector;
  check(projector === null, 'Llama.projector');
  let refused = false;
  try {
    llama.imageTokenCount({ width: 64, height: 64 });
  } catch {
    refused = true;
  }
  check(refused, 'Llama.imageTokenCount without a projector');
  const prompt = llama.tokenizer.encode('Once upon a time');
  const cache = new KvCache({ numLayers: config.numLayers, numKvHeads: config.numKvHeads, headDim: config.headDim });
  const forward: ForwardOptions = { logits: 'all', importance: true };
  const logits: Float32Array = llama.forward(cache, prompt, forward);
  const last = llama.forward(cache, [prompt[1]], { logits: 'last' });
  const verified = llama.forward(cache, [prompt[2], prompt[3]], { logits: 2, verify: true });
  llama.keep(cache, 1);
  check(logits.length === prompt.length * config.vocabSize && last.length === config.vocabSize &&
    verified.length === 2 * config.vocabSize && cache.nextPosition === prompt.length + 2, 'forward');
  cache.free();

  const session: LlamaSession = llama.session({ mode: 'q8', maxRows: 200, sinks: 4, recent: 100 });
  check(session.llama === llama && session.mode === 'q8' && session.cache.numLayers === config.numLayers, 'LlamaSession');
  session.forward(prompt);
  const { logits: drafts, keep } = session.verify([prompt[1], prompt[2]]);
  keep(1);
  check(drafts.length === 2 * config.vocabSize, 'verify');
  session.free();

  const seen: number[] = [];
  const options: GenerateOptions = { steps: 40, draft: 4, minNgram: 2, temperature: 0.8, seed: 7, stopAtEos: false, onToken: (id) => seen.push(id) };
  const sampling = llama.session();
  const { tokens, stats } = generate(sampling, prompt, options);
  sampling.free();
  check(tokens.length === 40 && seen.length === 40, 'generate');

  const stepping = llama.session();
  const events = decode(stepping, prompt, { steps: 20, draft: 2 });
  let step = events.next();
  while (!step.done) {
    const event: DecodeEvent = step.value;
    if (event.type === 'token') check(Number.isInteger(event.token), 'a token event');
    else if (event.type === 'verify') check(event.drafts.length >= event.accepted, 'a verify event');
    else check(event.accepted >= 0 && event.rejected >= 0, 'an accept event');
    step = events.next();
  }
  check(step.value.tokens > 0 && step.value.seconds >= 0 && step.value.forwardPasses > 0, 'decode returns its statistics');
  stepping.free();
  return stats;
}

/** The text of a reply's pieces, and its last piece. */
async function collect(pieces: AsyncIterable<GeneratePiece>): Promise<{ text: string; last: GeneratePiece }> {
  let text = '';
  let last: GeneratePiece | null = null;
  for await (const piece of pieces) {
    text += piece.text;
    last = piece;
  }
  if (last === null) throw new Error('whole-api: a reply without pieces');
  return { text, last };
}

async function useGeneration(llama: Llama): Promise<void> {
  const sampling: SamplingOptions = { temperature: 0, topK: 40, topP: 0.95, minP: 0.05, repeatPenalty: 1.1, repeatLastN: 64, seed: 3 };
  const options: GenerateTextOptions = { ...sampling, maxTokens: 12, stop: ['\n\n'], context: 'stop', special: false };
  const sessionOptions: SessionOptions = { mode: 'f32', importance: true };
  const session: LlamaSession = llama.session(sessionOptions);
  const { text, last } = await collect(session.generate('Once upon a time', options));
  const stop: StopReason | null = last.stop;
  const stats: ReplyStats | null = last.stats;
  check(text.length > 0 && stop !== null && stats !== null && stats.stop === stop && session.tokens.length > 0, 'LlamaSession#generate');
  const controller = new AbortController();
  controller.abort();
  const aborted = await collect(session.generate(' and', { signal: controller.signal }));
  check(aborted.last.stop === 'abort', 'an aborted generate');
  const { reused, logits } = llama.session().prefill(llama.tokenizer.encode('Once'), { logits: true });
  check(reused === 0 && logits.length === llama.config.vocabSize, 'prefill with logits');
  const reply: ReplyOptions = { maxTokens: 4, temperature: 0, draft: 2, minNgram: 2 };
  const responded = await collect(session.respond(session.tokens, reply));
  check(responded.last.stats !== null && session.pending !== undefined, 'LlamaSession#respond');
  const full = session.cache.rows;
  check(slideCache(session.cache, 0, full + 1) === 1 && session.cache.rows === full, 'slideCache with room changes nothing');
  const saved: Uint8Array = session.save();
  const fork: LlamaSession = session.clone();
  check(fork.tokens.join() === session.tokens.join() && fork.cache.rows === session.cache.rows, 'LlamaSession#clone');
  fork.free();
  const restored = llama.restoreSession(saved, { maxRows: 0 });
  check(restored.tokens.join() === session.tokens.join() && restored.cache.rows === session.cache.rows, 'restoreSession');
  restored.free();
  session.free();

  const chatOptions: ChatOptions = { system: 'A story.', template: PLAIN_TEMPLATE };
  const chat = new Chat(llama.session(), chatOptions);
  const answer = await collect(chat.send('Once upon a time', { maxTokens: 8, temperature: 0 }));
  const messages: ChatMessage[] = chat.messages;
  check(messages.length === 3 && messages[2].content === answer.text && chat.session instanceof LlamaSession, 'Chat#send');
  const again: Chat = await Chat.restore(llama, await chat.save());
  check(again.messages.length === 3, 'Chat.restore');
  await again.free();
  await chat.free();
  const render: ChatRenderOptions = { addGenerationPrompt: false };
  const template = new ChatTemplate('{{ bos_token }}{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}', { bosToken: '<s>' });
  check(template.render([{ role: 'user', content: 'hi' }], render) === '<s>user: hi\n' && template.source.length > 0, 'ChatTemplate');
  expectThrow(() => new ChatTemplate('{% if %}'), ChatTemplateError, 'a template that does not parse');
  expectThrow(() => ChatTemplate.fromTokenizer(llama.tokenizer), ChatTemplateError, 'a vocabulary without a template');
}

/** The worker's API as an app in a browser writes it: type-checked, never called here (Node has no Worker). */
export async function useWorker(source: RemoteModelSource, signal: AbortSignal): Promise<string> {
  const options: LlamaWorkerOptions = { init: { threads: 2 } };
  const worker = new LlamaWorker(options);
  const { kernelInfo: kernel, threadInfo: threads } = await worker.ready();
  const model: RemoteLlama = await worker.load(source, { onProgress: ({ loaded }) => loaded, signal, contextLength: 1024 });
  const tokenizer: RemoteTokenizer = model.tokenizer;
  const prefixCache: RemotePrefixCache = await worker.prefixCache({ budgetBytes: 2 ** 24 });
  const sessionOptions: RemoteSessionOptions = { prefixCache, maxRows: 512 };
  const session: RemoteSession = await model.session(sessionOptions);
  const chat = new Chat(session, { system: 'You are concise.' });
  const { text } = await collect(chat.send('Hello!', { signal, maxTokens: 32 }));
  const stats = await session.cacheStats();
  const ids = await model.encode(text, { bos: false });
  // A model with its projector: an image's positions, and the image prepared in the worker.
  const seeing: RemoteLlama = await worker.load(source, { projector: source, signal });
  const count: ImageTokenCount = await seeing.imageTokenCount({ width: 640, height: 480 });
  const picture: PreparedImage = await seeing.prepareImage(new Blob([]), { decodeImage: () => ({ width: 1, height: 1, data: new Uint8Array(4) }) });
  const seen = `${seeing.projector?.config.type} ${count.total} ${picture.tokens.length}`;
  await seeing.free();
  const fork: RemoteSession = await session.clone();
  await fork.free();
  const restored = await model.restoreSession(await session.save());
  const more = await collect(restored.generate(await restored.tokens(), { maxTokens: 4 }));
  await restored.free();
  await chat.free();
  await prefixCache.free();
  await model.free();
  worker.terminate();
  return `${kernel.isa} ${threads.threads} ${tokenizer.vocabSize} ${stats.rows} ${ids.length} ${(await model.memoryBytes()).weights} ${more.text} ${seen}`;
}

/** The Prompt API over a loaded model, as code written for the web platform's LanguageModel uses it. */
async function usePromptApi(llama: Llama): Promise<void> {
  const LanguageModel: LanguageModelStatic = defineLanguageModel({ model: llama, maxTokens: 8 });
  const availability: Availability = await LanguageModel.availability({ expectedInputs: [{ type: 'text', languages: ['en'] }] });
  const initialPrompts: LanguageModelMessage[] = [{ role: 'system', content: 'Once upon a time' }];
  const session: LanguageModel = await LanguageModel.create({ initialPrompts, samplingMode: 'most-predictable', monitor: (m) => m.addEventListener('downloadprogress', () => {}) });
  const reply = await session.prompt('there was a dog');
  let streamed = '';
  const copy = await session.clone();
  for await (const chunk of copy.promptStreaming('there was a cat')) streamed += chunk;
  await session.append([{ role: 'user', content: [{ type: 'text', value: 'The end.' }] }]);
  const usage = await session.measureContextUsage('More');
  check(availability === 'available' && reply.length > 0 && streamed.length > 0 && usage > 0 && session.contextUsage <= session.contextWindow, 'LanguageModel');
  session.destroy();
  copy.destroy();
  check(typeof installLanguageModel === 'function' && (await LanguageModel.params()).maxTopK > 0, 'installLanguageModel, params');
}

/** The AI SDK provider's model, called as the `ai` package calls it (doGenerate), without the package. */
async function useAiSdk(llama: Llama): Promise<void> {
  const provider: KvcacheProvider = createKvcache({ models: { stories: llama } });
  const model: KvcacheLanguageModel = provider('stories');
  const call: LanguageModelCallOptions = { prompt: [{ role: 'user', content: [{ type: 'text', text: 'Once upon a time' }] }], maxOutputTokens: 4, temperature: 0 };
  const result = await model.doGenerate(call);
  check(model.specificationVersion === 'v4' && kvcache(llama).provider === 'kvcache-wasm' && Array.isArray(result.content), 'KvcacheLanguageModel#doGenerate');
}

/** Runs every part; the llama parts need a model's GGUF bytes. Returns what ran. */
export async function useWholeApi(model: Uint8Array | null): Promise<string[]> {
  await useInit();
  const random = seededRandom(5);
  check(promptLookup([1, 2, 3, 1, 2], 2).join() === '3,1' && promptLookup([1, 2], 2, 3, 2).length === 0, 'promptLookup');
  useAttentionHead(random);
  useFullLayer(random);
  useLinearLayer(random);
  useKvCache(random);
  useTokenizer();
  const ran = ['init', 'attentionHead', 'LayerKvCache (full)', 'LayerKvCache (linear)', 'KvCache', 'Tokenizer'];
  if (model) {
    const llama = useGguf(model);
    const stats = useLlama(llama);
    await useGeneration(llama);
    await usePromptApi(llama);
    await useAiSdk(llama);
    await useLoad(model);
    check(stats.tokens === 40 && stats.forwardPasses > 0 && stats.drafted >= stats.accepted &&
      stats.verifies >= stats.rollbacks && stats.seconds >= 0, 'GenerateStats');
    ran.push('GGUF', 'Llama', 'generation', 'Chat', 'LanguageModel', 'AI SDK');
  }
  await shutdown();
  check(threadCount() === 1, 'shutdown');
  ran.push('shutdown');
  return ran;
}
