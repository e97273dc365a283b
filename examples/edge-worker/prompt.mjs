// What every conversation of the edge worker starts from, and how long its
// replies are (the tests read these too).

/** The shared system prompt: its first 256 tokens. */
export const SYSTEM_TEXT =
  'Once upon a time, in a small town by the sea, there lived a kind old man named Tom. Tom had a little boat ' +
  'and a big red dog named Max. Every morning, Tom and Max went out on the boat to catch fish. The sun was ' +
  'warm and the water was blue. One day, Tom saw a little bird on the water. The bird was sad because it ' +
  'could not fly. Tom picked up the bird and put it in his boat. Max wagged his tail and barked. The bird was ' +
  'happy. Tom took the bird home and gave it some food and water. The next day, the bird could fly again. It ' +
  'flew around the boat and sang a happy song. Tom and Max were very happy too. From that day on, the bird ' +
  'came to see them every morning. They were the best of friends.';
export const SYSTEM_TOKENS = 256;
/** Tokens in each reply. */
export const REPLY_TOKENS = 32;
