import { TapwireService } from "../../src/service/service.ts";
import { DEFAULTS, type ServiceConfig } from "../../src/service/config.ts";
import { tempDir } from "./tapwire-process.ts";

/** An in-process service on a temp data dir with every port picked by the OS. */
export async function startService(over: Partial<ServiceConfig> = {}): Promise<TapwireService & { url: (p: string) => string; call: (p: string, init?: RequestInit) => Promise<Response> }> {
  const config: ServiceConfig = {
    ...DEFAULTS,
    dataDir: tempDir(),
    proxyPort: 0,
    upstreamInsecure: false,
    upstreamCa: [],
    mockPort: null,
    ...over,
  };
  const s = new TapwireService(config, () => {}) as TapwireService & { url: (p: string) => string; call: (p: string, init?: RequestInit) => Promise<Response> };
  await s.start();
  s.url = (p) => `http://127.0.0.1:${s.apiPort}${p}`;
  s.call = (p, init = {}) =>
    fetch(s.url(p), { ...init, headers: { authorization: `Bearer ${s.token}`, ...((init.headers as Record<string, string>) ?? {}) } });
  return s;
}
