/** Header fields in wire order, original casing preserved. */
export type HeaderList = [string, string][];

export type HttpVersion = "HTTP/1.1" | "HTTP/1.0";

export interface RequestHead {
  method: string;
  target: string;
  version: HttpVersion;
  headers: HeaderList;
}

export interface ResponseHead {
  version: HttpVersion;
  status: number;
  reason: string;
  headers: HeaderList;
}

/** How the message body is delimited (RFC 9112 section 6.3). */
export type Framing =
  | { kind: "none" }
  | { kind: "length"; length: number }
  | { kind: "chunked" }
  | { kind: "close" };

/**
 * A protocol error. `status` is the status code a proxy should answer with:
 * 400, 431, 501, 505 for bad requests, 502 for bad upstream responses.
 */
export class HttpParseError extends Error {
  constructor(
    message: string,
    public status: number,
  ) {
    super(message);
    this.name = "HttpParseError";
  }
}
