import { describe, expect, it } from 'vitest';
import { Acknowledgements } from './acknowledgements.ts';

function recorded() {
  const acknowledged: bigint[] = [];
  return { acknowledged, acknowledgements: new Acknowledgements((lsn) => acknowledged.push(lsn)) };
}

describe('Acknowledgements', () => {
  it('acknowledges a position at rest at once while no batch is in flight', () => {
    const { acknowledged, acknowledgements } = recorded();
    acknowledgements.atRest(100n);
    acknowledgements.atRest(200n);
    expect(acknowledged).toEqual([100n, 200n]);
  });

  it('holds positions at rest back while a batch is in flight, then acknowledges the batch and the furthest', () => {
    const { acknowledged, acknowledgements } = recorded();
    acknowledgements.writeStarted();
    acknowledgements.atRest(300n);
    acknowledgements.atRest(500n);
    acknowledgements.atRest(400n);
    expect(acknowledged).toEqual([]);
    acknowledgements.durable(250n);
    expect(acknowledged).toEqual([250n, 500n]);
    // Back to direct: the next position at rest goes at once.
    acknowledgements.atRest(600n);
    expect(acknowledged).toEqual([250n, 500n, 600n]);
  });

  it('acknowledges only the batch when nothing waited for it', () => {
    const { acknowledged, acknowledgements } = recorded();
    acknowledgements.writeStarted();
    acknowledgements.durable(250n);
    expect(acknowledged).toEqual([250n]);
  });

  it('acknowledges nothing more after a write that never became durable', () => {
    const { acknowledged, acknowledgements } = recorded();
    acknowledgements.writeStarted();
    // The write failed: the writer never calls durable.
    acknowledgements.atRest(300n);
    acknowledgements.atRest(400n);
    expect(acknowledged).toEqual([]);
  });
});
