// The API group and version of Peer, Mirror and Script, apart from their
// schemas: the kubectl plugin (operator/src/kubectl/) needs the names without
// loading the schemas, which load the whole engine.
export const group = 'tributary.dev';
export const version = 'v1alpha1';
