// Prints vitest's JSON report as one plain closing line ("tests: N passed, N failed,
// N skipped") that CI tooling reads in any language, and fails when no test ran.
// With a second argument, the leftover report of test/support/global-setup.ts:
// processes tests left running are counted on a line of their own, so a leak is
// seen in every run's closing lines (the teardown stopped them already).
import { existsSync, readFileSync } from 'node:fs';

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
console.log(`tests: ${report.numPassedTests} passed, ${report.numFailedTests} failed, ${skipped} skipped`);
if (report.numFailedTests > 0 || report.numPassedTests === 0) process.exit(1);
