// Properties of the console's form body parsing over generated bodies
// (docs/security.md, "Fuzzing"): what a browser, or anyone, posts to the
// console's forms. The facade's answers to posted forms are fuzzed in
// http/app.fuzz.test.ts.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { fuzzParameters } from '../../../test/support/fuzz.ts';
import { parseFormBody } from './routes.ts';

/** Form text: names, values, separators and percent-escapes good and bad. */
const formText = fc.oneof(
  fc.string({ unit: 'binary', maxLength: 60 }),
  fc
    .array(
      fc.constantFrom(
        'a',
        '=',
        '&',
        '+',
        '%',
        '%2',
        '%41',
        '%FF',
        '%C3%A9',
        '%E2%82',
        '__proto__',
        'constructor',
        'action',
        'pause',
        ';',
        '\u0000',
        'é',
      ),
      { maxLength: 30 },
    )
    .map((parts) => parts.join('')),
);
/** Field names and values as a form may hold them: any well-formed text. */
const fieldText = fc.string({ unit: 'binary', maxLength: 12 });

describe('console form bodies, generated text', () => {
  it('reads any body as string fields, own properties only, without touching Object.prototype (3000 cases)', () => {
    fc.assert(
      fc.property(formText, (body) => {
        const fields = parseFormBody(body);
        expect(Object.getPrototypeOf(fields)).toBe(Object.prototype);
        for (const [name, value] of Object.entries(fields)) {
          expect(Object.hasOwn(fields, name)).toBe(true);
          expect(typeof value).toBe('string');
        }
        expect(Object.keys(fields).length).toBeLessThanOrEqual(body.split('&').length);
        expect(({} as Record<string, unknown>).polluted).toBeUndefined();
      }),
      fuzzParameters(3000, [['__proto__=x&__proto__[polluted]=1&constructor=y']]),
    );
  });

  it('gives back the fields a browser encoded, the last of a repeated name kept (2000 cases)', () => {
    fc.assert(
      fc.property(
        fc.array(fc.tuple(fc.oneof(fieldText, fc.constantFrom('__proto__', 'action')), fieldText), {
          maxLength: 6,
        }),
        (entries) => {
          // URLSearchParams writes application/x-www-form-urlencoded as browsers do (spaces as '+').
          const body = new URLSearchParams(entries).toString();
          const expected: Record<string, string> = {};
          for (const [name, value] of entries)
            Object.defineProperty(expected, name, {
              value,
              enumerable: true,
              writable: true,
              configurable: true,
            });
          expect(parseFormBody(body)).toEqual(expected);
        },
      ),
      fuzzParameters(2000),
    );
  });
});
