// The queue both tokenizers merge from: a binary heap whose top is the entry
// `before` puts first, so that merging a word of n symbols costs O(n log n)
// rather than a scan of every pair per merge.

export class MergeQueue {
  /** @param {(a: any, b: any) => boolean} before whether a comes out ahead of b */
  constructor(before) {
    this.before = before;
    this.items = [];
  }

  get size() {
    return this.items.length;
  }

  push(item) {
    const { items, before } = this;
    let at = items.length;
    items.push(item);
    while (at > 0) {
      const parent = (at - 1) >> 1;
      if (!before(item, items[parent])) break;
      items[at] = items[parent];
      at = parent;
    }
    items[at] = item;
  }

  pop() {
    const { items, before } = this;
    const top = items[0];
    const last = items.pop();
    const n = items.length;
    if (n > 0) {
      let at = 0;
      for (;;) {
        let child = 2 * at + 1;
        if (child >= n) break;
        if (child + 1 < n && before(items[child + 1], items[child])) child++;
        if (!before(items[child], last)) break;
        items[at] = items[child];
        at = child;
      }
      items[at] = last;
    }
    return top;
  }
}
