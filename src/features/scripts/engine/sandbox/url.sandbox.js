// Sandbox prelude, part 3 of 7: pm.request.url, Postman's Url. Parsed leniently (QuickJS has no URL class): the parts
// are kept as written, nothing is decoded, and toString() puts them back together.

//                  protocol                         auth                host ([v6] or name)       port            path          query          hash
const URL_PARTS = /^(?:([A-Za-z][A-Za-z0-9+.-]*):\/\/)?(?:([^@/?#]*)@)?(\[[^\]]*\]|[^:/?#]*)(?::([^/?#]*))?([^?#]*)(?:\?([^#]*))?(?:#([\s\S]*))?$/;

class Url {
  constructor(value) {
    this.update(value);
  }

  /** Replaces every part from a URL string (or another Url, or Postman's { raw } definition). */
  update(value) {
    if (value instanceof Url) value = value.toString();
    else if (isObject(value) && typeof value.raw === "string") value = value.raw;
    const text = value === undefined || value === null ? "" : String(value).trim();
    const m = URL_PARTS.exec(text) || [];
    this.protocol = m[1] || undefined;
    if (m[2] !== undefined) {
      const i = m[2].indexOf(":");
      this.auth = i < 0 ? { user: m[2], password: undefined } : { user: m[2].slice(0, i), password: m[2].slice(i + 1) };
    } else this.auth = undefined;
    this.host = m[3] ? (m[3][0] === "[" ? [m[3]] : m[3].split(".")) : undefined;
    this.port = m[4] || undefined;
    this.path = m[5] ? m[5].replace(/^\//, "").split("/") : undefined;
    this.query = new QueryParamList(m[6] ? QueryParam.parse(m[6]) : []);
    this.hash = m[7];
    this.variables = new PropertyList(PropertyItem, false, []);
  }

  getHost() {
    return this.host ? this.host.join(".") : "";
  }

  /** The path with its leading "/" ("/" when there is none). */
  getPath() {
    return this.path ? "/" + this.path.join("/") : "/";
  }

  getQueryString() {
    return this.query.toString();
  }

  getPathWithQuery() {
    const q = this.getQueryString();
    return this.getPath() + (q ? "?" + q : "");
  }

  /** host[:port]; forcePort adds the scheme's default port when the URL has none. */
  getRemote(forcePort) {
    const port = this.port || (forcePort ? (this.protocol === "https" ? "443" : "80") : "");
    return this.getHost() + (port ? ":" + port : "");
  }

  getRaw() {
    return this.toString();
  }

  /** addQueryParams("a=1&b=2" | [{key, value}] | {key, value}). */
  addQueryParams(params) {
    this.query.populate(params);
  }

  /** removeQueryParams("a" | ["a", "b"] | [{key}]). */
  removeQueryParams(params) {
    for (const p of isArray(params) ? params : [params]) this.query.remove(isObject(p) ? p.key : p);
  }

  toString(forceProtocol) {
    let s = "";
    if (this.protocol) s += this.protocol + "://";
    else if (forceProtocol) s += "http://";
    if (this.auth) s += this.auth.user + (this.auth.password !== undefined && this.auth.password !== null ? ":" + this.auth.password : "") + "@";
    s += this.getHost();
    if (this.port) s += ":" + this.port;
    if (this.path) s += "/" + this.path.join("/");
    const q = this.getQueryString();
    if (q) s += "?" + q;
    if (this.hash !== undefined && this.hash !== null) s += "#" + this.hash;
    return s;
  }

  toJSON() {
    return this.toString();
  }
}
