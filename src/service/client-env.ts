/**
 * What makes common clients use the proxy and trust its CA: the environment variables that `tapwire env` prints and
 * that `tapwire run` gives its command, and the files in the data directory they point at (written atomically):
 *
 *   ca-bundle.pem    the system's trusted roots (node:tls rootCertificates) followed by tapwire's ca.pem, for the
 *                    clients whose variable *replaces* their trust store (SSL_CERT_FILE, REQUESTS_CA_BUNDLE, ...)
 *   node-proxy.cjs   a preload for Node.js versions that ignore HTTP(S)_PROXY (before 22.21 / 24.5), given with
 *                    NODE_OPTIONS=--require
 *
 * Nothing here is specific to the command line: the CLI, an embedded service and other front ends share it.
 */
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { CA_CERT_FILE } from "../core/tls/ca.ts";
import { writeFileAtomic } from "../store/json-state.ts";

export const CA_BUNDLE_FILE = "ca-bundle.pem";
export const NODE_PRELOAD_FILE = "node-proxy.cjs";

export interface ClientFiles {
  /** tapwire's CA certificate (ca.pem). */
  caPem: string;
  /** The combined bundle: system roots plus ca.pem. */
  bundle: string;
  /** The Node.js preload. */
  nodePreload: string;
}

/** Writes `path` atomically unless it already holds exactly `content`. */
function writeIfChanged(path: string, content: string, mode: number): void {
  try {
    if (readFileSync(path, "utf8") === content) return;
  } catch {}
  writeFileAtomic(path, content, mode);
}

/** The bundle's text: every system root, then tapwire's CA (PEM blocks, one blank-line-free run). */
export function caBundleText(caPem: string): string {
  // node:tls loaded here (with node:net, ~10 ms): the commands that import this module mostly do not write the bundle
  const { rootCertificates } = require("node:tls") as typeof import("node:tls");
  const blocks = [...rootCertificates.map((c) => c.trim()), caPem.trim()];
  return blocks.join("\n") + "\n";
}

/**
 * Brings ca-bundle.pem and node-proxy.cjs in `dataDir` up to date with its ca.pem and returns the three paths.
 * Throws when there is no ca.pem yet (the service makes it at its first start).
 */
export function ensureClientFiles(dataDir: string): ClientFiles {
  const caPem = join(dataDir, CA_CERT_FILE);
  if (!existsSync(caPem)) throw new Error(`no CA certificate in ${dataDir} yet (${CA_CERT_FILE} is made when tapwire first starts)`);
  const bundle = join(dataDir, CA_BUNDLE_FILE);
  writeIfChanged(bundle, caBundleText(readFileSync(caPem, "utf8")), 0o644);
  const nodePreload = join(dataDir, NODE_PRELOAD_FILE);
  writeIfChanged(nodePreload, NODE_PRELOAD_SOURCE, 0o644);
  return { caPem, bundle, nodePreload };
}

/** The NODE_OPTIONS word that loads the preload (double quotes, as NODE_OPTIONS reads them). */
export function nodePreloadOption(file: string): string {
  return `--require "${file.replaceAll("\\", "\\\\").replaceAll('"', '\\"')}"`;
}

/** `current` NODE_OPTIONS with the preload of `file` removed (for `tapwire env --unset`). */
export function withoutNodePreload(current: string, file: string): string {
  return current.replace(nodePreloadOption(file), "").replace(/\s+/g, " ").trim();
}

/** The variable names `clientEnv` sets, in its order. */
export const CLIENT_ENV_NAMES = [
  "HTTP_PROXY",
  "HTTPS_PROXY",
  "http_proxy",
  "https_proxy",
  "NO_PROXY",
  "no_proxy",
  "SSL_CERT_FILE",
  "NODE_EXTRA_CA_CERTS",
  "REQUESTS_CA_BUNDLE",
  "CURL_CA_BUNDLE",
  "GIT_SSL_CAINFO",
  "AWS_CA_BUNDLE",
  "NODE_USE_ENV_PROXY",
  "NODE_OPTIONS",
] as const;

