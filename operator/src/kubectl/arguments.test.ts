import { describe, expect, it } from 'vitest';
import { defaultTailLines, parsePluginArguments } from './arguments.ts';
import { PluginError } from './plugin-error.ts';

function usageFailure(argv: string[]): string {
  try {
    parsePluginArguments(argv);
  } catch (error) {
    expect(error).toBeInstanceOf(PluginError);
    expect((error as PluginError).exitCode).toBe(2);
    return (error as PluginError).message;
  }
  throw new Error(`${argv.join(' ')} was accepted`);
}

describe('the plugin command line', () => {
  it('reads kubectl-style flags in any place', () => {
    const parsed = parsePluginArguments([
      'status',
      'orders',
      '-n',
      'shop',
      '--context',
      'prod',
      '-o',
      'yaml',
    ]);
    expect(parsed).toEqual({
      help: false,
      arguments: expect.objectContaining({
        command: 'status',
        mirror: 'orders',
        namespace: 'shop',
        context: 'prod',
        output: 'yaml',
        allNamespaces: false,
      }),
    });
  });

  it('defaults: table output, the tail by command', () => {
    const logs = parsePluginArguments(['logs', 'orders']);
    const report = parsePluginArguments(['report']);
    expect(logs.help === false && logs.arguments.output).toBe('table');
    expect(logs.help === false && logs.arguments.tailLines).toBe(defaultTailLines.logs);
    expect(report.help === false && report.arguments.tailLines).toBe(defaultTailLines.report);
    expect(report.help === false && report.arguments.mirror).toBeUndefined();
  });

  it('is help without a command, with help or -h', () => {
    for (const argv of [[], ['help'], ['list', '-h']])
      expect(parsePluginArguments(argv)).toEqual({ help: true });
  });

  it('refuses what does not fit, with the usage exit code', () => {
    expect(usageFailure(['frobnicate'])).toMatch(/unknown command "frobnicate"/);
    expect(usageFailure(['status'])).toBe('status needs a mirror name');
    expect(usageFailure(['list', 'orders'])).toBe('unexpected argument "orders"');
    expect(usageFailure(['list', '-o', 'xml'])).toBe('-o: one of table, json, yaml');
    expect(usageFailure(['pause', 'orders', '-o', 'json'])).toBe('-o applies to list and status only');
    expect(usageFailure(['status', 'orders', '-A'])).toBe('-A applies to list only');
    expect(usageFailure(['list', '-A', '-n', 'shop'])).toBe('-A and -n exclude each other');
    expect(usageFailure(['logs', 'orders', '--tail', '0'])).toBe('--tail: a whole number ≥ 1');
    expect(usageFailure(['status', 'orders', '--bogus'])).toMatch(/Unknown option '--bogus'/);
  });
});
