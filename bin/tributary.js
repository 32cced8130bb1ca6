#!/usr/bin/env node
// The entry point for any Node: checks the version first (in a file every Node
// can parse), then loads the TypeScript entry point. `node bin/tributary.ts`
// works as well on a recent enough Node; on an older one only this file can say
// why the program cannot run.
import { exitUnlessNodeIsRecentEnough } from './node-version.js';

exitUnlessNodeIsRecentEnough();
import('./tributary.ts').then((entry) => entry.run(process.argv.slice(2)));
