import { expect } from "bun:test";
import type { startService } from "../../helpers/service.ts";

export type Svc = Awaited<ReturnType<typeof startService>>;

type NodeSpec = [id: string, type: string, data?: Record<string, unknown>];
type EdgeSpec = [source: string, target: string, sourceHandle?: string];

/** A flow in the input form, laid out left to right. */
export function flow(id: string, nodes: NodeSpec[], edges: EdgeSpec[], extra: Record<string, unknown> = {}) {
  return {
    id,
    name: id,
    nodes: nodes.map(([nid, type, data], i) => ({ id: nid, type, position: { x: i * 200, y: 0 }, data: data ?? {} })),
    edges: edges.map(([source, target, sourceHandle]) => ({ source, target, ...(sourceHandle ? { sourceHandle } : {}) })),
    ...extra,
  };
}

export const JSON_HEADERS = { "content-type": "application/json" };

export async function answer(r: Response | Promise<Response>): Promise<{ status: number; body: any }> {
  const res = await r;
  const text = await res.text();
  let body: any = text;
  try {
    body = text ? JSON.parse(text) : undefined;
  } catch {}
  return { status: res.status, body };
}

export async function ok(r: Response | Promise<Response>): Promise<any> {
  const a = await answer(r);
  expect(a).toMatchObject({ status: 200 });
  return a.body;
}

export const post = (svc: Svc, path: string, body?: unknown) =>
  svc.call(path, { method: "POST", ...(body === undefined ? {} : { body: typeof body === "string" ? body : JSON.stringify(body), headers: JSON_HEADERS }) });

/** Stores the flow (POST /flows) and answers the stored form. */
export const save = (svc: Svc, f: unknown) => ok(post(svc, "/api/v1/flows", f));

/** Runs a stored flow and answers the report (expects 200). */
export const runFlow = (svc: Svc, id: string, environment?: Record<string, unknown>) => ok(post(svc, `/api/v1/flows/${id}/run`, environment ? { environment } : undefined));
