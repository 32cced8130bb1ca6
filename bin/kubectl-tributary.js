#!/usr/bin/env node
// `kubectl tributary …`: kubectl runs an executable named kubectl-tributary
// found on PATH as its `tributary` plugin, with the arguments after the name.
// The same program as `tributary kubectl …` (operator/src/kubectl/main.ts); as
// bin/tributary.js, the Node version is checked first, in a file every Node
// can parse.
import { exitUnlessNodeIsRecentEnough } from './node-version.js';

exitUnlessNodeIsRecentEnough();
import('./tributary.ts').then((entry) => entry.run(['kubectl', ...process.argv.slice(2)]));
