import { describe, expect, test } from "bun:test";
import { DeadlineList } from "../../../src/core/proxy/deadlines.ts";

/** Polls until `f` holds (no sleep as synchronisation). */
async function until(f: () => boolean, ms = 5000): Promise<void> {
  const end = Date.now() + ms;
  while (!f()) {
    if (Date.now() > end) throw new Error("timed out");
    await new Promise((r) => setTimeout(r, 5));
  }
}

describe("DeadlineList: many deadlines of one length behind one timer", () => {
  test("fires in order, never a cancelled one, and empties", async () => {
    const list = new DeadlineList(40);
    const fired: number[] = [];
    const ds = [0, 1, 2, 3, 4].map((i) => list.add(() => fired.push(i)));
    list.cancel(ds[1]!);
    list.cancel(ds[0]!); // the oldest: the timer stays armed for it and re-arms for the next
    list.cancel(ds[4]!); // the newest
    expect(list.size).toBe(2);
    await until(() => fired.length === 2);
    expect(fired).toEqual([2, 3]);
    expect(list.size).toBe(0);
    list.cancel(ds[2]!); // fired already: a no-op
    expect(list.size).toBe(0);
  });

  test("not before its time; added later, fires later; a deadline added from a firing one is kept", async () => {
    let t = 0;
    const list = new DeadlineList(20, () => t);
    const fired: string[] = [];
    list.add(() => {
      fired.push("a");
      list.add(() => fired.push("c"));
    });
    t = 10;
    list.add(() => fired.push("b"));
    // the real timer fires (and re-arms) meanwhile, but the clock says not yet: nothing fires
    await new Promise((r) => setTimeout(r, 80));
    expect(fired).toEqual([]);
    t = 20;
    await until(() => fired.length >= 1);
    expect(fired).toEqual(["a"]);
    t = 30;
    await until(() => fired.length >= 2);
    expect(fired).toEqual(["a", "b"]);
    t = 40;
    await until(() => fired.length >= 3);
    expect(fired).toEqual(["a", "b", "c"]);
    expect(list.size).toBe(0);
  });

  test("cancelling every deadline stops the timer (nothing keeps firing)", () => {
    const list = new DeadlineList(60_000);
    const ds = Array.from({ length: 1000 }, () => list.add(() => {}));
    for (const d of ds) list.cancel(d);
    expect(list.size).toBe(0);
    expect((list as unknown as { timer: unknown }).timer).toBeNull();
  });
});
