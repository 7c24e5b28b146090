// What of a conversation the built-in extractor keeps: the user's turns, without role prefixes,
// greetings or acknowledgements. mem0 extracts facts from the user's messages; without a model
// memd does the same by the speaker's label and a list of small-talk phrases. No model, no I/O.

/** A role label at the start of a line ("user: …", "Assistant: …"), and the side it speaks for. */
const ROLE_LINE = /^\s*(user|human|me|assistant|ai|bot|model|system|developer|tool|function)\s*:\s?/i;
const SIDE: Record<string, "user" | "assistant" | "other"> = {
  user: "user",
  human: "user",
  me: "user",
  assistant: "assistant",
  ai: "assistant",
  bot: "assistant",
  model: "assistant",
  system: "other",
  developer: "other",
  tool: "other",
  function: "other",
};

export type Turn = { side: "user" | "assistant" | "other"; text: string };

/**
 * The content as turns. A line that starts with a role label opens a turn of that side, the label
 * dropped; a line without one continues the turn before it. Text before the first label (or
 * content without any) is the user's: whoever stores plain text states it.
 */
export function turnsOf(content: string): Turn[] {
  const turns: Turn[] = [];
  for (const line of content.split(/\r?\n/)) {
    const m = ROLE_LINE.exec(line);
    if (m) turns.push({ side: SIDE[m[1]!.toLowerCase()]!, text: line.slice(m[0].length) });
    else if (turns.length === 0) turns.push({ side: "user", text: line });
    else turns.at(-1)!.text += `\n${line}`;
  }
  return turns;
}

/**
 * The text the built-in extractor reads: the user's turns, joined by lines. A conversation with no
 * user turn is an agent's own notes: its assistant turns are kept instead. System, developer and
 * tool turns are never kept.
 */
export function statementsOf(content: string): string {
  const turns = turnsOf(content);
  const side = turns.some((t) => t.side === "user" && /\p{L}/u.test(t.text)) ? "user" : "assistant";
  return turns
    .filter((t) => t.side === side)
    .map((t) => t.text)
    .join("\n");
}

// Greetings, thanks, acknowledgements and reactions: a sentence made only of these states nothing.
// Within an alternative the longer phrase comes first, so that it is the one taken.
const SMALL_TALK = [
  "good (?:morning|afternoon|evening|night|day)",
  "(?:hi|hello|hey|hiya|howdy|greetings)(?: there| again| everyone| all| folks)?",
  "(?:how are you|how are things|how's it going|how is it going|what's up|sup)(?: doing)?(?: today)?",
  "(?:nice|glad|pleased|good) to (?:meet|see|hear from) you",
  "(?:many |big )?thank(?:s| you)(?: (?:so|very) much| a lot| a ton| again| for (?:that|this|the (?:help|info|tip|answer)))*",
  "thx|ty|tysm|cheers|bye|goodbye|see (?:you|ya)(?: later| soon)?|take care|talk (?:to you )?(?:later|soon)",
  "(?:you'?re|you are) welcome|no (?:problem|worries)|not at all|my pleasure|anytime|of course",
  "ok(?:ay)?|k|kk|alright|all right|sure(?: thing)?|fine|yes|yeah|yep|yup|no|nope|nah",
  "got it|sounds (?:good|great)|makes sense|i see|understood|noted|will do|that'?s (?:it|all|great|nice|good|cool|fine)",
  "(?:(?:very|so|really) )?(?:nice|great|cool|awesome|perfect|wonderful|lovely|excellent|amazing|brilliant|fantastic|neat|sweet|good|interesting)(?: one| job| work| to hear(?: that)?| to know)?",
  "wow|oh|ah|aha|hmm+|um+|uh+|haha+|lol|yay|oops|indeed|right|exactly|absolutely|definitely|totally|please",
].join("|");
const PHRASE = `(?:${SMALL_TALK})`;
/** A small-talk phrase closed by punctuation or by the end: "Hi there, …", "Nice!", "ok". */
const LEAD = new RegExp(`^${PHRASE}(?:\\s*[,.!?;:…~—–-]+\\s*|\\s*$)`, "iu");
/** Nothing but small-talk phrases, closed by punctuation or not: "ok thanks", "oh nice". */
const ONLY = new RegExp(`^${PHRASE}(?:[\\s,.!?;:…~—–-]+${PHRASE})*[\\p{P}\\s]*$`, "iu");
/** A greeting or thanks to someone by name, and nothing else: "Hi Sam!", "Thanks Bob." */
const TO_A_NAME = new RegExp(`^${PHRASE}\\s+([\\p{L}'-]+)[\\p{P}\\s]*$`, "iu");

/**
 * A sentence without the greetings and acknowledgements it starts with ("Hi there, I'm Marcus." →
 * "I'm Marcus."), or "" when nothing else is left ("Nice!", "Thanks, Bob!"). A phrase is taken
 * only when punctuation or the end follows it, so "Fine wine is my hobby." stays whole.
 */
export function withoutSmallTalk(sentence: string): string {
  let rest = sentence.trim();
  // Small talk is short; the bound keeps a long run of phrases from costing quadratic time.
  if (rest.length <= 200 && ONLY.test(rest)) return "";
  for (let m = LEAD.exec(rest); m; m = LEAD.exec(rest)) rest = rest.slice(m[0].length);
  if (!/\p{L}/u.test(rest) || /^\p{Lu}/u.test(TO_A_NAME.exec(rest)?.[1] ?? "")) return "";
  // What is left of "Thanks, Bob!" is a name alone.
  if (rest !== sentence.trim() && !/\s/.test(rest.replace(/[\p{P}\s]+$/u, ""))) return "";
  return rest;
}
