/**
 * .proto files loaded at start (`--proto DIR`, repeatable): every service method they declare, by its gRPC path
 * (`/package.Service/Method`), with its request and response message types, so captured messages can be shown
 * with field names. Parsed by protobufjs (imports resolved against the given folders, then protobufjs's bundled
 * google/protobuf/*.proto).
 */
import { readdirSync, statSync } from "node:fs";
import { join, relative, resolve } from "node:path";
import type * as Protobuf from "protobufjs";

/**
 * protobufjs, loaded when the first --proto folder is: imported at the top it was evaluated by every start-up
 * (about 15 ms of the compiled binary's), also by the many that load no .proto file. import(), not require(): the
 * bundler then puts it in a chunk of its own (build.ts), out of the code every start loads.
 */
async function protobufjs(): Promise<typeof Protobuf> {
  const m = (await import("protobufjs")) as typeof Protobuf & { default?: typeof Protobuf };
  return m.default ?? m;
}

export interface GrpcMethod {
  path: string;
  service: string;
  method: string;
  requestType: Protobuf.Type;
  responseType: Protobuf.Type;
  requestStream: boolean;
  responseStream: boolean;
}

export class ProtoLoadError extends Error {}

function protoFiles(dir: string): string[] {
  const out: string[] = [];
  const walk = (d: string) => {
    for (const name of readdirSync(d).sort()) {
      const p = join(d, name);
      const st = statSync(p);
      if (st.isDirectory()) walk(p);
      else if (name.endsWith(".proto")) out.push(p);
    }
  };
  walk(dir);
  return out;
}

export class ProtoRegistry {
  private readonly methods = new Map<string, GrpcMethod>();
  /** The folders loaded and how many files each gave, for /health and logs. */
  readonly sources: { dir: string; files: number }[] = [];

  /**
   * Loads every .proto file under the folders into this (empty) registry; rejects with ProtoLoadError naming the
   * file for anything unreadable.
   */
  async load(dirs: readonly string[]): Promise<void> {
    if (dirs.length === 0) return;
    const roots = dirs.map((d) => resolve(d));
    const files: string[] = [];
    for (const dir of roots) {
      let found: string[];
      try {
        if (!statSync(dir).isDirectory()) throw new Error("not a folder");
        found = protoFiles(dir);
      } catch (e) {
        throw new ProtoLoadError(`--proto ${dir}: ${(e as Error).message}`);
      }
      this.sources.push({ dir, files: found.length });
      files.push(...found);
    }
    const protobuf = await protobufjs();
    const root = new protobuf.Root();
    // imports are relative to one of the --proto folders (as protoc's -I)
    root.resolvePath = (origin, target) => {
      for (const dir of roots) {
        const p = join(dir, target);
        try {
          if (statSync(p).isFile()) return p;
        } catch {
          // try the next folder
        }
      }
      return protobuf.util.path.resolve(origin, target);
    };
    for (const file of files) {
      try {
        root.loadSync(file, { keepCase: true });
      } catch (e) {
        const base = roots.find((d) => file.startsWith(d + "/"));
        throw new ProtoLoadError(`--proto: ${base ? relative(base, file) : file}: ${(e as Error).message}`);
      }
    }
    try {
      root.resolveAll();
    } catch (e) {
      throw new ProtoLoadError(`--proto: ${(e as Error).message}`);
    }
    const visit = (ns: Protobuf.NamespaceBase) => {
      for (const obj of ns.nestedArray) {
        if (obj instanceof protobuf.Service) {
          const service = obj.fullName.replace(/^\./, "");
          for (const m of obj.methodsArray) {
            const path = `/${service}/${m.name}`;
            this.methods.set(path, {
              path,
              service,
              method: m.name,
              requestType: m.resolvedRequestType!,
              responseType: m.resolvedResponseType!,
              requestStream: !!m.requestStream,
              responseStream: !!m.responseStream,
            });
          }
        }
        if (obj instanceof protobuf.Namespace) visit(obj);
      }
    };
    visit(root);
  }

  get size(): number {
    return this.methods.size;
  }

  method(path: string): GrpcMethod | null {
    return this.methods.get(path) ?? null;
  }
}

/** A message decoded with its type, as JSON-safe data: 64-bit integers as strings, bytes as base64, enums by name. */
export function decodeTyped(type: Protobuf.Type, bytes: Uint8Array): Record<string, unknown> {
  const msg = type.decode(bytes);
  return type.toObject(msg, { longs: String, enums: String, bytes: String, defaults: false, arrays: true, oneofs: true }) as Record<string, unknown>;
}
