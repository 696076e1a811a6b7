// Sandbox prelude, part 4 of 7: variable scopes (pm.environment, pm.collectionVariables, pm.globals,
// pm.iterationData) and pm.variables, which reads through all of them with Postman's precedence:
// local (pm.variables.set) > iteration data > environment > collection variables > globals.

const DYNAMIC_VARIABLES = {
  $guid: randomUuid,
  $randomUUID: randomUuid,
  $timestamp: () => String(Math.floor(dateNow() / 1000)),
  $isoTimestamp: () => new Date(dateNow()).toISOString(),
  $randomInt: () => String(Math.floor(Math.random() * 1001)),
};

/** Nested references ({{a}} whose value is "{{b}}") are resolved up to this depth, as Postman does. */
const MAX_REPLACE_DEPTH = 19;

/**
 * Replaces every {{name}} that lookup(name) knows ({ found, value }) and the dynamic variables ({{$guid}},
 * {{$randomUUID}}, {{$timestamp}}, {{$isoTimestamp}}, {{$randomInt}}). Unknown names stay as they are.
 */
function replaceVariables(template, lookup) {
  if (typeof template !== "string") return template;
  let text = template;
  for (let depth = 0; depth < MAX_REPLACE_DEPTH && text.indexOf("{{") >= 0; depth++) {
    let changed = false;
    text = text.replace(/\{\{([^{}]+?)\}\}/g, (whole, name) => {
      const r = lookup(name);
      if (r.found) {
        changed = true;
        const v = r.value;
        return typeof v === "string" ? v : v === undefined || v === null ? "" : isObject(v) ? jsonStringify(v) : String(v);
      }
      if (hasOwn(DYNAMIC_VARIABLES, name)) {
        changed = true;
        return DYNAMIC_VARIABLES[name]();
      }
      return whole;
    });
    if (!changed) break;
  }
  return text;
}

class VariableScope {
  #values;
  #readOnly;
  #touched = false;

  /** values: a plain object from the host; readOnly scopes (pm.iterationData) refuse set/unset/clear. */
  constructor(values, readOnly) {
    this.#values = new Map(isObject(values) ? objectKeys(values).map((k) => [k, values[k]]) : []);
    this.#readOnly = Boolean(readOnly);
  }

  #write() {
    if (this.#readOnly) throw new TypeError("this variable scope is read-only");
    this.#touched = true;
  }

  /** Whether the script changed this scope (only then does it go back to the host). */
  get touched() {
    return this.#touched;
  }

  lookup(key) {
    const k = String(key);
    return this.#values.has(k) ? { found: true, value: this.#values.get(k) } : { found: false, value: undefined };
  }

  get(key) {
    return this.#values.get(String(key));
  }

  has(key) {
    return this.#values.has(String(key));
  }

  /** set(key, value), or set({ key: value, ... }). */
  set(key, value) {
    this.#write();
    if (isObject(key)) for (const k of objectKeys(key)) this.#values.set(k, key[k]);
    else this.#values.set(String(key), value);
  }

  unset(key) {
    this.#write();
    this.#values.delete(String(key));
  }

  clear() {
    this.#write();
    this.#values.clear();
  }

  toObject() {
    const out = {};
    for (const [k, v] of this.#values) setOwn(out, k, v);
    return out;
  }

  toJSON() {
    return this.toObject();
  }

  replaceIn(template) {
    return replaceVariables(template, (name) => this.lookup(name));
  }
}

/** pm.environment also has the environment's name. */
class EnvironmentScope extends VariableScope {
  #name;

  constructor(values, name) {
    super(values, false);
    this.#name = name;
  }

  get name() {
    return this.#name;
  }
}

/** pm.variables: writes go to the local scope; reads go through every scope, highest precedence first. */
class ResolvedVariables extends VariableScope {
  #chain;

  /** chain: the other scopes, highest precedence first (iteration data, environment, collection, globals). */
  constructor(values, chain) {
    super(values, false);
    this.#chain = chain;
  }

  lookup(key) {
    const own = super.lookup(key);
    if (own.found) return own;
    for (const scope of this.#chain) {
      const r = scope().lookup(key);
      if (r.found) return r;
    }
    return own;
  }

  get(key) {
    return this.lookup(key).value;
  }

  has(key) {
    return this.lookup(key).found;
  }

  /** Every variable the script can see, each with the value that wins. */
  toObject() {
    const out = {};
    for (let i = this.#chain.length - 1; i >= 0; i--) {
      const o = this.#chain[i]().toObject();
      for (const k of objectKeys(o)) setOwn(out, k, o[k]);
    }
    const own = super.toObject();
    for (const k of objectKeys(own)) setOwn(out, k, own[k]);
    return out;
  }

  /** The local scope alone, as it goes back to the host. */
  localObject() {
    return super.toObject();
  }
}
