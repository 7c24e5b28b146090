import { expect, test } from "bun:test";
test("placeholder until the shutdown test lands", () => expect(1).toBe(1));
