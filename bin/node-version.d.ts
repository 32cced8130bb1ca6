// Types of node-version.js, which stays plain JavaScript so old Node can parse it.
export declare const requiredNode: { readonly major: number; readonly minor: number };
export declare const nodeTooOldExitCode: number;
export declare function nodeIsRecentEnough(version: string): boolean;
export declare function nodeTooOldMessage(version: string): string;
export declare function exitUnlessNodeIsRecentEnough(): void;
