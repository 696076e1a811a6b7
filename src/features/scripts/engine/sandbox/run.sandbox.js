// Sandbox prelude, part 7 of 7: one run's state, pm, console, timers, pm.sendRequest, and the three entry points the
// worker calls: start(fn, inputJson), tick() and deliver(op, resultJson) (see runner.ts for the loop around them).

const MAX_SEND_REQUESTS = 100;
const EVENT_NAMES = { request: "prerequest", response: "test", test: "test" };

/** The run in progress (one at a time per worker); globals such as console and setTimeout act on it. */
let current = null;

/**
 * The host's input, parsed part by part on first use (a script that never reads the response or a scope never pays
 * for parsing it). The text is the parts' JSON joined by "\n", which JSON.stringify never writes (output.ts):
 * head { phase, memoryBytes, info, iterationData? }, request, response, variables, environment,
 * collectionVariables, globals.
 */
const INPUT_PARTS = { request: 1, response: 2, variables: 3, environment: 4, collectionVariables: 5, globals: 6 };
const UNPARSED = {};

class RunInput {
  // Plain fields (no script reaches a RunInput: pm keeps its run's state in a private field), cheaper than private
  // ones in QuickJS; the text is cut into parts only as they are asked for.
  constructor(text) {
    this.text = text;
    /** Where each part starts in text (filled up to the part asked for), and the parts parsed so far. */
    this.starts = [0];
    this.values = [UNPARSED, UNPARSED, UNPARSED, UNPARSED, UNPARSED, UNPARSED, UNPARSED];
    this.head = null;
  }

  part(i) {
    let v = this.values[i];
    if (v === UNPARSED) {
      const text = this.text;
      const starts = this.starts;
      while (starts.length <= i + 1 && starts[starts.length - 1] <= text.length) {
        const nl = text.indexOf("\n", starts[starts.length - 1]);
        starts.push(nl < 0 ? text.length + 1 : nl + 1);
      }
      const from = starts[i];
      v = this.values[i] = from === undefined || from > text.length ? undefined : jsonParse(text.slice(from, starts[i + 1] - 1));
    }
    return v;
  }

  headPart() {
    if (!this.head) {
      const h = this.part(0);
      this.head = isObject(h) ? h : {};
      if (!isObject(this.head.info)) this.head.info = {};
    }
    return this.head;
  }

  get phase() {
    return this.headPart().phase;
  }

  get memoryBytes() {
    return this.headPart().memoryBytes;
  }

  get info() {
    return this.headPart().info;
  }

  get iterationData() {
    return this.headPart().iterationData;
  }

  get request() {
    return this.part(INPUT_PARTS.request);
  }

  get response() {
    return this.part(INPUT_PARTS.response);
  }

  /** A variable scope by name (variables, environment, collectionVariables, globals). */
  scope(name) {
    return this.part(INPUT_PARTS[name]);
  }
}

class RunState {
  constructor(input) {
    this.input = input;
    this.console = [];
    this.droppedLines = 0;
    this.tests = [];
    this.errors = [];
    this.settled = false;
    this.oom = false;
    /** setTimeout/setInterval timers and pm.sendRequest calls pending: Maps made on first use. */
    this.timers = null;
    this.nextTimerId = 1;
    this.sends = null;
    this.sendCount = 0;
    this.requestView = null;
    this.responseView = undefined;
    this.scopes = {};
    this.cookieList = null;
    this.pm = null;
    this.testFn = null;
    this.sendFn = null;
  }

  /**
   * Drops what the run built (the views and pm hold this state, and it holds them): the cycles would otherwise stay
   * until QuickJS's cycle collector, whose pass walks the whole heap (chai, the prelude), runs.
   */
  release() {
    this.pm = null;
    this.requestView = null;
    this.responseView = undefined;
    this.scopes = {};
    this.cookieList = null;
    this.testFn = null;
    this.sendFn = null;
  }

