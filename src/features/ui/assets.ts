import type { UiBundle } from "../../../ui/bundle.ts";

/** Set by build.ts (`define`): the UI bundle embedded in the compiled binary. */
declare const TAPWIRE_UI_BUNDLE: UiBundle | undefined;

let pending: Promise<UiBundle> | null = null;

/**
 * The web UI's script and styles: those embedded in the binary by build.ts, else (running from source) bundled
 * once, in memory, by the same function build.ts uses (ui/bundle.ts), at the first request that needs them.
 */
export function uiBundle(): Promise<UiBundle> {
  if (typeof TAPWIRE_UI_BUNDLE === "object" && TAPWIRE_UI_BUNDLE) return Promise.resolve(TAPWIRE_UI_BUNDLE);
  pending ??= import("../../../ui/bundle.ts").then((m) => m.bundleUi()).catch((e) => {
    pending = null;
    throw e;
  });
  return pending;
}

/** The page: no inline script or style (the Content-Security-Policy forbids both). */
export function indexHtml(version: string): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="color-scheme" content="light dark">
<meta name="referrer" content="no-referrer">
<title>tapwire ${version.replace(/[<>&"]/g, "")}</title>
<link rel="icon" href="/ui/favicon.svg" type="image/svg+xml">
<link rel="stylesheet" href="/ui/app.css">
<script type="module" src="/ui/app.js"></script>
</head>
<body><div id="app"></div></body>
</html>
`;
}
