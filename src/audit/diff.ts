import { isoTime } from "../wire/time";
import type { DiffResponse, EventRecord } from "./model";

type Created = DiffResponse["created"][number];
type Updated = DiffResponse["updated"][number];
type Deleted = DiffResponse["deleted"][number];
type Replaced = DiffResponse["replaced"][number];

const iso = isoTime;

/**
 * Folds events (oldest first) into the net change per memory between the first and last event:
 * each memory id appears at most once across created, updated and deleted; a memory created and
 * deleted inside the window is left out; a replacement shows only in `replaced`, even when the memory it
 * replaced was added inside the window (a chain A→B→C inside the window shows as one A→C item).
 * UPDATE (an edit) counts like MERGE when it changed the content and is left out otherwise; a
 * memory deleted by an erasure shows in `deleted` with content null. Pure: no storage, no model.
 */
export function summarizeDiff(events: EventRecord[]): Omit<DiffResponse, "since" | "hasMore" | "nextSince"> {
  const created = new Map<string, Created>();
  const updated = new Map<string, Updated>();
  const deleted = new Map<string, Deleted>();
  /** Keyed by the id of the memory that was current before the window (the chain's start). */
  const replaced = new Map<string, Replaced>();
  /** newId -> key of its item in `replaced`, while the replacement is the chain's current end. */
  const replacementOf = new Map<string, string>();
  /** Chain starts that were themselves added inside the window. */
  const bornInWindow = new Set<string>();

  const gone = (id: string, content: string | null, e: EventRecord) => {
    // An erased memory is reported gone without any content: the client forgets its copy.
    const erased = e.reason === "erased";
    if (created.delete(id)) return; // born and gone inside the window: no net change
    const prev = updated.get(id);
    updated.delete(id);
    const chain = replacementOf.get(id);
    if (chain !== undefined) {
      // The replacement itself is gone: what the client last knew (the chain's start) is gone.
      replacementOf.delete(id);
      const item = replaced.get(chain)!;
      replaced.delete(chain);
      if (bornInWindow.has(chain)) return;
      deleted.set(chain, {
        id: chain,
        content: erased ? null : item.oldContent,
        category: e.category,
        deletedAt: iso(e.atMs),
        reason: e.reason,
      });
      return;
    }
    deleted.set(id, {
      id,
      content: erased ? null : (prev?.previousContent ?? content),
      category: e.category,
      deletedAt: iso(e.atMs),
      reason: e.reason,
    });
  };

  for (const e of events) {
    const id = e.memoryId;
    switch (e.event) {
      case "ADD": {
        // A memory deleted in the window and brought back (a revert or restore: same id): its net
        // change is the content it came back with, if it differs.
        const gone = deleted.get(id);
        if (gone) {
          deleted.delete(id);
          const content = e.newContent ?? "";
          if (gone.content !== null && gone.content !== content)
            updated.set(id, {
              id,
              content,
              previousContent: gone.content,
              category: e.category,
              updatedAt: iso(e.atMs),
            });
          break;
        }
        created.set(id, { id, content: e.newContent ?? "", category: e.category, createdAt: iso(e.atMs) });
        break;
      }
      case "UPDATE":
      // An edit shows as a content change only when the content changed; other fields only in events.
      // falls through
      case "MERGE": {
        const c = created.get(id);
        const chain = replacementOf.get(id);
        const u = updated.get(id);
        // An item already holding this memory shows its latest category, whatever else changed.
        if (c) c.category = e.category;
        else if (chain !== undefined) replaced.get(chain)!.category = e.category;
        else if (u) u.category = e.category;
        if (e.event === "UPDATE" && e.oldContent === e.newContent) break;
        const content = e.newContent ?? "";
        if (c) c.content = content;
        else if (chain !== undefined) replaced.get(chain)!.newContent = content;
        else {
          if (u) Object.assign(u, { content, updatedAt: iso(e.atMs) });
          else
            updated.set(id, {
              id,
              content,
              previousContent: e.oldContent ?? "",
              category: e.category,
              updatedAt: iso(e.atMs),
            });
        }
        break;
      }
      case "REPLACE": {
        const oldId = e.mergedFromId;
        if (!oldId) {
          created.set(id, { id, content: e.newContent ?? "", category: e.category, createdAt: iso(e.atMs) });
          break;
        }
        const item: Replaced = {
          oldId,
          oldContent: e.oldContent ?? "",
          newId: id,
          newContent: e.newContent ?? "",
          category: e.category,
          reason: e.reason ?? "contradiction",
          replacedAt: iso(e.atMs),
        };
        const chain = replacementOf.get(oldId);
        if (chain !== undefined) {
          replacementOf.delete(oldId);
          Object.assign(replaced.get(chain)!, {
            newId: id,
            newContent: item.newContent,
            category: item.category,
            reason: item.reason,
            replacedAt: item.replacedAt,
          });
          replacementOf.set(id, chain);
          break;
        }
        // The old memory leaves created/updated: its net change is "replaced".
        if (created.delete(oldId)) bornInWindow.add(oldId);
        const u = updated.get(oldId);
        updated.delete(oldId);
        if (u) item.oldContent = u.previousContent;
        replaced.set(oldId, item);
        replacementOf.set(id, oldId);
        break;
      }
      case "DELETE":
        gone(id, e.oldContent, e);
        break;
      // SKIP_DUPLICATE and KEEP_EXISTING change nothing; they only count toward `limit`.
    }
  }

  const out = {
    created: [...created.values()],
    // Changed and changed back inside the window: no net change.
    updated: [...updated.values()].filter((u) => u.content !== u.previousContent),
    deleted: [...deleted.values()],
    replaced: [...replaced.values()],
  };
  const changeCount = out.created.length + out.updated.length + out.deleted.length + out.replaced.length;
  return {
    ...out,
    changeCount,
    summary: `${out.created.length} new, ${out.updated.length} updated, ${out.replaced.length} replaced`,
  };
}