export interface ClientEnvOptions {
  /** The proxy's port on 127.0.0.1. */
  proxyPort: number;
  /** The proxy's host as clients should reach it (default 127.0.0.1). */
  proxyHost?: string;
  files: ClientFiles;
  /** NODE_OPTIONS as it stands now: the preload is added in front of it (once). */
  nodeOptions?: string;
  /** NO_PROXY's value; empty by default, so that requests to loopback go through the proxy too. */
  noProxy?: string;
}

/**
 * The variables, in a stable order (CLIENT_ENV_NAMES). curl, git, Python (urllib, requests), Bun, Go, Ruby and most
 * other clients read HTTP(S)_PROXY (some only the lower-case spelling, curl ignores upper-case HTTP_PROXY);
 * Node.js reads NODE_USE_ENV_PROXY (22.21+, 24.5+) or loads the preload. SSL_CERT_FILE (OpenSSL: Python, Ruby,
 * curl built on OpenSSL, Bun), REQUESTS_CA_BUNDLE, CURL_CA_BUNDLE, GIT_SSL_CAINFO and AWS_CA_BUNDLE replace the
 * trust store, so they name the combined bundle; NODE_EXTRA_CA_CERTS adds to it, so it names ca.pem alone.
 */
export function clientEnv(o: ClientEnvOptions): [name: (typeof CLIENT_ENV_NAMES)[number], value: string][] {
  const proxy = `http://${o.proxyHost ?? "127.0.0.1"}:${o.proxyPort}`;
  const noProxy = o.noProxy ?? "";
  const preload = nodePreloadOption(o.files.nodePreload);
  const current = (o.nodeOptions ?? "").trim();
  const nodeOptions = current.includes(preload) ? current : [preload, current].filter(Boolean).join(" ");
  return [
    ["HTTP_PROXY", proxy],
    ["HTTPS_PROXY", proxy],
    ["http_proxy", proxy],
    ["https_proxy", proxy],
    ["NO_PROXY", noProxy],
    ["no_proxy", noProxy],
    ["SSL_CERT_FILE", o.files.bundle],
    ["NODE_EXTRA_CA_CERTS", o.files.caPem],
    ["REQUESTS_CA_BUNDLE", o.files.bundle],
    ["CURL_CA_BUNDLE", o.files.bundle],
    ["GIT_SSL_CAINFO", o.files.bundle],
    ["AWS_CA_BUNDLE", o.files.bundle],
    ["NODE_USE_ENV_PROXY", "1"],
    ["NODE_OPTIONS", nodeOptions],
  ];
}

