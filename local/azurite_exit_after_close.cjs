// Preloaded into Azurite (NODE_OPTIONS=--require) by local/azurite.py.
//
// On SIGINT or SIGTERM Azurite 3.x closes its three services (saving their metadata to disk) and logs
// "Azurite <Blob|Queue|Table> service successfully closed" for each, but once any client has connected
// its Node process then lingers for minutes (a keep-alive socket or timer keeps the event loop alive).
// A launcher would wait ~10 s and SIGKILL it; a launcher that was itself killed would leave it running.
// So: exit as soon as all three services have closed, and at the latest 10 s after the signal.
"use strict";

const closed = new Set();
const log = console.log.bind(console);
console.log = (...args) => {
  log(...args);
  const match = /^Azurite (\w+) service successfully closed/.exec(String(args[0]));
  if (match) {
    closed.add(match[1]);
    if (closed.size === 3) process.exit(0);
  }
};

for (const name of ["SIGINT", "SIGTERM"]) {
  process.once(name, () => setTimeout(() => process.exit(1), 10_000).unref());
}
