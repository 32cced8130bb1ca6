#!/usr/bin/env node
// The entry point for any Node: checks the version first (in a file every Node
// can parse), starts Node again when the role needs V8 flags (node-flags.js),
// then loads the TypeScript entry point. `node bin/tributary.ts` works as well
// on a recent enough Node; on an older one only this file can say why the
// program cannot run.
import { restartWithRoleFlags } from './node-flags.js';
import { exitUnlessNodeIsRecentEnough } from './node-version.js';

exitUnlessNodeIsRecentEnough();
// Before anything else is loaded: what is loaded now would be loaded twice.
restartWithRoleFlags(process.argv[2]);
import('./tributary.ts').then((entry) => entry.run(process.argv.slice(2)));
