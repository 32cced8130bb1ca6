// The ceiling the source sets for any CDC into any destination: a slot's
// backlog read by a consumer that does nothing with it. The engine's own
// change stream (Source.openStream) decodes every message and nothing is
// written anywhere, so the walsender's decoding, the socket and the decode are
// all that run. A CDC system cannot move rows faster than this on the same
// machine; a figure against a destination's floor above this ceiling's is out
// of any CDC system's reach there.
//
// The stream rests its socket a few milliseconds whenever its reader has
// taken all it read (replication-stream.ts), so the walsender's messages go
// out in large writes: the cheapest way to read it that was measured
// (docs/benchmarks.md, "The walsender's CPU follows how its stream is read").
import { createSource } from '../../engine/src/connectors/registry.ts';
import type { TestDatabase } from '../../test/support/databases.ts';

/** Reads `rowCount` inserts from `slotName`, decoding each and nothing else; returns seconds. */
export async function drainDecodeOnly(
  source: TestDatabase,
  slotName: string,
  publicationName: string,
  rowCount: number,
): Promise<number> {
  const connector = createSource({ kind: 'relational', config: source.config }, { mirror: slotName });
  const stream = await connector.openStream({ slotName, publicationName, startLsn: 0n });
  try {
    const started = performance.now();
    let inserts = 0;
    for await (const events of stream.events()) {
      for (const event of events) {
        if (event.tag === 'change' && event.message.tag === 'insert') inserts++;
      }
      if (inserts >= rowCount) break;
    }
    return (performance.now() - started) / 1000;
  } finally {
    await stream.close();
    await connector.close();
  }
}
