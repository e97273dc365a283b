// A pool worker script that fails as it loads (tests/js/threads.test.mjs):
// what a page whose worker script cannot load, or a runtime that refuses it,
// gives the loader.
throw new Error('this worker script fails on purpose');
