// What an API credential may do. Three roles, each allowed what the one before
// it is and more (docs/security.md, "Roles"):
// - read: every list, status, log, batch, script and metric; changes nothing;
// - operate: read, and pause, resume or retry a mirror and resync one of its tables;
// - admin: everything, creating, editing and dropping mirrors, peers and scripts
//   included. The API password (the interface's Basic credential) is admin.

export const roles = ['read', 'operate', 'admin'] as const;
export type Role = (typeof roles)[number];

export function isRole(value: string): value is Role {
  return (roles as readonly string[]).includes(value);
}

/** Whether a credential of role `held` may make a request that needs `needed`. */
export function roleAllows(held: Role, needed: Role): boolean {
  return roles.indexOf(held) >= roles.indexOf(needed);
}