  /** Records a thrown error (an uncaught throw, a rejected await, a throwing callback). */
  fail(e) {
    if (isOutOfMemory(e)) {
      this.oom = true;
      this.errors.push([`Script ran out of memory (limit ${Math.round(this.input.memoryBytes / 1048576)} MB)`, null, null]);
      return;
    }
    const stack = isObject(e) ? scriptFrames(e.stack) : null;
    this.errors.push([describeThrown(e), stack, lineOf(stack)]);
  }

  log(level, args) {
    if (this.console.length >= MAX_CONSOLE_LINES) {
      this.droppedLines++;
      return;
    }
    this.console.push([level, formatArgs(args), dateNow()]);
  }

  request() {
    return this.requestView || (this.requestView = new RequestView(this.input.request, () => host.body("request")));
  }

  response() {
    if (this.responseView === undefined) {
      this.responseView = this.input.response ? new ResponseView(this.input.response, () => host.body("response")) : null;
    }
    return this.responseView || undefined;
  }

  scope(name) {
    const s = this.scopes;
    if (s[name]) return s[name];
    const input = this.input;
    switch (name) {
      case "environment":
        return (s.environment = new EnvironmentScope(input.scope("environment"), input.info.environmentName || ""));
      case "iterationData":
        return (s.iterationData = new VariableScope(input.iterationData, true));
      case "variables":
        return (s.variables = new ResolvedVariables(input.scope("variables"), [
          () => this.scope("iterationData"),
          () => this.scope("environment"),
          () => this.scope("collectionVariables"),
          () => this.scope("globals"),
        ]));
      default:
        return (s[name] = new VariableScope(input.scope(name), false));
    }
  }

  cookies() {
    if (!this.cookieList) {
      const res = this.response();
      this.cookieList = res ? res.cookies : CookieList.fromCookieHeader(this.request().headers.getAll("cookie"));
    }
    return this.cookieList;
  }
}

function activeRun(what) {
  if (!current) throw new ErrorCtor(`${what}: no script is running`);
  return current;
}

// ---- pm.test ----

function makeTest(state) {
  const pm = state.pm;
  function test(name, fn) {
    if (!isFunction(fn)) return pm;
    const t = { name: String(name), passed: true, error: null, pending: false };
    state.tests.push(t);
    const fail = (e) => {
      t.passed = false;
      t.error = testFailure(e);
      if (isOutOfMemory(e)) state.fail(e);
    };
    const settle = (e) => {
      if (!t.pending) return;
      t.pending = false;
      if (e !== undefined && e !== null) fail(e);
    };
    try {
      if (fn.length > 0) {
        // done-callback style: function (done) { ...; done(); } (done(err) fails the test)
        t.pending = true;
        fn.call(undefined, settle);
      } else {
        const r = fn.call(undefined);
        if (isObject(r) && isFunction(r.then)) {
          t.pending = true;
          promiseThen.call(promiseResolve(r), () => settle(undefined), (e) => settle(e === undefined || e === null ? new ErrorCtor("the test's promise was rejected") : e));
        }
      }
    } catch (e) {
      t.pending = false;
      fail(e);
    }
    return pm;
  }
  // pm.test.skip(name, fn): the test is neither run nor reported
  test.skip = () => pm;
  return objectFreeze(test);
}

// ---- pm.sendRequest ----

