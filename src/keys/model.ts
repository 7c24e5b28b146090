import { t } from "elysia";
import { limits } from "../config/limits";
import { KeyRecord, permissions, type Permission as StoredPermission } from "../storage/records";
import { NoControlText } from "../wire/schemas";

/** Each permission includes the ones before it. Persisted as these strings (the list: storage/records.ts). */
export const Permission = KeyRecord.properties.permission;
export type Permission = StoredPermission;
export type { KeyRecord } from "../storage/records";
export { permissions };

/** `*` (all), an exact namespace, or a prefix pattern ending in `/*` such as `team-a/*` (see service.patternProblem). */
export const NamespacePattern = NoControlText(1, limits.nameChars + 2);

export const ApiKey = t.Object({
  id: t.String(),
  name: t.String(),
  permission: Permission,
  namespaces: t.Array(t.String()),
  expiresAt: t.Nullable(t.String({ format: "date-time" })),
  createdAt: t.String({ format: "date-time" }),
  lastUsedAt: t.Nullable(t.String({ format: "date-time" })),
});
export type ApiKey = typeof ApiKey.static;

export const CreateKeyRequest = t.Object(
  {
    name: NoControlText(1, limits.nameChars),
    permission: Permission,
    namespaces: t.Array(NamespacePattern, { minItems: 1, maxItems: 256 }),
    expiresAt: t.Optional(t.String({ maxLength: 64, description: "ISO 8601, in the future" })),
  },
  { additionalProperties: false },
);
export type CreateKeyRequest = typeof CreateKeyRequest.static;

export const CreatedKey = t.Composite([ApiKey, t.Object({ secret: t.String() })]);

export const KeyParams = t.Object({ id: t.String({ minLength: 1, maxLength: 64 }) });
