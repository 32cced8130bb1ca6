// Prints vitest's JSON report as one plain closing line ("tests: N passed, N failed,
// N skipped") that CI tooling reads in any language, and fails when no test ran.
import { readFileSync } from 'node:fs';

interface VitestJsonReport {
  numPassedTests: number;
  numFailedTests: number;
  numPendingTests: number;
  numTodoTests: number;
}

const reportPath = process.argv[2];
if (!reportPath) {
  console.error('usage: test-summary.ts <vitest-json-report>');
  process.exit(2);
}
const report = JSON.parse(readFileSync(reportPath, 'utf8')) as VitestJsonReport;
const skipped = report.numPendingTests + report.numTodoTests;
console.log(`tests: ${report.numPassedTests} passed, ${report.numFailedTests} failed, ${skipped} skipped`);
if (report.numFailedTests > 0 || report.numPassedTests === 0) process.exit(1);