/** A pm.sendRequest argument (URL text or { url, method, header, body }) as the host's ScriptRequest. */
function outgoingRequest(req) {
  const r = typeof req === "string" || req instanceof Url ? { url: String(req) } : isObject(req) ? req : null;
  if (!r) throw new TypeError("pm.sendRequest needs a URL or a request object");
  const url = String(r.url instanceof Url ? r.url.toString() : isObject(r.url) && typeof r.url.raw === "string" ? r.url.raw : r.url || "").trim();
  if (!/^https?:\/\//i.test(url)) throw new TypeError(`pm.sendRequest: only http:// and https:// URLs can be sent (got '${url}')`);
  const headers = [];
  const h = r.header !== undefined ? r.header : r.headers;
  if (h instanceof PropertyList) headers.push(...h.all().map((i) => [String(i.key), bodyText(i.value)]));
  else if (isArray(h)) {
    for (const i of h) {
      if (typeof i === "string") for (const p of Header.parse(i)) headers.push([p.key, p.value]);
      else if (isObject(i) && i.key !== undefined && !i.disabled) headers.push([String(i.key), bodyText(i.value)]);
    }
  } else if (isObject(h)) for (const k of objectKeys(h)) headers.push([k, bodyText(h[k])]);
  else if (typeof h === "string") for (const p of Header.parse(h)) headers.push([p.key, p.value]);
  let body = "";
  const b = r.body;
  if (typeof b === "string") body = b;
  else if (isObject(b)) {
    const mode = b.mode === undefined ? "raw" : b.mode;
    if (mode === "raw") body = bodyText(b.raw);
    else if (mode === "urlencoded") {
      const list = b.urlencoded instanceof PropertyList ? b.urlencoded.all() : isArray(b.urlencoded) ? b.urlencoded : [];
      body = list.filter((p) => isObject(p) && !p.disabled).map((p) => `${encodeURIComponent(p.key)}=${encodeURIComponent(bodyText(p.value))}`).join("&");
      if (!headers.some((p) => p[0].toLowerCase() === "content-type")) headers.push(["Content-Type", "application/x-www-form-urlencoded"]);
    } else throw new TypeError(`pm.sendRequest: body mode '${mode}' is not supported (raw and urlencoded are)`);
  }
  return { method: String(r.method || "GET").toUpperCase(), url, headers, body };
}

function makeSendRequest(state) {
  return objectFreeze(function sendRequest(req, callback) {
    const cb = isFunction(callback) ? callback : null;
    let resolve, reject;
    const promise = cb ? null : new PromiseCtor((res, rej) => ((resolve = res), (reject = rej)));
    let op = -1;
    let error = null;
    try {
      if (state.sendCount >= MAX_SEND_REQUESTS) throw new ErrorCtor(`pm.sendRequest: at most ${MAX_SEND_REQUESTS} requests per run`);
      const outgoing = outgoingRequest(req);
      state.sendCount++;
      op = host.send(jsonStringify(outgoing));
    } catch (e) {
      error = e;
    }
    if (error) {
      // reported the way a failed request is: to the callback (asynchronously) or as a rejection
      if (cb) promiseThen.call(promiseResolve(undefined), () => callSendCallback(state, cb, error, undefined));
      else reject(error);
    } else (state.sends || (state.sends = new Map())).set(op, { cb, resolve, reject });
    return promise || undefined;
  });
}

function callSendCallback(state, cb, err, res) {
  try {
    const r = cb.call(undefined, err, res);
    if (isObject(r) && isFunction(r.then)) promiseThen.call(r, undefined, (e) => state.fail(e));
  } catch (e) {
    state.fail(e);
  }
}

// ---- pm ----

class Pm {
  #s;

  constructor(state) {
    this.#s = state;
  }

  get request() {
    return this.#s.request();
  }

  get response() {
    return this.#s.response();
  }

  get variables() {
    return this.#s.scope("variables");
  }

  get environment() {
    return this.#s.scope("environment");
  }

  get collectionVariables() {
    return this.#s.scope("collectionVariables");
  }

  get globals() {
    return this.#s.scope("globals");
  }

  get iterationData() {
    return this.#s.scope("iterationData");
  }

  get cookies() {
    return this.#s.cookies();
  }

  get info() {
    const info = this.#s.input.info;
    return objectFreeze({
      eventName: info.eventName || EVENT_NAMES[this.#s.input.phase] || "test",
      requestName: info.requestName || "",
      requestId: info.requestId || "",
      iteration: typeof info.iteration === "number" ? info.iteration : 0,
      iterationCount: typeof info.iterationCount === "number" ? info.iterationCount : 1,
    });
  }

  get expect() {
    return chai.expect;
  }

  get test() {
    const s = this.#s;
    return s.testFn || (s.testFn = makeTest(s));
  }

  get sendRequest() {
    const s = this.#s;
    return s.sendFn || (s.sendFn = makeSendRequest(s));
  }
}
objectFreeze(Pm.prototype);

// ---- globals: console, timers, atob/btoa ----

const sandboxConsole = objectFreeze({
  log: (...args) => activeRun("console.log").log("log", args),
  info: (...args) => activeRun("console.info").log("info", args),
  warn: (...args) => activeRun("console.warn").log("warn", args),
  error: (...args) => activeRun("console.error").log("error", args),
  debug: (...args) => activeRun("console.debug").log("log", args),
  trace: (...args) => activeRun("console.trace").log("log", args),
  clear: () => {},
});

function addTimer(name, fn, ms, args, repeat) {
  const s = activeRun(name);
  if (!isFunction(fn)) throw new TypeError(`${name} needs a function`);
  const delay = Math.max(0, Number(ms) || 0);
  const id = s.nextTimerId++;
  (s.timers || (s.timers = new Map())).set(id, { due: dateNow() + delay, fn, args, every: repeat ? Math.max(1, delay) : 0 });
  return id;
}

function clearTimer(id) {
  if (current && current.timers) current.timers.delete(Number(id));
}

const GLOBALS = {
  console: sandboxConsole,
  setTimeout: (fn, ms, ...args) => addTimer("setTimeout", fn, ms, args, false),
  setInterval: (fn, ms, ...args) => addTimer("setInterval", fn, ms, args, true),
  clearTimeout: clearTimer,
  clearInterval: clearTimer,
  atob,
  btoa,
};
for (const name of objectKeys(GLOBALS)) {
  defineProperty(globalThis, name, { value: GLOBALS[name], writable: false, enumerable: false, configurable: false });
}

// chai stays reachable through the prelude only (pm.expect), not as a global a script could change.
delete globalThis.chai;

// The global object and the prototypes scripts most often add to: enumerable additions (what `x = 1` without a
// declaration, `globalThis.x = 1` or `Object.prototype.y = 1` make) are removed after every run. Built-ins have no
// enumerable properties. The check: a for-in over globalThis, an array, a string and a function, whose prototype
// chains are these five objects, stops at the first enumerable key (~2 µs in all, half of Object.keys on each).
const CLEANED = [globalThis, Object.prototype, Array.prototype, String.prototype, Function.prototype];
const PROBES = [globalThis, [], "", function () {}];
const baseline = CLEANED.map((o) => objectKeys(o).length);
const probesWork = baseline.every((n) => n === 0);

function anyAddition() {
  if (!probesWork) return true;
  for (let i = 0; i < PROBES.length; i++) for (const _ in PROBES[i]) return true;
  return false;
}

function removeAdditions() {
  if (!anyAddition()) return;
  for (let i = 0; i < CLEANED.length; i++) {
    const o = CLEANED[i];
    const keys = objectKeys(o);
    if (keys.length === baseline[i]) continue;
    for (const k of keys) {
      try {
        delete o[k];
      } catch (_) {
        // non-configurable: stays
      }
    }
  }
}

// ---- entry points ----

/** Starts a run: fn is the compiled script, inputJson the host's input (without bodies). */
function start(fn, inputText) {
  const state = new RunState(new RunInput(inputText));
  current = state;
  state.pm = objectFreeze(new Pm(state));
  // fn is a plain function when the script has no `await` (runner.ts): no promise to wait for then, unless it
  // returns one (as an async function would adopt it).
  try {
    const result = fn.call(undefined, state.pm);
    if (isObject(result) && isFunction(result.then)) {
      promiseThen.call(
        promiseResolve(result),
        () => {
          state.settled = true;
        },
        (e) => {
          state.settled = true;
          state.fail(e);
        },
      );
    } else state.settled = true;
  } catch (e) {
    state.settled = true;
    state.fail(e);
  }
}

/**
 * Called after the worker ran the pending jobs. Answers text, always (the worker reads it without asking its type):
 * fires due timers (then answers "-2": run the jobs again); otherwise answers the delay in ms to the next timer,
 * "-1" when only pm.sendRequest answers are awaited, or, when nothing is left that could happen, the run's output
 * (JSON text of an object) — the run is over.
 */
function tick() {
  const s = current;
  if (s.timers && s.timers.size) {
    const now = dateNow();
    const due = [];
    for (const [id, t] of s.timers) if (t.due <= now) due.push([id, t]);
    if (due.length) {
      due.sort((a, b) => a[1].due - b[1].due || a[0] - b[0]);
      for (const [id, t] of due) {
        if (!s.timers.has(id)) continue; // cleared by an earlier callback
        if (t.every) t.due = now + t.every;
        else s.timers.delete(id);
        try {
          t.fn.apply(undefined, t.args);
        } catch (e) {
          s.fail(e);
        }
      }
      return "-2";
    }
    let next = Infinity;
    for (const t of s.timers.values()) next = Math.min(next, t.due - now);
    return String(Math.max(0, next));
  }
  if (s.sends && s.sends.size) return "-1";
  return finish(s);
}

/** A pm.sendRequest answer from the host: { ok: true, response } or { ok: false, error }. */
function deliver(op, resultJson) {
  const s = current;
  const pending = s && s.sends && s.sends.get(op);
  if (!pending) return;
  s.sends.delete(op);
  const r = jsonParse(resultJson);
  let res, err;
  if (r.ok) {
    const body = typeof r.response.body === "string" ? r.response.body : "";
    res = new ResponseView(r.response, () => body);
  } else err = new ErrorCtor(String(r.error));
  if (pending.cb) callSendCallback(s, pending.cb, err === undefined ? null : err, res);
  else if (err) pending.reject(err);
  else pending.resolve(res);
}

function finish(s) {
  if (!s.settled) {
    s.errors.push(["Script never finished: it awaits a promise that nothing can settle any more (no timer or pm.sendRequest is pending)", null, null]);
  }
  for (let i = 0; i < s.tests.length; i++) {
    const t = s.tests[i];
    if (!t.pending) continue;
    t.passed = false;
    t.error = "Test never finished: its promise never settled (or done() was never called)";
  }
  if (s.droppedLines) s.console.push(["warn", `… ${s.droppedLines} more console lines dropped (at most ${MAX_CONSOLE_LINES} per run)`, dateNow()]);
  current = null;
  removeAdditions();

  // Only what is there: empty lists are left out (each costs JSON.stringify a little).
  let out = null;
  const more = () => out || (out = {});
  if (s.console.length) more().console = s.console;
  if (s.tests.length) more().tests = s.tests.map((t) => [t.name, t.passed, t.error]);
  if (s.errors.length) more().errors = s.errors;
  if (s.oom) more().oom = true;
  if (s.requestView) {
    const changes = RequestView.changes(s.requestView);
    if (changes) more().request = changes;
  }
  if (s.responseView) {
    const changes = ResponseView.changes(s.responseView);
    if (changes) more().response = changes;
  }
  const scopes = s.scopes;
  if (scopes.variables && scopes.variables.touched) more().variables = scopes.variables.localObject();
  for (let i = 0; i < SCOPE_OUTPUTS.length; i++) {
    const name = SCOPE_OUTPUTS[i];
    if (scopes[name] && scopes[name].touched) more()[name] = scopes[name].toObject();
  }
  const text = out ? jsonStringify(out) : NOTHING_CHANGED;
  s.release();
  return text;
}

const SCOPE_OUTPUTS = ["environment", "collectionVariables", "globals"];
/** finish()'s output when the script logged, tested and changed nothing. */
const NOTHING_CHANGED = "{}";
