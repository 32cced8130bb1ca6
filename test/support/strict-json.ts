// JSON.parse keeps the last of two equal keys without a word; log pipelines such
// as Loki or Elasticsearch refuse or mangle such lines. This parser follows the
// JSON grammar (RFC 8259) and throws on a key repeated within one object.

export class DuplicateKeyError extends Error {}

export function parseStrictJson(text: string): unknown {
  let position = 0;
  const fail = (what: string): never => {
    throw new SyntaxError(`${what} at ${position} in ${text.slice(0, 200)}`);
  };
  const skipWhitespace = () => {
    while (position < text.length && ' \t\n\r'.includes(text[position] ?? '')) position++;
  };
  const parseString = (): string => {
    const start = position;
    position++; // opening quote
    while (position < text.length && text[position] !== '"') position += text[position] === '\\' ? 2 : 1;
    if (text[position] !== '"') fail('unterminated string');
    position++;
    return JSON.parse(text.slice(start, position)) as string;
  };
  const parseValue = (): unknown => {
    skipWhitespace();
    const char = text[position];
    if (char === '{') {
      position++;
      const object: Record<string, unknown> = {};
      const keys = new Set<string>();
      skipWhitespace();
      if (text[position] === '}') {
        position++;
        return object;
      }
      for (;;) {
        skipWhitespace();
        if (text[position] !== '"') fail('expected a key');
        const key = parseString();
        if (keys.has(key)) throw new DuplicateKeyError(`key ${JSON.stringify(key)} twice in ${text}`);
        keys.add(key);
        skipWhitespace();
        if (text[position] !== ':') fail('expected :');
        position++;
        object[key] = parseValue();
        skipWhitespace();
        if (text[position] === ',') {
          position++;
          continue;
        }
        if (text[position] === '}') {
          position++;
          return object;
        }
        fail('expected , or }');
      }
    }
    if (char === '[') {
      position++;
      const array: unknown[] = [];
      skipWhitespace();
      if (text[position] === ']') {
        position++;
        return array;
      }
      for (;;) {
        array.push(parseValue());
        skipWhitespace();
        if (text[position] === ',') {
          position++;
          continue;
        }
        if (text[position] === ']') {
          position++;
          return array;
        }
        fail('expected , or ]');
      }
    }
    if (char === '"') return parseString();
    const literal = /^(?:true|false|null|-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?)/.exec(
      text.slice(position),
    );
    if (!literal) return fail('unexpected character');
    position += literal[0].length;
    return JSON.parse(literal[0]);
  };
  const value = parseValue();
  skipWhitespace();
  if (position !== text.length) fail('trailing characters');
  return value;
}
