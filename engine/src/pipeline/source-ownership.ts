// Decides which slot and publication a mirror uses and whether they are its
// own. A slot or publication the mirror did not create may be somebody else's
// (Debezium, another installation, another mirror): the mirror never reads,
// advances, ends the reader of, or drops it unless the spec says to adopt it.

import type { SourceSetup } from '../catalog/catalog.ts';
import type { Destination } from '../connectors/destination.ts';
import type { DestinationTable } from '../connectors/records.ts';
import type { SlotRow, Source } from '../connectors/source.ts';
import { EngineError } from '../errors.ts';
import { formatLsn, parseLsn } from '../model/lsn.ts';
import type { MirrorSpec } from '../resources/mirror.ts';
import { formatTableName } from '../resources/mirror.ts';

const adoptHint = 'set adopt_existing_slot (spec adoptExistingSlot) to let this mirror use it';

function foreignSlot(slotName: string, mirror: string): EngineError {
  return new EngineError(
    'config',
    `replication slot ${slotName} already exists and was not created by mirror ${mirror}; it was left untouched: set replication_slot_name to another name, or ${adoptHint}`,
  );
}

/**
 * The setup a mirror's first run records: names from the spec or the
 * installation's defaults, and who created what. Refuses a slot or a
 * default-named publication that already exists unless the spec adopts it.
 */
export async function planSourceSetup(
  source: Source,
  spec: MirrorSpec,
  installationId: string,
): Promise<SourceSetup> {
  const defaults = source.defaultNames(spec.name, installationId);
  const slotName = spec.replicationSlotName ?? defaults.slotName;
  const publicationName = spec.publicationName ?? defaults.publicationName;
  const existingSlot = await source.readSlot(slotName);
  if (existingSlot && !spec.adoptExistingSlot) throw foreignSlot(slotName, spec.name);
  let publicationCreatedByMirror = false;
  if (spec.publicationName === undefined) {
    const existing = await source.publicationExists(publicationName);
    if (existing && !spec.adoptExistingSlot) {
      throw new EngineError(
        'config',
        `publication ${publicationName} already exists and was not created by mirror ${spec.name}; it was left untouched: set publication_name to a publication of the mirror's tables, or ${adoptHint}`,
      );
    }
    publicationCreatedByMirror = !existing;
  }
  return {
    slotName,
    publicationName,
    publicationCreatedByMirror,
    slotCreatedByMirror: existingSlot === undefined,
    slotIdentity: null,
  };
}

/**
 * Checks that the slot of a recorded setup is still the one the mirror created
 * (or adopted): a slot dropped and re-created under its name by someone else
 * lives in another database, uses another plugin, or starts before the
 * mirror's own slot did. Returns the slot (undefined when it is gone).
 */
export async function checkSlotIdentity(
  source: Source,
  mirror: string,
  setup: SourceSetup,
): Promise<SlotRow | undefined> {
  const slot = await source.readSlot(setup.slotName);
  const identity = setup.slotIdentity;
  if (!slot || !identity) return slot;
  const database = await source.database();
  const differs =
    slot.database !== identity.database ||
    slot.database !== database ||
    slot.plugin !== identity.plugin ||
    // A slot never moves back: one behind the recorded start is another slot.
    (slot.confirmedFlushLsn !== null && slot.confirmedFlushLsn < parseLsn(identity.createdAtLsn));
  if (differs) {
    throw new EngineError(
      'config',
      `replication slot ${setup.slotName} is not the slot mirror ${mirror} created (database, plugin or start position differ); it was left untouched: drop the mirror and create it again with another replication_slot_name, or find who re-created the slot`,
    );
  }
  return slot;
}

export function slotIdentityOf(
  database: string,
  consistentPoint: bigint,
): NonNullable<SourceSetup['slotIdentity']> {
  return { database, plugin: 'pgoutput', createdAtLsn: formatLsn(consistentPoint) };
}

/**
 * Refuses to empty destination tables that held rows before the mirror: only
 * tables it owns (created, or found empty and loaded), or any table on a
 * resync, may be emptied. Returns the tables to record as owned.
 */
export async function claimDestinationTables(
  destination: Destination,
  spec: MirrorSpec,
  tables: readonly DestinationTable[],
  owned: ReadonlySet<string>,
): Promise<string[]> {
  const states = await destination.tableStates(tables);
  const refused: string[] = [];
  tables.forEach((table, index) => {
    const name = formatTableName(table.destination);
    if (states[index] === 'populated' && !owned.has(name) && !spec.resync) refused.push(name);
  });
  if (refused.length > 0) {
    throw new EngineError(
      'config',
      `destination table(s) ${refused.join(', ')} already hold rows and were not created by mirror ${spec.name}; the initial load would empty them, so nothing was written: empty them, map the mirror to new tables, or create the mirror with resync to replace their rows`,
    );
  }
  return tables.map((table) => formatTableName(table.destination));
}
