// Prints vitest's JSON report as one plain closing line ("tests: N passed, N failed,
// N skipped") that CI tooling reads in any language, and fails when no test ran.
// With a second argument, the leftover report of test/support/global-setup.ts:
// processes tests left running are counted on a line of their own, so a leak is
// seen in every run's closing lines (the teardown stopped them already).
// Children that overstayed their bound (test/support/bounded-child.ts) are
// printed too, with what they were doing, even when a second run passed.
import { existsSync, readFileSync } from 'node:fs';
import { overstayLog } from '../test/support/bounded-child.ts';

interface VitestJsonReport {
  numPassedTests: number;
  numFailedTests: number;
  numPendingTests: number;
  numTodoTests: number;
}

const [reportPath, leftoverReportPath] = process.argv.slice(2);
if (!reportPath) {
  console.error('usage: test-summary.ts <vitest-json-report>');
  process.exit(2);
}
const report = JSON.parse(readFileSync(reportPath, 'utf8')) as VitestJsonReport;
const skipped = report.numPendingTests + report.numTodoTests;
if (leftoverReportPath && existsSync(leftoverReportPath)) {
  const leftovers = JSON.parse(readFileSync(leftoverReportPath, 'utf8')) as unknown[];
  if (leftovers.length > 0)
    console.log(
      `leftover processes: ${leftovers.length} left running by tests, stopped by the global teardown`,
    );
}
if (existsSync(overstayLog)) {
  const overstays = readFileSync(overstayLog, 'utf8');
  // Bounded: a few backtraces are what matter, not the whole of a long log.
  const limit = 20_000;
  console.log(
    `children that overstayed their bound (${overstayLog}):\n${overstays.length > limit ? `${overstays.slice(0, limit)}\n[cut at ${limit} characters]` : overstays}`,
  );
}
console.log(`tests: ${report.numPassedTests} passed, ${report.numFailedTests} failed, ${skipped} skipped`);
if (report.numFailedTests > 0 || report.numPassedTests === 0) process.exit(1);
