/**
 * H2Connection, sending: streams waiting for the connection window all get it back. A regression fixture for the
 * bug the proxy hit under 100 concurrent streams (i22-wire): when the window ran out part-way through the list of
 * blocked streams, the streams after that point were dropped from it and their queued DATA never left.
 */
import { expect, test } from "bun:test";
import { H2Connection } from "../../../src/core/http2/connection.ts";
import { FRAME } from "../../../src/core/http2/frames.ts";
import { frame, headersFrame, hpack, parseFrames, PREFACE, requestFields, settingsFrame } from "../../helpers/h2-frames.ts";

const windowUpdate = (stream: number, inc: number) => {
  const b = Buffer.alloc(4);
  b.writeUInt32BE(inc);
  return frame(FRAME.WINDOW_UPDATE, 0, stream, b);
};

test("every stream blocked on the connection window sends its DATA (and END_STREAM) once the window is back", () => {
  const out: Buffer[] = [];
  const writable: number[] = [];
  const c = new H2Connection("server", {
    write: (b) => out.push(Buffer.from(b)),
    headers: () => {},
    data: () => {},
    reset: () => {},
    writable: (id) => writable.push(id),
    goaway: () => {},
    closed: () => {},
  });
  const ids = [1, 3, 5, 7];
  c.feed(Buffer.concat([PREFACE, settingsFrame(), ...ids.map((id) => headersFrame(id, hpack(requestFields(`/s${id}`))))]));
  const body = new Uint8Array(40000).fill(97);
  // the peer's connection window is 65,535: stream 1 sends all of it, stream 3 part of it, 5 and 7 nothing
  const sent = ids.map((id) => {
    c.sendHeaders(id, [":status", "200"], false);
    return c.sendData(id, body, true);
  });
  expect(sent).toEqual([true, false, false, false]);
  c.flush();
  // a little window: stream 3 takes it and the connection runs out again before 5 and 7
  c.feed(windowUpdate(0, 10000));
  c.flush();
  // then plenty
  c.feed(windowUpdate(0, 1 << 20));
  c.flush();
  const frames = parseFrames(Buffer.concat(out)).filter((f) => f.type === FRAME.DATA);
  for (const id of ids) {
    const mine = frames.filter((f) => f.stream === id);
    expect({ id, bytes: mine.reduce((n, f) => n + f.payload.length, 0) }).toEqual({ id, bytes: 40000 });
    expect(mine.at(-1)!.flags & 1).toBe(1); // END_STREAM
  }
  expect(writable.sort()).toEqual([3, 5, 7]);
});
