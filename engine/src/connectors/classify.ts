// Kept so that existing imports of this path compile: the classifier lives in
// classify/ (one file per driver, classify/index.ts its entry point).
export * from './classify/index.ts';
