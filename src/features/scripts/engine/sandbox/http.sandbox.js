// Sandbox prelude, part 5 of 7: pm.request and pm.response (and the responses pm.sendRequest hands a script).
// Parts are built on first use only: a script that never touches the body never copies it into QuickJS (bodies are
// fetched from the worker by host.body). What a script changed is read back by the static changes() helpers.

const samePairs = (a, b) => {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i][0] !== b[i][0] || a[i][1] !== b[i][1]) return false;
  return true;
};

const hasAnyKey = (o) => {
  for (const _ in o) return true;
  return false;
};

const bodyText = (v) => (typeof v === "string" ? v : v === undefined || v === null ? "" : isObject(v) ? jsonStringify(v) : String(v));

/** pm.request.body: always mode "raw" (tapwire sees bodies as text). */
class RequestBody {
  #load;
  #raw;
  #loaded = false;
  #changed = false;

  constructor(load) {
    this.#load = load;
  }

  get mode() {
    return "raw";
  }

  set mode(v) {
    if (v !== "raw") throw new TypeError(`only raw bodies are supported (mode '${v}')`);
  }

  get raw() {
    if (!this.#loaded) {
      this.#raw = this.#load();
      this.#loaded = true;
    }
    return this.#raw;
  }

  set raw(v) {
    this.#raw = bodyText(v);
    this.#loaded = true;
    this.#changed = true;
  }

  /** update("text") or update({ mode: "raw", raw: "text" }). */
  update(v) {
    if (isObject(v)) {
      if (v.mode !== undefined && v.mode !== "raw") throw new TypeError(`only raw bodies are supported (mode '${v.mode}')`);
      this.raw = v.raw;
    } else this.raw = v;
  }

  isEmpty() {
    return this.raw === "";
  }

  toString() {
    return this.raw;
  }

  toJSON() {
    return { mode: "raw", raw: this.raw };
  }

  /** The body text when the script set one, else undefined. */
  static outgoing(body) {
    return body.#changed ? body.#raw : undefined;
  }
}

/** pm.request. `method` is a plain property; url, headers and body are built on first use. */
class RequestView {
  #data;
  #loadBody;
  #url;
  #headers;
  #body;

  /** data: { method, url, headers } from the host; loadBody() answers the body text. */
  constructor(data, loadBody) {
    this.#data = data;
    this.#loadBody = loadBody;
    this.method = data.method;
  }

  get url() {
    return this.#url || (this.#url = new Url(this.#data.url));
  }

  set url(v) {
    this.#url = v instanceof Url ? v : new Url(v);
  }

  get headers() {
    return this.#headers || (this.#headers = new HeaderList(this.#data.headers));
  }

  set headers(v) {
    this.headers.repopulate(v instanceof PropertyList ? v.all() : v);
  }

  get body() {
    return this.#body || (this.#body = new RequestBody(this.#loadBody));
  }

  set body(v) {
    this.body.update(v);
  }

  addHeader(h) {
    this.headers.add(h);
  }

  removeHeader(name) {
    this.headers.remove(isObject(name) && !(name instanceof PropertyItem) ? name.key : name);
  }

  upsertHeader(h) {
    this.headers.upsert(h);
  }

  /** { name: value } (arrays for repeated names); { ignoreCase: true } lower-cases names, { enabled: true } skips disabled ones. */
  getHeaders(options) {
    const o = isObject(options) ? options : {};
    return this.headers.toObject(Boolean(o.enabled), !o.ignoreCase);
  }

  addQueryParams(params) {
    this.url.addQueryParams(params);
  }

  removeQueryParams(params) {
    this.url.removeQueryParams(params);
  }

  /** pm.request.to.have.header(...) */
  get to() {
    return chai.expect(this).to;
  }

  toJSON() {
    return { method: this.method, url: this.url.toString(), header: this.headers.toJSON(), body: this.body.toJSON() };
  }

