// Run by engine/src/pipeline/stream-wait.test.ts in a process of its own (`node --expose-gc`),
// where nothing but this script holds promises: which of the reads taken
// while one write stayed pending are still alive after a collection. Prints a
// JSON array of booleans, oldest read first.
import { StreamWait } from '../../engine/src/pipeline/stream-wait.ts';

const collect = (globalThis as { gc?: () => void }).gc;
if (!collect) throw new Error('run with --expose-gc');
const resolvers: ((value: { readonly events: number[] }) => void)[] = [];
const wait = new StreamWait(
  () => new Promise<{ readonly events: number[] }>((resolve) => resolvers.push(resolve)),
  new AbortController().signal,
);
const writing = new Promise<void>(() => {});
const taken: WeakRef<object>[] = [];
for (let index = 0; index < 20; index++) {
  const next = wait.next(60_000, writing);
  resolvers.shift()?.({ events: new Array(10_000).fill(index) });
  const result = await next;
  if (typeof result === 'string') throw new Error(`woke for ${result}`);
  taken.push(new WeakRef(result));
}
await new Promise((resolve) => setTimeout(resolve, 0));
collect();
console.log(JSON.stringify(taken.map((ref) => ref.deref() !== undefined)));
