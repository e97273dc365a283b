// kvcache-wasm/chat: a conversation with a model, rendered by its chat
// template (chat/); completions(session): the same, OpenAI-shaped; embeddings(model):
// OpenAI's embeddings.create over an embedding model.
//
//   const chat = new Chat(llama.session({ prefixCache }), { system: 'You are concise.' });
//   for await (const piece of chat.send('Hello!', { signal })) output.textContent += piece.text;
export { Chat, PLAIN_TEMPLATE } from './chat/chat.js';
export { ChatTemplate, ChatTemplateError } from './chat/template.js';
export { completions } from './chat/completions.js';
export { embeddings } from './chat/embeddings.js';
