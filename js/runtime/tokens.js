// Token sequences: what a session and a conversation share.

/** A session's tokens: a LlamaSession's property, a RemoteSession's method (a promise). */
export async function sessionTokens(session) {
  return typeof session.tokens === 'function' ? session.tokens() : session.tokens;
}

/** The length of the longest common prefix of two token arrays. */
export function commonPrefix(a, b) {
  let n = 0;
  while (n < a.length && n < b.length && a[n] === b[n]) n++;
  return n;
}
