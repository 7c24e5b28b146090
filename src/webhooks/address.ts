// Where a webhook may be sent: the addresses refused unless the operator allows private ones
// (--webhook-allow-private), and the one look-up whose answer is then connected to.
import { lookup } from "node:dns/promises";
import { isIP } from "node:net";

/** IPv4 ranges that are not the public internet: [first octets as a number, prefix bits, what]. */
const v4Blocked: [string, number, string][] = [
  ["0.0.0.0", 8, "this network"],
  ["10.0.0.0", 8, "private"],
  ["100.64.0.0", 10, "shared (carrier NAT)"],
  ["127.0.0.0", 8, "loopback"],
  ["169.254.0.0", 16, "link-local (cloud metadata)"],
  ["172.16.0.0", 12, "private"],
  ["192.0.0.0", 24, "IETF protocol assignments"],
  ["192.168.0.0", 16, "private"],
  ["198.18.0.0", 15, "benchmarking"],
  ["224.0.0.0", 4, "multicast"],
  ["240.0.0.0", 4, "reserved"],
];

const v4Number = (ip: string) => ip.split(".").reduce((n, part) => n * 256 + Number(part), 0);

function v4Problem(ip: string): string | undefined {
  const n = v4Number(ip);
  for (const [base, bits, what] of v4Blocked) {
    const size = 2 ** (32 - bits);
    const start = v4Number(base);
    if (n >= start && n < start + size) return what;
  }
  return undefined;
}

/** The 8 groups of an IPv6 address as numbers (an embedded IPv4 tail included). */
function v6Groups(ip: string): number[] {
  let text = ip.toLowerCase().split("%")[0];
  const tail = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (tail) {
    const n = v4Number(tail[1]);
    text = `${text.slice(0, -tail[1].length)}${(n >>> 16).toString(16)}:${(n & 0xffff).toString(16)}`;
  }
  const [head, rest] = text.split("::");
  const a = head ? head.split(":") : [];
  const b = rest !== undefined && rest !== "" ? rest.split(":") : [];
  const fill = rest === undefined ? [] : Array(8 - a.length - b.length).fill("0");
  return [...a, ...fill, ...b].map((g) => Number.parseInt(g, 16));
}

function v6Problem(ip: string): string | undefined {
  const g = v6Groups(ip);
  const v4 = (hi: number, lo: number) => `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`;
  if (g.every((x) => x === 0)) return "unspecified";
  if (g.slice(0, 7).every((x) => x === 0) && g[7] === 1) return "loopback";
  // IPv4-mapped (::ffff:a.b.c.d), IPv4-compatible (::a.b.c.d) and NAT64 (64:ff9b::a.b.c.d): the IPv4 inside decides.
  if (g.slice(0, 5).every((x) => x === 0) && (g[5] === 0xffff || g[5] === 0)) return v4Problem(v4(g[6], g[7]));
  if (g[0] === 0x64 && g[1] === 0xff9b && g.slice(2, 6).every((x) => x === 0)) return v4Problem(v4(g[6], g[7]));
  if ((g[0] & 0xfe00) === 0xfc00) return "unique local (private)";
  if ((g[0] & 0xffc0) === 0xfe80) return "link-local";
  if ((g[0] & 0xffc0) === 0xfec0) return "site-local";
  if ((g[0] & 0xff00) === 0xff00) return "multicast";
  return undefined;
}

/** Why an IP address is not a public one (loopback, private, link-local, metadata, ...), or undefined. */
export function addressProblem(ip: string): string | undefined {
  const family = isIP(ip);
  if (family === 4) return v4Problem(ip);
  if (family === 6) return v6Problem(ip);
  return "not an IP address";
}

/** A URL's host without IPv6 brackets. */
export const hostOf = (url: URL) => url.hostname.replace(/^\[(.*)\]$/, "$1");

/**
 * The address to connect to for `url`'s host: the host itself when it is an IP, else the first
 * address the resolver gives. Unless `allowPrivate`, an address that is not public is refused
 * (thrown with the reason): the check is on the address connected to, not only on the name.
 */
export async function resolveTarget(url: URL, allowPrivate: boolean): Promise<{ address: string; family: number }> {
  // An IP address as the host: the same answer every time (a name is looked up at each call).
  const key = `${allowPrivate ? "+" : "-"}${url.hostname}`;
  const known = literal.get(key);
  if (known) return known;
  const host = hostOf(url);
  let address = host;
  let family = isIP(host);
  if (family === 0) {
    const found = await lookup(host, { all: false });
    address = found.address;
    family = found.family;
  }
  if (!allowPrivate) {
    const problem = addressProblem(address);
    if (problem)
      throw new AddressRefused(
        `${host === address ? address : `${host} resolves to ${address}`}, a ${problem} address; ` +
          "private addresses need --webhook-allow-private (MEMD_WEBHOOK_ALLOW_PRIVATE=1)",
      );
  }
  const target = { address, family };
  if (address === host) {
    if (literal.size >= 1000) literal.clear();
    literal.set(key, target);
  }
  return target;
}

/** Checked targets of hosts that are IP addresses, by whether private ones are allowed and the host. */
const literal = new Map<string, { address: string; family: number }>();

/** A webhook URL whose address is not public, while private ones are not allowed. */
export class AddressRefused extends Error {}
