import { render } from "preact";
import { useEffect, useState } from "preact/hooks";
import { forgetToken, get, listen, post, setToken, takeToken } from "./api.ts";
import { ErrorBox, Tabs } from "./common.tsx";
import { InterceptsView } from "./intercepts.tsx";
import { ComposeView, FlowsView, RemoteView, SessionsView } from "./more.tsx";
import { RulesView } from "./rules.tsx";
import { TrafficView } from "./traffic.tsx";
import { WebSocketView } from "./websocket.tsx";

type View = "traffic" | "intercepts" | "rules" | "websocket" | "sessions" | "compose" | "flows" | "remote";

function NoToken({ rejected }: { rejected: boolean }) {
  return (
    <div class="no-token" data-testid="no-token">
      <h1>tapwire</h1>
      <p>{rejected ? "The token this page had was refused: tapwire has restarted since (every start makes a new token)." : "This page needs the API token, which it gets from the address tapwire opens."}</p>
      <p>
        Open it from <code>tapwire open</code> (or <code>tapwire open --print</code> to get the address).
      </p>
    </div>
  );
}

function App() {
  const [token] = useState(() => takeToken());
  const [rejected, setRejected] = useState(false);
  const [view, setView] = useState<View>("traffic");
  const [live, setLive] = useState(false);
  const [trafficTick, setTrafficTick] = useState(0);
  const [interceptTick, setInterceptTick] = useState(0);
  const [paused, setPaused] = useState(0);
  const [capture, setCapture] = useState<{ capturing: boolean; entry_count: number } | null>(null);
  const [error, setError] = useState<unknown>(null);
  if (token) setToken(token, () => (forgetToken(), setRejected(true)));

  const loadCapture = () => get<{ capturing: boolean; entry_count: number }>("/capture/status").then(setCapture, setError);
  useEffect(() => {
    if (!token) return;
    void loadCapture();
    return listen(
      (event, data) => {
        if (event === "traffic") setTrafficTick((x) => x + 1);
        else if (event === "intercepts") {
          setPaused(Number(data.paused) || 0);
          setInterceptTick((x) => x + 1);
        } else if (event === "hello") {
          setPaused(Number((data.intercepts as { paused?: number })?.paused) || 0);
          setTrafficTick((x) => x + 1);
          setInterceptTick((x) => x + 1);
        }
      },
      setLive,
    );
  }, [token]);

  if (!token || rejected) return <NoToken rejected={rejected} />;
  return (
    <div class="app">
      <header class="top">
        <strong class="brand">tapwire</strong>
        <Tabs
          tabs={[
            ["traffic", "Traffic"],
            ["intercepts", paused ? `Intercepts (${paused})` : "Intercepts"],
            ["rules", "Rules"],
            ["websocket", "WebSocket"],
            ["sessions", "Sessions"],
            ["compose", "Compose"],
            ["flows", "Flows"],
            ["remote", "Remote files"],
          ]}
          value={view}
          onChange={setView}
        />
        <span class="spacer" />
        <label class="switch" title="record traffic (it is proxied either way)">
          <input
            type="checkbox"
            data-testid="capture-toggle"
            checked={capture?.capturing ?? false}
            onChange={async (e) => {
              try {
                await post((e.target as HTMLInputElement).checked ? "/capture/start" : "/capture/stop");
              } catch (err) {
                setError(err);
              }
              void loadCapture();
            }}
          />{" "}
          capture
        </label>
        <span class={live ? "live on" : "live"} data-testid="live" title={live ? "live updates connected" : "live updates disconnected; retrying"}>
          {live ? "● live" : "○ offline"}
        </span>
      </header>
      <ErrorBox error={error} />
      <main>
        {view === "traffic" && <TrafficView trafficTick={trafficTick} />}
        {view === "intercepts" && <InterceptsView tick={interceptTick} />}
        {view === "rules" && <RulesView />}
        {view === "websocket" && <WebSocketView />}
        {view === "sessions" && <SessionsView trafficTick={trafficTick} />}
        {view === "compose" && <ComposeView />}
        {view === "flows" && <FlowsView />}
        {view === "remote" && <RemoteView />}
      </main>
    </div>
  );
}

render(<App />, document.getElementById("app")!);
