import { readFileSync, watch, type FSWatcher } from "node:fs";
import { join } from "node:path";
import type { Log } from "../../service/feature.ts";
import { parseRulesText, type CompiledRule } from "./rules.ts";

export const RULES_FILE = "throttle-rules.json";

/** Quiet time after the last change event before the file is re-read (editors write in several steps). */
export const RELOAD_DEBOUNCE_MS = 100;

export interface ReloadResult {
  ok: boolean;
  /** False when the file's text was the same as at the last attempt (nothing was done). */
  changed: boolean;
  /** The problem, when ok is false. */
  error: string | null;
}

/**
 * throttle-rules.json in the data directory, owned by the user (an editor, a CI script): read at start, re-read when
 * the folder reports a change to it (debounced) and when asked (API / CLI). A file that cannot be read or does not
 * validate is reported through `log` and the rules in force stay; the file itself is never moved or rewritten.
 * A missing file means no rules.
 */
export class RulesFile {
  readonly path: string;
  private current: CompiledRule[] = [];
  /** Text of the last attempt (null: the file was absent), so repeated change events for the same text are ignored. */
  private lastText: string | null | undefined = undefined;
  private loadedAtMs: number | null = null;
  private lastError: string | null = null;
  private watcher: FSWatcher | null = null;
  private timer: ReturnType<typeof setTimeout> | null = null;
  private waiters: ((r: ReloadResult) => void)[] = [];

  constructor(
    private readonly dataDir: string,
    private readonly log: Log,
    private readonly apply: (rules: CompiledRule[]) => void,
  ) {
    this.path = join(dataDir, RULES_FILE);
  }

  get rules(): readonly CompiledRule[] {
    return this.current;
  }

  /** When the rules in force were last loaded successfully (ms since epoch), or null. */
  get loadedAt(): number | null {
    return this.loadedAtMs;
  }

  /** The problem of the last attempt when it failed (the previous rules are still in force), else null. */
  get error(): string | null {
    return this.lastError;
  }

  /**
   * Re-reads the file now. With `force` false an unchanged text is skipped. Never throws: a bad file leaves the
   * previous rules in force and is reported.
   */
  reload(force = true): ReloadResult {
    let text: string | null;
    try {
      text = readFileSync(this.path, "utf8");
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      if (code === "ENOENT" || code === "ENOTDIR") text = null;
      else return this.settle(this.fail(`cannot read ${this.path}: ${(e as Error).message}`, undefined));
    }
    if (!force && text === this.lastText) return { ok: this.lastError === null, changed: false, error: this.lastError };
    let rules: CompiledRule[];
    try {
      rules = text === null ? [] : parseRulesText(text);
    } catch (e) {
      return this.settle(this.fail((e as Error).message, text));
    }
    const had = this.current.length;
    this.lastText = text;
    this.current = rules;
    this.loadedAtMs = Date.now();
    this.lastError = null;
    this.apply(rules);
    if (text === null) {
      if (had > 0) this.log(`tapwire: ${this.path} is gone; no scoped throttle rules`);
    } else {
      const on = rules.filter((r) => r.rule.enabled).length;
      this.log(`tapwire: loaded ${rules.length} throttle rule(s) (${on} enabled) from ${this.path}`);
    }
    return this.settle({ ok: true, changed: true, error: null });
  }

  private fail(why: string, text: string | null | undefined): ReloadResult {
    this.lastText = text;
    this.lastError = why;
    const n = this.current.length;
    this.log(`tapwire: ${this.path}: ${why}; the previous ${n} throttle rule(s) stay in force`);
    return { ok: false, changed: true, error: why };
  }

  private settle(r: ReloadResult): ReloadResult {
    const w = this.waiters;
    this.waiters = [];
    for (const f of w) f(r);
    return r;
  }

  /** Resolves after the next reload that was not skipped (a change from the watcher, or an explicit reload). */
  nextReload(): Promise<ReloadResult> {
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  /**
   * Watches the data directory (the file is usually replaced by a rename, so the folder is watched, not the file).
   * Events for other files are dropped; busy files must not live in this folder (every event costs CPU in the
   * watcher's thread even when dropped), which is why the capture database has its own subfolder.
   */
  watch(): void {
    if (this.watcher) return;
    try {
      this.watcher = watch(this.dataDir, { persistent: false }, (_event, filename) => {
        if (filename !== null && filename !== undefined && String(filename) !== RULES_FILE) return;
        this.schedule();
      });
      this.watcher.on("error", (e) => {
        this.log(`tapwire: watching ${this.dataDir} for ${RULES_FILE} failed (${(e as Error).message}); use \`tapwire throttle reload\``);
        this.unwatch();
      });
    } catch (e) {
      this.watcher = null;
      this.log(`tapwire: cannot watch ${this.dataDir} for ${RULES_FILE} (${(e as Error).message}); use \`tapwire throttle reload\``);
    }
  }

  private schedule(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.timer = null;
      this.reload(false);
    }, RELOAD_DEBOUNCE_MS);
  }

  private unwatch(): void {
    try {
      this.watcher?.close();
    } catch {}
    this.watcher = null;
  }

  /** Stops watching; pending debounced reloads are dropped. */
  stop(): void {
    this.unwatch();
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
  }
}