  /** What the script changed: { method?, url?, headers?, body? }, or null when nothing. */
  static changes(view) {
    const d = view.#data;
    const out = {};
    if (view.method !== d.method) out.method = String(view.method);
    if (view.#url) {
      const url = view.#url.toString();
      if (url !== new Url(d.url).toString()) out.url = url;
    }
    if (view.#headers) {
      const pairs = view.#headers.toPairs();
      if (!samePairs(pairs, d.headers)) out.headers = pairs;
    }
    if (view.#body) {
      const body = RequestBody.outgoing(view.#body);
      if (body !== undefined) out.body = body;
    }
    return hasAnyKey(out) ? out : null;
  }
}

/** pm.response (and a pm.sendRequest response). code, status (the reason phrase), headers and body can be changed. */
class ResponseView {
  #data;
  #loadBody;
  #code;
  #reason;
  #headers;
  #body;
  #bodyLoaded = false;
  #bodySet = false;

  /** data: { status, statusText?, headers, responseTime? } from the host; loadBody() answers the body text. */
  constructor(data, loadBody) {
    this.#data = data;
    this.#loadBody = loadBody;
    this.#code = data.status;
    this.#reason = typeof data.statusText === "string" && data.statusText ? data.statusText : reasonFor(data.status);
  }

  get code() {
    return this.#code;
  }

  /** Setting the code also sets the reason phrase to the code's standard one (set status after code to change it). */
  set code(v) {
    const n = Number(v);
    if (!Number.isInteger(n) || n < 100 || n > 999) throw new RangeError(`invalid status code: ${formatValue(v)}`);
    this.#code = n;
    this.#reason = reasonFor(n);
  }

  /** The reason phrase ("OK", "Not Found"...). */
  get status() {
    return this.#reason;
  }

  set status(v) {
    this.#reason = String(v);
  }

  reason() {
    return this.#reason;
  }

  details() {
    return { code: this.#code, name: this.#reason, detail: this.#reason };
  }

  get responseTime() {
    return typeof this.#data.responseTime === "number" ? this.#data.responseTime : 0;
  }

  get headers() {
    return this.#headers || (this.#headers = new HeaderList(this.#data.headers));
  }

  get cookies() {
    return CookieList.fromSetCookie(this.headers.getAll("set-cookie"));
  }

  text() {
    if (!this.#bodyLoaded) {
      this.#body = this.#loadBody();
      this.#bodyLoaded = true;
    }
    return this.#body;
  }

  /** The body parsed as JSON; a body that is not JSON throws a JSONError. */
  json(reviver) {
    try {
      return jsonParse(this.text(), reviver);
    } catch (e) {
      const err = new ErrorCtor(e && e.message ? e.message : String(e));
      err.name = "JSONError";
      throw err;
    }
  }

  get responseSize() {
    return utf8Length(this.text());
  }

  /** Sizes in bytes: { body, header, total } (the header as an HTTP/1.1 head would be). */
  size() {
    const body = utf8Length(this.text());
    let header = utf8Length(`HTTP/1.1 ${this.#code} ${this.#reason}\r\n`) + 2;
    for (const [k, v] of this.headers.toPairs()) header += utf8Length(k) + utf8Length(v) + 4;
    return { body, header, total: body + header };
  }

  /** Replaces the body: a string as it is, anything else as JSON. */
  setBody(v) {
    this.#body = bodyText(v);
    this.#bodyLoaded = true;
    this.#bodySet = true;
  }

  /** pm.response.to.have.status(200), pm.response.to.be.ok ... */
  get to() {
    return chai.expect(this).to;
  }

  toJSON() {
    return { code: this.#code, status: this.#reason, header: this.headers.toJSON(), responseTime: this.responseTime, body: this.text() };
  }

  /** What the script changed: { status?, statusText?, headers?, body? }, or null when nothing. */
  static changes(view) {
    const d = view.#data;
    const out = {};
    if (view.#code !== d.status) out.status = view.#code;
    const reason = typeof d.statusText === "string" && d.statusText ? d.statusText : reasonFor(d.status);
    if (view.#reason !== reason || out.status !== undefined) out.statusText = view.#reason;
    if (view.#headers) {
      const pairs = view.#headers.toPairs();
      if (!samePairs(pairs, d.headers)) out.headers = pairs;
    }
    if (view.#bodySet) out.body = view.#body;
    return hasAnyKey(out) ? out : null;
  }
}
