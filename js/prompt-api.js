// kvcache-wasm/prompt-api: the web platform's Prompt API (LanguageModel)
// over this package's runner, in every browser, in workers and in Node.
//
//   const LanguageModel = defineLanguageModel({ model: 'models/stories260k.gguf' });
//   const session = await LanguageModel.create({ initialPrompts: [{ role: 'system', content: 'Be brief.' }] });
//   console.log(await session.prompt('Hello!'));
import { defineLanguageModel } from './prompt-api/language-model.js';

export { defineLanguageModel };
export { polyfillBackend } from './prompt-api/polyfill-backend.js';

/**
 * defineLanguageModel(options) installed as globalThis.LanguageModel, so
 * that code written for the Prompt API runs unchanged -- only where there
 * is none (a browser's own stays, unless options.replace is true).
 * Returns the class installed, or the one that was there.
 */
export function installLanguageModel(options = {}) {
  const { replace = false, ...rest } = options ?? {};
  if (typeof replace !== 'boolean') throw new TypeError(`installLanguageModel: options.replace must be a boolean (got ${typeof replace})`);
  if (globalThis.LanguageModel && !replace) return globalThis.LanguageModel;
  const LanguageModel = defineLanguageModel(rest);
  Object.defineProperty(globalThis, 'LanguageModel', { value: LanguageModel, writable: true, configurable: true, enumerable: false });
  return LanguageModel;
}
