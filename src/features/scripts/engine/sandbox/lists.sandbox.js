// Sandbox prelude, part 2 of 7: Postman's property lists (pm.request.headers, pm.response.headers, url.query,
// pm.cookies). As in postman-collection: lookups by key (case-insensitive for headers and cookies), repeated keys
// allowed, get()/one() answer the last item with that key, toObject() turns repeated keys into arrays.

/** One header, query parameter or cookie: { key, value[, disabled] }. */
class PropertyItem {
  constructor(key, value, disabled) {
    this.key = key;
    this.value = value;
    if (disabled) this.disabled = true;
  }

  /** update({key?, value?, disabled?}) or update(value). */
  update(v) {
    if (isObject(v)) {
      if (hasOwn(v, "key")) this.key = v.key;
      if (hasOwn(v, "value")) this.value = v.value;
      if (hasOwn(v, "disabled")) this.disabled = Boolean(v.disabled);
    } else this.value = v;
  }

  valueOf() {
    return this.value;
  }

  toJSON() {
    return this.disabled ? { key: this.key, value: this.value, disabled: true } : { key: this.key, value: this.value };
  }
}

// The item classes spell their constructor out: QuickJS runs an implicit derived constructor as
// `constructor(...args) { super(...args); }`, whose rest array made each item ~3x as slow to build (~0.45 µs more
// per header, and a request has many).
class Header extends PropertyItem {
  constructor(key, value, disabled) {
    super(key, value, disabled);
  }

  toString() {
    return `${this.key}: ${this.value}`;
  }

  /** "Name: value" lines to items. */
  static parse(text) {
    const items = [];
    for (const line of String(text).split(/\r?\n/)) {
      const i = line.indexOf(":");
      if (line.trim() === "") continue;
      items.push(i < 0 ? new Header(line.trim(), "") : new Header(line.slice(0, i).trim(), line.slice(i + 1).trim()));
    }
    return items;
  }
}