/** node-proxy.cjs (plain CommonJS for any Node.js from 12 on; no dependencies). */
export const NODE_PRELOAD_SOURCE = String.raw`// Written by tapwire (see: tapwire env --help). Loaded with NODE_OPTIONS=--require, it sends the requests of
// node:http and node:https (through their global agents) via $HTTP_PROXY / $HTTPS_PROXY, honouring $NO_PROXY, on
// Node.js versions that ignore those variables. Node.js 22.21+ and 24.5+ do it themselves with NODE_USE_ENV_PROXY=1
// (tapwire env sets it too), and this file then does nothing; so it does under Bun.
"use strict";
(function () {
  if (process.versions.bun || !process.versions.node) return;
  var v = process.versions.node.split(".").map(Number);
  var nativeSupport = v[0] > 24 || (v[0] === 24 && v[1] >= 5) || (v[0] === 22 && v[1] >= 21);
  if (nativeSupport && process.env.NODE_USE_ENV_PROXY === "1") return;
  var http = require("http");
  var https = require("https");
  var net = require("net");
  var tls = require("tls");

  function envVar(name) {
    return process.env[name.toLowerCase()] || process.env[name.toUpperCase()] || "";
  }
  function unbracket(h) {
    return String(h).replace(/^\[|\]$/g, "").toLowerCase();
  }
  function bypassed(host, port) {
    var list = envVar("no_proxy").split(/[\s,]+/);
    host = unbracket(host);
    for (var i = 0; i < list.length; i++) {
      var e = list[i].toLowerCase();
      if (!e) continue;
      if (e === "*") return true;
      var ePort = "";
      var m = /^(\[[^\]]*\]|[^:]*):(\d+)$/.exec(e);
      if (m) { e = m[1]; ePort = m[2]; }
      e = unbracket(e);
      if (ePort && ePort !== String(port)) continue;
      if (e.charAt(0) === "*") e = e.slice(1);
      if (e.charAt(0) === ".") { if (host === e.slice(1) || host.endsWith(e)) return true; }
      else if (host === e || host.endsWith("." + e)) return true;
    }
    return false;
  }
  function proxyFor(secure) {
    var value = envVar(secure ? "https_proxy" : "http_proxy");
    if (!value) return null;
    try {
      var u = new URL(/^[a-z][a-z0-9+.-]*:\/\//i.test(value) ? value : "http://" + value);
      return u.protocol === "http:" ? u : null;
    } catch (e) {
      return null;
    }
  }
  function tunnel(proxy, host, port, cb) {
    var target = (net.isIPv6(unbracket(host)) ? "[" + unbracket(host) + "]" : host) + ":" + port;
    var sock = net.connect(Number(proxy.port) || 80, unbracket(proxy.hostname));
    var head = "CONNECT " + target + " HTTP/1.1\r\nHost: " + target + "\r\n";
    if (proxy.username) {
      var cred = decodeURIComponent(proxy.username) + ":" + decodeURIComponent(proxy.password);
      head += "Proxy-Authorization: Basic " + Buffer.from(cred).toString("base64") + "\r\n";
    }
    sock.write(head + "\r\n");
    var got = Buffer.alloc(0);
    var settled = false;
    function finish(err) {
      if (settled) return;
      settled = true;
      sock.removeListener("readable", onReadable);
      sock.removeListener("error", finish);
      sock.removeListener("end", onEnd);
      if (err) { sock.destroy(); cb(err); } else cb(null, sock);
    }
    function onEnd() { finish(new Error("the proxy closed the connection during CONNECT " + target)); }
    function onReadable() {
      var chunk;
      while ((chunk = sock.read()) !== null) {
        got = Buffer.concat([got, chunk]);
        var end = got.indexOf("\r\n\r\n");
        if (end < 0) { if (got.length > 65536) return finish(new Error("the proxy's answer to CONNECT is too long")); continue; }
        var line = got.toString("latin1", 0, got.indexOf("\r\n"));
        if (!/^HTTP\/1\.[01] 2\d\d/.test(line)) return finish(new Error("the proxy refused CONNECT " + target + ": " + line));
        if (got.length > end + 4) sock.unshift(got.subarray(end + 4));
        return finish(null);
      }
    }
    sock.on("readable", onReadable);
    sock.on("error", finish);
    sock.on("end", onEnd);
  }
  function patch(Base, secure, defaultPort) {
    function ProxyAgent(options) { Base.call(this, options); }
    Object.setPrototypeOf(ProxyAgent.prototype, Base.prototype);
    Object.setPrototypeOf(ProxyAgent, Base);
    var baseCreate = Base.prototype.createConnection;
    ProxyAgent.prototype.createConnection = function (options, cb) {
      var host = options.host || options.hostname || "localhost";
      var port = options.port || defaultPort;
      var proxy = proxyFor(secure);
      if (!proxy || bypassed(host, port)) return baseCreate.call(this, options, cb);
      tunnel(proxy, host, port, function (err, sock) {
        if (err) return cb(err);
        if (!secure) { cb(null, sock); sock.resume(); return; }
        var servername = options.servername || (net.isIP(unbracket(host)) ? undefined : host);
        cb(null, tls.connect(Object.assign({}, options, { socket: sock, servername: servername })));
      });
    };
    return ProxyAgent;
  }
  var HttpAgent = patch(http.Agent, false, 80);
  var HttpsAgent = patch(https.Agent, true, 443);
  http.globalAgent = new HttpAgent(Object.assign({}, http.globalAgent.options));
  https.globalAgent = new HttpsAgent(Object.assign({}, https.globalAgent.options));
})();
`;
