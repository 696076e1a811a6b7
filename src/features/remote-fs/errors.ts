import { ApiError } from "../../api/errors.ts";

/** The wire codes of spec section 7 for remote file failures. */
export type RemoteErrorCode =
  | "auth"
  | "permissionDenied"
  | "notFound"
  | "alreadyExists"
  | "cancelled"
  | "hostUnreachable"
  | "hostKeyRejected"
  | "unsupported"
  | "protocol"
  | "io";

const STATUS: Record<RemoteErrorCode, number> = {
  auth: 403,
  permissionDenied: 403,
  notFound: 404,
  alreadyExists: 409,
  cancelled: 409,
  hostUnreachable: 502,
  hostKeyRejected: 502,
  unsupported: 400,
  protocol: 400,
  io: 500,
};

/**
 * A remote file failure, already translated to a wire code. Every backend throws only this from its public
 * methods (native errors are translated at the backend's boundary, like rclone's fs errors), so the API, the CLI
 * and the transfer queue see one vocabulary whatever the protocol.
 */
export class RemoteError extends ApiError {
  constructor(readonly remoteCode: RemoteErrorCode, message: string) {
    super(STATUS[remoteCode], remoteCode, message);
    this.name = "RemoteError";
  }
}

export const remoteError = (code: RemoteErrorCode, message: string) => new RemoteError(code, message);

/** Network-level failures every protocol shares (the TCP connect or TLS handshake failed). */
export function networkError(e: unknown, where: string): RemoteError | null {
  const err = e as { code?: unknown; message?: string };
  const code = typeof err?.code === "string" ? err.code : "";
  const msg = String(err?.message ?? e);
  if (["ECONNREFUSED", "ENOTFOUND", "EHOSTUNREACH", "ENETUNREACH", "ETIMEDOUT", "ECONNRESET", "EAI_AGAIN", "EPIPE", "ConnectionRefused", "ConnectionClosed"].includes(code)
    || /ECONNREFUSED|ENOTFOUND|EHOSTUNREACH|ENETUNREACH|connection refused|Unable to connect|getaddrinfo|socket hang up|timed out|Timeout/i.test(msg)) {
    return remoteError("hostUnreachable", `${where}: ${msg}`);
  }
  if (/certificate|self[- ]signed|UNABLE_TO_VERIFY|CERT_|DEPTH_ZERO|ERR_TLS_CERT|altnames|Hostname\/IP does not match/i.test(code + " " + msg)) {
    return remoteError("hostKeyRejected", `${where}: TLS certificate rejected: ${msg}`);
  }
  return null;
}

/** Anything that is not a RemoteError yet becomes `io` (500), keeping its message. */
export function asRemoteError(e: unknown, where: string): RemoteError {
  if (e instanceof RemoteError) return e;
  return networkError(e, where) ?? remoteError("io", `${where}: ${(e as Error)?.message ?? String(e)}`);
}