// Characters kept as they are in a query string; everything else is percent-encoded (UTF-8). "%" is kept, so values
// that are already encoded stay as they are; "&", "#" and (in keys) "=" are encoded.
const QUERY_VALUE_UNSAFE = /[^A-Za-z0-9\-._~!$'()*+,;:@/?%=]/gu;
const QUERY_KEY_UNSAFE = /[^A-Za-z0-9\-._~!$'()*+,;:@/?%]/gu;

function encodeQueryPart(s, unsafe) {
  return String(s).replace(unsafe, (ch) => {
    try {
      return encodeURIComponent(ch);
    } catch (_) {
      return "%EF%BF%BD"; // a lone surrogate
    }
  });
}

class QueryParam extends PropertyItem {
  constructor(key, value, disabled) {
    super(key, value, disabled);
  }

  toString() {
    const key = encodeQueryPart(this.key === undefined || this.key === null ? "" : this.key, QUERY_KEY_UNSAFE);
    return this.value === undefined || this.value === null ? key : `${key}=${encodeQueryPart(this.value, QUERY_VALUE_UNSAFE)}`;
  }

  /** "a=1&b" to items (values as written, not decoded; a key without "=" has the value null). */
  static parse(text) {
    const items = [];
    for (const part of String(text).split("&")) {
      if (part === "") continue;
      const i = part.indexOf("=");
      items.push(i < 0 ? new QueryParam(part, null) : new QueryParam(part.slice(0, i), part.slice(i + 1)));
    }
    return items;
  }
}

class Cookie extends PropertyItem {
  constructor(key, value, disabled) {
    super(key, value, disabled);
  }

  toString() {
    return `${this.key}=${this.value}`;
  }
}

/** A list's pairs while it holds no items, else null (for HeaderList.toPairs(); not reachable from scripts). */
let pairsOf;

class PropertyList {
  #Type;
  #caseInsensitive;
  #members;
  /**
   * A list built from the host's [name, value] pairs keeps them as pairs (copied before the first change) until
   * something needs its items (members): the common reads and changes of a header list (get, has, add, upsert,
   * remove by name, toObject, toPairs) work on the pairs, so a script that only reads or sets a header never builds
   * an item per header (each one a class instance: ~1 µs in QuickJS). null once the items exist.
   */
  #pairs = null;
  #pairsOwned = false;

  constructor(Type, caseInsensitive, members, pairs) {
    this.#Type = Type;
    this.#caseInsensitive = caseInsensitive;
    if (pairs) this.#pairs = pairs;
    else this.#members = members || [];
  }

  /** The items (built from the pairs on first use). */
  get members() {
    if (this.#pairs !== null) {
      const pairs = this.#pairs;
      const Type = this.#Type;
      const items = [];
      for (let i = 0; i < pairs.length; i++) items.push(new Type(pairs[i][0], pairs[i][1]));
      this.#members = items;
      this.#pairs = null;
    }
    return this.#members;
  }

  set members(v) {
    this.#pairs = null;
    this.#members = v;
  }

  /** The pairs, to be changed (copied first: the host's stay as they came, changes() compares with them). */
  #ownPairs() {
    if (!this.#pairsOwned) {
      this.#pairs = this.#pairs.slice();
      this.#pairsOwned = true;
    }
    return this.#pairs;
  }

  /** A plain { key, value } a script passes (not an item, not text, not disabled): what the pairs can take as it is. */
  static #plain(v) {
    return isObject(v) && !(v instanceof PropertyItem) && v.key !== undefined && v.key !== null && !v.disabled;
  }

  #norm(key) {
    const k = typeof key === "string" ? key : key === undefined || key === null ? "" : String(key);
    return this.#caseInsensitive ? k.toLowerCase() : k;
  }

  /** An item from what a script passes: an item, {key, value}, or text ("Name: value" / "a=1"). */
  #item(v) {
    if (v instanceof this.#Type) return v;
    if (typeof v === "string") return this.#Type.parse ? this.#Type.parse(v)[0] : undefined;
    if (isObject(v) && v.key !== undefined && v.key !== null) return new this.#Type(String(v.key), v.value, v.disabled);
    return undefined;
  }

  /** Index of the last pair with that key, -1 when none (only while the list holds pairs). */
  #lastPair(key) {
    const k = this.#norm(key);
    const pairs = this.#pairs;
    for (let i = pairs.length - 1; i >= 0; i--) if (this.#norm(pairs[i][0]) === k) return i;
    return -1;
  }

  one(key) {
    const k = this.#norm(key);
    for (let i = this.members.length - 1; i >= 0; i--) if (this.#norm(this.members[i].key) === k) return this.members[i];
    return undefined;
  }

  get(key) {
    if (this.#pairs !== null) {
      const i = this.#lastPair(key);
      return i < 0 ? undefined : this.#pairs[i][1];
    }
    const item = this.one(key);
    return item === undefined ? undefined : item.valueOf();
  }

  getAll(key) {
    const k = this.#norm(key);
    return this.members.filter((m) => this.#norm(m.key) === k).map((m) => m.valueOf());
  }

  /** has(key), has(key, value) or has(item). */
  has(key, value) {
    if (isObject(key)) return this.members.indexOf(key) >= 0;
    const k = this.#norm(key);
    const withValue = arguments.length > 1;
    if (this.#pairs !== null) return this.#pairs.some((p) => this.#norm(p[0]) === k && (!withValue || p[1] === value));
    return this.members.some((m) => this.#norm(m.key) === k && (!withValue || m.valueOf() === value));
  }

  add(v) {
    if (this.#pairs !== null && PropertyList.#plain(v)) {
      this.#ownPairs().push([String(v.key), v.value]);
      return;
    }
    const items = typeof v === "string" && this.#Type.parse ? this.#Type.parse(v) : [this.#item(v)];
    for (const item of items) if (item) this.members.push(item);
  }

  append(v) {
    this.add(v);
  }

  prepend(v) {
    const item = this.#item(v);
    if (item) this.members.unshift(item);
  }

  /** insert(item[, before]): before an item or the last item with that key; at the end without one. */
  insert(v, before) {
    const item = this.#item(v);
    if (!item) return;
    const ref = before === undefined ? -1 : this.indexOf(before);
    if (ref < 0) this.members.push(item);
    else this.members.splice(ref, 0, item);
  }

  /** Updates the item with that key (the last one when repeated) or adds it. false: updated, true: added. */
  upsert(v) {
    if (this.#pairs !== null && PropertyList.#plain(v)) {
      const key = String(v.key);
      const value = v.value;
      const i = this.#lastPair(key);
      const pairs = this.#ownPairs();
      if (i >= 0) {
        pairs[i] = [pairs[i][0], value];
        return false;
      }
      pairs.push([key, value]);
      return true;
    }
    const item = this.#item(v);
    if (!item) return null;
    const existing = this.one(item.key);
    if (existing) {
      existing.update({ key: existing.key, value: item.value });
      return false;
    }
    this.members.push(item);
    return true;
  }

  /** remove(key) removes every item with that key; remove(fn) every item fn returns truthy for; remove(item) it. */
  remove(predicate, context) {
    let test;
    if (isFunction(predicate)) test = (m, i) => predicate.call(context === undefined ? this : context, m, i);
    else if (isObject(predicate)) test = (m) => m === predicate;
    else {
      const k = this.#norm(predicate);
      if (this.#pairs !== null) {
        this.#pairs = this.#pairs.filter((p) => this.#norm(p[0]) !== k);
        this.#pairsOwned = true;
        return;
      }
      test = (m) => this.#norm(m.key) === k;
    }
    this.members = this.members.filter((m, i) => !test(m, i));
  }

  clear() {
    this.members = [];
  }

  populate(items) {
    if (typeof items === "string" && this.#Type.parse) items = this.#Type.parse(items);
    for (const v of isArray(items) ? items : [items]) this.add(v);
  }

  repopulate(items) {
    this.clear();
    this.populate(items);
  }

  all() {
    return this.members.slice();
  }

  count() {
    return this.#pairs !== null ? this.#pairs.length : this.members.length;
  }

  idx(i) {
    return this.members[i];
  }

  indexOf(v) {
    if (typeof v === "string") v = this.one(v);
    return this.members.indexOf(v);
  }

  each(fn, context) {
    this.members.slice().forEach((m, i) => fn.call(context, m, i));
  }

  map(fn, context) {
    return this.members.map((m, i) => fn.call(context, m, i));
  }

  filter(fn, context) {
    return this.members.filter((m, i) => fn.call(context, m, i));
  }

  find(fn, context) {
    return this.members.find((m, i) => fn.call(context, m, i));
  }

  reduce(fn, acc) {
    return this.members.reduce(fn, acc);
  }

  /**
   * { key: value } of the items (disabled ones too unless excludeDisabled); keys lower-cased in a case-insensitive
   * list unless caseSensitive; a repeated key gives an array of its values.
   */
  toObject(excludeDisabled, caseSensitive) {
    const out = {};
    const pairs = this.#pairs;
    const list = pairs !== null ? pairs : this.members;
    for (let i = 0; i < list.length; i++) {
      const m = list[i];
      if (pairs === null && excludeDisabled && m.disabled) continue;
      const k = pairs !== null ? m[0] : m.key;
      const key = this.#caseInsensitive && !caseSensitive ? String(k).toLowerCase() : String(k);
      const value = pairs !== null ? m[1] : m.valueOf();
      if (!hasOwn(out, key)) setOwn(out, key, value);
      else if (isArray(out[key])) out[key].push(value);
      else out[key] = [out[key], value];
    }
    return out;
  }

  toJSON() {
    return this.members.map((m) => m.toJSON());
  }

  static {
    pairsOf = (list) => list.#pairs;
  }
}

class HeaderList extends PropertyList {
  /** pairs: [name, value] pairs from the host (kept as they are: the list copies them before changing them). */
  constructor(pairs) {
    super(Header, true, null, pairs || []);
  }

  toString() {
    return this.members.filter((m) => !m.disabled).map((m) => m.toString() + "\n").join("");
  }

  /** [name, value] pairs as they leave the sandbox: disabled headers left out, values as text. */
  toPairs() {
    const out = [];
    const pairs = pairsOf(this);
    if (pairs !== null) {
      for (let i = 0; i < pairs.length; i++) {
        const p = pairs[i];
        if (p[0] === "") continue;
        const v = p[1];
        out.push(typeof v === "string" ? p : [p[0], v === undefined || v === null ? "" : String(v)]);
      }
      return out;
    }
    for (const m of this.members) {
      if (m.disabled || m.key === undefined || m.key === null || m.key === "") continue;
      out.push([String(m.key), m.value === undefined || m.value === null ? "" : String(m.value)]);
    }
    return out;
  }
}

class QueryParamList extends PropertyList {
  constructor(items) {
    super(QueryParam, false, items || []);
  }

  toString() {
    return this.members.filter((m) => !m.disabled).map((m) => m.toString()).join("&");
  }
}

/** pm.cookies: name=value pairs from Set-Cookie (response phases) or the Cookie header (request phase). Read-only. */
class CookieList extends PropertyList {
  constructor(items) {
    super(Cookie, true, items);
  }

  static fromSetCookie(values) {
    const items = [];
    for (const v of values) {
      const first = String(v).split(";")[0];
      const i = first.indexOf("=");
      if (i > 0) items.push(new Cookie(first.slice(0, i).trim(), first.slice(i + 1).trim()));
    }
    return new CookieList(items);
  }

  static fromCookieHeader(values) {
    const items = [];
    for (const v of values) {
      for (const part of String(v).split(";")) {
        const i = part.indexOf("=");
        if (i > 0) items.push(new Cookie(part.slice(0, i).trim(), part.slice(i + 1).trim()));
      }
    }
    return new CookieList(items);
  }
}
