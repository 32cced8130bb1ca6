// Identifier quoting for SQL we build. Values always travel as bind parameters;
// names (tables, columns, slots, publications) cannot, so they go through here.
import pg from 'pg';
import type { TableName } from '../../../resources/mirror.ts';

export const quoteIdent = pg.escapeIdentifier;
export const quoteLiteral = pg.escapeLiteral;

export function quoteTable(name: TableName): string {
  return `${quoteIdent(name.schema)}.${quoteIdent(name.table)}`;
}
