import type { Core } from "../core";
import type { Deliverer } from "./deliverer";
import { trailFilter, trailItems } from "./service";

/** Lag is counted over at most this many events per subscription (a scrape stays cheap). */
const lagCountLimit = 10_000;

const label = (id: string) => `{webhook="${id}"}`;

/**
 * The webhook figures in Prometheus text, per subscription: attempts delivered and failed by this
 * process, and the lag: matching events not yet delivered (counted up to 10,000) and the age of
 * the oldest of them, in seconds.
 */
export async function webhookMetrics(core: Pick<Core, "storage">, deliverer: Deliverer | undefined): Promise<string> {
  const hooks = await core.storage.listWebhooks();
  const counts = deliverer?.counts();
  const delivered: string[] = [];
  const failed: string[] = [];
  const lagEvents: string[] = [];
  const lagSeconds: string[] = [];
  const now = Date.now();
  for (const w of hooks) {
    const c = counts?.get(w.id);
    delivered.push(`memd_webhook_delivered_total${label(w.id)} ${c?.delivered ?? 0}`);
    failed.push(`memd_webhook_failed_total${label(w.id)} ${c?.failed ?? 0}`);
    const items = trailItems(await core.storage.trailAfter(w.cursor, trailFilter(w), lagCountLimit));
    lagEvents.push(`memd_webhook_lag_events${label(w.id)} ${items.length}`);
    lagSeconds.push(
      `memd_webhook_lag_seconds${label(w.id)} ${items.length ? Math.max(0, (now - items[0].atMs) / 1000) : 0}`,
    );
  }
  const block = (name: string, help: string, type: string, lines: string[]) =>
    [`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`, ...lines].join("\n");
  return [
    block("memd_webhook_delivered_total", "Webhook deliveries answered 2xx, by this process.", "counter", delivered),
    block("memd_webhook_failed_total", "Webhook delivery attempts that failed, by this process.", "counter", failed),
    block("memd_webhook_lag_events", "Matching events not yet delivered (counted up to 10,000).", "gauge", lagEvents),
    block("memd_webhook_lag_seconds", "Age of the oldest matching event not yet delivered.", "gauge", lagSeconds),
  ].join("\n");
}
