// Token sequences: what a session and a conversation share.

/** The length of the longest common prefix of two token arrays. */
export function commonPrefix(a, b) {
  let n = 0;
  while (n < a.length && n < b.length && a[n] === b[n]) n++;
  return n;
}
