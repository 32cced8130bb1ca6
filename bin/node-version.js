// The Node version check, in plain JavaScript that Node versions far older than
// the one we need can still parse: the TypeScript entry point cannot be loaded by
// a Node without type stripping, so this file must run first (bin/tributary.js).
// Keep this file free of TypeScript and of syntax newer than ES2017.

/** The first Node with type stripping on by default and `import.meta.main` (22.18) plus fixes. */
export var requiredNode = { major: 22, minor: 19 };

/** Exit code when Node is too old (2 is a usage error, 1 a failed run). */
export var nodeTooOldExitCode = 3;

export function nodeIsRecentEnough(version) {
  var parts = String(version).split('.');
  var major = Number(parts[0]);
  var minor = Number(parts[1]);
  return major > requiredNode.major || (major === requiredNode.major && minor >= requiredNode.minor);
}

export function nodeTooOldMessage(version) {
  return (
    'tributary needs Node.js >= ' +
    requiredNode.major +
    '.' +
    requiredNode.minor +
    ' (it runs its TypeScript sources directly); this is Node.js ' +
    version +
    '.\n' +
    'Run it through make (make start), which uses scripts/ensure-node.sh to fetch Node 24 into\n' +
    '~/.cache/tributary, or put Node 24 first in PATH: PATH=$(scripts/ensure-node.sh):$PATH\n'
  );
}

/** Exits with a message when this Node cannot run the program; returns otherwise. */
export function exitUnlessNodeIsRecentEnough() {
  var version = process.versions.node;
  if (nodeIsRecentEnough(version)) return;
  process.stderr.write(nodeTooOldMessage(version));
  process.exit(nodeTooOldExitCode);
}
